"""The lexer's terminal nodes: those that need no parsing are built at first use, the
others (regex texts) when the lexer is made, so an invalid regex is still refused then."""

from __future__ import annotations

import pytest

from tether import regex as rx
from tether.errors import GrammarError
from tether.grammar.ir import NT, Grammar, T, Terminal
from tether.parser.lexer import LexemeNodes, Lexer
from tether.parser.tables import ParserTables
from tether.parser.terminals import lexeme_node, matches_empty


def _grammar(*terminals: Terminal) -> Grammar:
    g = Grammar(start="s")
    for t in terminals:
        g.add_terminal(t)
        g.add_rule("s", T(t.name))
    g.add_rule("s", NT("s"), NT("s"))
    return g


def test_cheap_nodes_wait_for_their_first_use() -> None:
    lit = Terminal("a", literal="alpha")
    built = Terminal("b", regex="b+", node=rx.parse("b+"))
    text = Terminal("c", regex="c[0-9]*")
    nodes = LexemeNodes([lit, built, text])
    assert nodes._nodes[0] is None and nodes._nodes[1] is None
    assert nodes._nodes[2] is lexeme_node(text)  # parsed when the lexer is made
    assert nodes[0] is lexeme_node(lit) and nodes._nodes[0] is not None
    assert list(nodes[0:3]) == [lexeme_node(t) for t in (lit, built, text)]
    lexer = Lexer(ParserTables(_grammar(lit, built, text)))
    s = lexer.start_state([0, 1, 2])
    assert lexer.step(lexer.step(s, ord("a")), ord("l")) >= 0


def test_an_invalid_regex_is_refused_when_the_lexer_is_made() -> None:
    bad = Terminal("x", regex="a(")
    with pytest.raises(GrammarError):
        LexemeNodes([Terminal("a", literal="a"), bad])


@pytest.mark.parametrize("t, empty", [
    (Terminal("e", literal=""), True),
    (Terminal("a", literal="a"), False),
    (Terminal("s", regex="a*", node=rx.parse("a*")), True),
    (Terminal("p", regex="a+", node=rx.parse("a+")), False),
    (Terminal("m", regex="a*", node=rx.parse("a*"), max_len=3), True),
    (Terminal("r", regex="(ab)?"), True),
    (Terminal("z", literal="", stop="END"), False),
])
def test_matches_empty_reads_cheap_terminals_as_their_nodes_would(t: Terminal, empty: bool) -> None:
    from tether.parser.terminals import terminal_node

    assert matches_empty(t) is empty
    assert bool(terminal_node(t).nullable) is empty


@pytest.mark.parametrize("t", [
    Terminal("a", literal="alpha"),
    Terminal("e", literal=""),
    Terminal("u", literal="né\"x"),
    Terminal("i", literal="Alpha", ignore_case=True),
    Terminal("m", literal="alphabet", max_len=3),
    Terminal("s", literal="ab", stop="END"),
    Terminal("b", regex="b+", node=rx.parse("b+")),
    Terminal("n", regex="b*", node=rx.parse("b*")),
    Terminal("l", regex="b*", node=rx.parse("b*"), max_len=2),
    Terminal("c", regex="c[0-9]*"),
])
def test_lexeme_nodes_built_without_the_memo_are_the_memo_s(t: Terminal) -> None:
    # plain literals and built nodes skip terminal_node's memo; each lexeme node is the
    # interned node the memo's path gives (options applied, the empty string left out)
    from tether.parser.terminals import terminal_node

    node = terminal_node(t)
    want = rx.intersect(node, rx.complement(rx.EPSILON)) if node.nullable else node
    assert lexeme_node(t) is want
    assert not lexeme_node(t).nullable
