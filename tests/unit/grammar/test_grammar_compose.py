"""Python constructors and composition: from_regex, from_choices, sequence, union, embed."""

from __future__ import annotations

import pytest
from grammar_reference import cf_accepts

from tether.errors import GrammarError, RegexError
from tether.grammar import NT, Grammar


def test_from_regex() -> None:
    g = Grammar.from_regex(r"[0-9]{2,3}")
    assert len(g.terminals) == 1 and cf_accepts(g, "123") and not cf_accepts(g, "1")
    with pytest.raises(RegexError):
        Grammar.from_regex("a(")


def test_from_regex_matching_empty() -> None:
    parser = pytest.importorskip("tether.parser")
    g = Grammar.from_regex("a*")
    assert parser.accepts(g, "") and parser.accepts(g, "aaa") and not parser.accepts(g, "b")


def test_from_choices() -> None:
    g = Grammar.from_choices(["yes", "no", "yes", ""])
    assert {t.literal for t in g.terminals.values()} == {"yes", "no"}
    for s in ["yes", "no", ""]:
        assert cf_accepts(g, s)
    assert not cf_accepts(g, "yesno")
    with pytest.raises(GrammarError, match="empty"):
        Grammar.from_choices([])


def test_sequence_and_union_rename_clashing_symbols() -> None:
    a = Grammar.from_gbnf('root ::= x "!"\nx ::= "a"+ | "(" x ")"')
    b = Grammar.from_gbnf('root ::= x "?"\nx ::= "b"+ | "[" x "]"')
    s = Grammar.sequence(a, b)
    assert cf_accepts(s, "(a)![[b]]?") and not cf_accepts(s, "(b)![[a]]?")
    u = Grammar.union(a, b)
    assert cf_accepts(u, "aa!") and cf_accepts(u, "[b]?") and not cf_accepts(u, "aa?")


def test_embed_as_a_nonterminal() -> None:
    host = Grammar.from_lark('start: "<" "x" ">"')
    inner = Grammar.from_regex("[0-9]+")
    ref = host.embed(inner, "number")
    assert ref == NT("number")
    host.add_rule("start", ref)
    assert cf_accepts(host.simplified(), "42") and cf_accepts(host.simplified(), "<x>")
    with pytest.raises(GrammarError, match="already"):
        host.embed(inner, "number")


def test_grammars_with_different_ignores_do_not_combine() -> None:
    a = Grammar.from_lark('start: "a"\n%import common.WS\n%ignore WS')
    b = Grammar.from_lark('start: "b"')
    with pytest.raises(GrammarError, match="ignore"):
        Grammar.sequence(a, b)


def test_sequence_lowers_the_combined_grammar_again() -> None:
    parser = pytest.importorskip("tether.parser")
    # greedy lexing of the choice "ab" would swallow the "b" that "bc" needs
    s = Grammar.sequence(Grammar.from_choices(["a", "ab"]), Grammar.from_choices(["bc"]))
    assert parser.accepts(s, "abc") and parser.accepts(s, "abbc") and not parser.accepts(s, "ab")
    # a repetition followed by more of the same characters
    s2 = Grammar.sequence(Grammar.from_gbnf("root ::= [0-9]+"), Grammar.from_gbnf('root ::= [0-9] "x"'))
    assert parser.accepts(s2, "123x") and not parser.accepts(s2, "1x")


def test_composition_after_mutation_uses_the_current_rules() -> None:
    a = Grammar.from_choices(["x"])
    a.add_rule("start", a.add_terminal(__import__("tether.grammar", fromlist=["Terminal"]).Terminal("Y", literal="y")))
    u = Grammar.union(a, Grammar.from_choices(["z"]))
    for s in ["x", "y", "z"]:
        assert cf_accepts(u, s), s


@pytest.mark.parametrize("flavor", ["python", "ecma"])
def test_from_regex_matching_empty_in_both_flavors(flavor: str) -> None:
    parser = pytest.importorskip("tether.parser")
    g = Grammar.from_regex("a*", flavor=flavor, ignore_case=True)  # type: ignore[arg-type]
    assert parser.accepts(g, "") and parser.accepts(g, "aA") and not parser.accepts(g, "b")


# --- a JSON Schema grammar inside a sequence or union keeps its language -----------------

_SCHEMAS = [
    {"type": "object", "properties": {"id": {"type": "integer"}}},
    {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
     "required": ["id"]},
    {"type": "array", "items": {"enum": ["a", "ab", "abc"]}},
]
_DOCS = [b'{"id":3}', b'{"id":3,"name":"x"}', b'{"other":1}', b'{}', b'["a","abc"]', b'["ab"]', b'[]']


@pytest.mark.parametrize("schema", _SCHEMAS, ids=["one-key", "two-keys", "enum-items"])
def test_a_json_schema_grammar_composed_keeps_its_language(schema: dict) -> None:
    # its key literals are lexed beside its "any other key" terminal: lowering the
    # literals alone again must not change which documents it accepts
    from tether.parser.byte_parser import accepts

    g = Grammar.from_json_schema(schema)
    tail = Grammar.from_regex("x+")
    for doc in _DOCS:
        alone = accepts(g, doc)
        assert accepts(Grammar.sequence(g), doc) == alone, doc
        assert accepts(Grammar.sequence(g, tail), doc + b"xx") == alone, doc
        assert accepts(Grammar.union(g, tail), doc) == alone, doc
