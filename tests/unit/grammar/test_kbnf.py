"""KBNF-style EBNF front end (seed 002): syntax, regex terminals, except!."""

from __future__ import annotations

import pytest
from grammar_reference import cf_accepts

from tether.errors import GrammarError
from tether.grammar import Grammar


def test_syntax() -> None:
    g = Grammar.from_kbnf(
        """
        (* a comment *)
        start ::= 'a' B* [ 'c' ] { "d" } "\\n" ;
        B ::= 'b' | #"[0-9]+" ;
        B ::= 'x' ;  (* a second definition adds alternatives *)
        """
    )
    for s in ["a\n", "ab12xc\n", "addd\n"]:
        assert cf_accepts(g, s), s
    assert not cf_accepts(g, "ac\nd")


def test_start_defaults_to_first_rule_without_start() -> None:
    g = Grammar.from_kbnf("S ::= 'ab' S | 'ab' ;")
    assert g.start == "S" and cf_accepts(g, "abab")


def test_seed_example_drops_useless_rules() -> None:
    # seed 002: C is unreachable and dropped; S ::= S is removed; B ::= 'a'B never ends
    with pytest.raises(GrammarError, match="can never finish"):
        Grammar.from_kbnf("S ::= 'ab'S | 'ab'A | 'ab'B; S ::= S; A ::= 'c'; B ::= 'a'B; C ::= 'dc';")
    g = Grammar.from_kbnf("S ::= 'ab'S | 'ab'A ; S ::= S; A ::= 'c'; C ::= 'dc';")
    assert "C" not in g.nonterminals()
    assert any("'C'" in w for w in g.warnings)
    assert cf_accepts(g, "ababc")


def test_except() -> None:
    parser = pytest.importorskip("tether.parser")
    # except! of literals becomes character-level rules: the text before '>>' is
    # recognized exactly, though a greedy terminal would swallow the first '>'
    g = Grammar.from_kbnf("start ::= '<' except!('>>') '>>' ;")
    assert parser.accepts(g, "<abc>>")
    assert parser.accepts(g, "<>>")
    assert parser.accepts(g, "<a>b>>")
    assert not parser.accepts(g, "<a>>b>>")


def test_except_of_several_literals() -> None:
    parser = pytest.importorskip("tether.parser")
    g = Grammar.from_kbnf("start ::= except!('ab' | 'ba') '.' ;")
    assert parser.accepts(g, "aacbb.") and parser.accepts(g, "a.")
    assert not parser.accepts(g, "cab.") and not parser.accepts(g, "bba.")


def test_except_of_a_regex_is_a_set_operation_terminal() -> None:
    g = Grammar.from_kbnf('start ::= except!(#"[0-9]") ;')
    assert [t.expr[0] for t in g.terminals.values()] == ["and"]


def test_except_with_a_limit_and_a_regular_rule() -> None:
    parser = pytest.importorskip("tether.parser")
    g = Grammar.from_kbnf("start ::= except!(stop, 3) stop ; stop ::= 'x' | 'y' ;")
    assert parser.accepts(g, "abcx")
    assert not parser.accepts(g, "abcdx")
    assert not parser.accepts(g, "ayx")


def test_complement_and_lazy_regex() -> None:
    parser = pytest.importorskip("tether.parser")
    # an opaque complement is one greedy terminal: it is only useful where nothing
    # it could swallow follows
    g = Grammar.from_kbnf("start ::= #ex\"[0-9]+\" ;")
    assert g.terminals and all(t.expr is not None for t in g.terminals.values())
    assert parser.accepts(g, "ab") and parser.accepts(g, "1a") and not parser.accepts(g, "12")
    lazy = Grammar.from_kbnf("start ::= #e\"a+\" 'ab' ;")
    assert any(t.lazy for t in lazy.terminals.values())


def test_except_needs_a_regular_operand() -> None:
    with pytest.raises(GrammarError, match="regular operand"):
        Grammar.from_kbnf("start ::= except!(A) ; A ::= '(' A ')' | 'x' ;")
