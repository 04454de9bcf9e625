"""Lark front end: syntax subset, common imports, %ignore, llguidance extensions we keep."""

from __future__ import annotations

import pytest
from grammar_reference import cf_accepts

from tether.errors import GrammarError
from tether.grammar import Grammar


def test_rules_terminals_and_operators() -> None:
    g = Grammar.from_lark(
        """
        ?start: item+ -> items
        item: NAME ("=" value)? ";"
            | "[" [value ("," value)*] "]"
        value: NUMBER | "x"i | /y+/
        NAME: ("a".."z")+
        %import common.NUMBER
        """
    )
    for s in ["a=1;", "ab;", "[]", "[X,yy,2.5]a=x;"]:
        assert cf_accepts(g, s), s
    for s in ["", "A=1;", "[,]"]:
        assert not cf_accepts(g, s), s


@pytest.mark.parametrize(
    ("rule", "yes", "no"),
    [
        ('start: "a" ~ 3', ["aaa"], ["aa", "aaaa"]),
        ('start: "a" ~ 1..2', ["a", "aa"], ["", "aaa"]),
        ('start: ab{3,5}\nab: "a" | "b"', ["aba", "abaab"], ["ab", "aaaaaa"]),
        ('start: ab{,2}\nab: "a" | "b"', ["", "ab"], ["aaa"]),
        ("start: A\nA: \"x\" B\nB: /[0-9]/+", ["x1", "x12"], ["x"]),
    ],
)
def test_repetitions(rule: str, yes: list[str], no: list[str]) -> None:
    g = Grammar.from_lark(rule)
    for s in yes:
        assert cf_accepts(g, s), s
    for s in no:
        assert not cf_accepts(g, s), s


def test_terminals_keep_lark_semantics() -> None:
    g = Grammar.from_lark('start: WORD "!"\nWORD: /[a-z]+/')
    assert g.terminals["WORD"].regex == "(?:[a-z]+)"


def test_ignore_and_imports() -> None:
    g = Grammar.from_lark(
        "start: INT (\",\" INT)*\n%import common (INT, WS)\n%ignore WS\n%import common.CNAME -> NAME\n"
    )
    assert g.ignore == ["WS"]
    assert "NAME" not in g.terminals  # unused terminals are not part of the grammar


def test_escaped_string_import_matches_json_strings() -> None:
    g = Grammar.from_lark("start: ESCAPED_STRING\n%import common.ESCAPED_STRING")
    for s in ['""', '"a\\"b"', '"\\\\"']:
        assert cf_accepts(g, s), s
    assert not cf_accepts(g, '"a\\"')


def test_priority_is_ignored_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="priority"):
        g = Grammar.from_lark('start: A | B\nA.2: "a"\nB: "b"')
    assert any("priority" in w for w in g.warnings)


def test_string_escapes() -> None:
    assert cf_accepts(Grammar.from_lark(r'start: "a\x00b"'), "a\x00b")
    assert cf_accepts(Grammar.from_lark(r'start: "\x41\x42"'), "AB")
    assert cf_accepts(Grammar.from_lark(r'start: "\\x41"'), "\\x41")
    assert cf_accepts(Grammar.from_lark(r'start: "\x7f\xFf"'), "\x7f\xff")


def test_nullable_terminal_is_optional() -> None:
    g = Grammar.from_lark('start: "<" TEXT ">"\nTEXT: /[a-z]/*')
    assert cf_accepts(g, "<>") and cf_accepts(g, "<ab>")


def test_intersection_and_negation_terminals() -> None:
    g = Grammar.from_lark("start: ST\nST: /[a-z]+/ & ~/(.*)[ab](.*)/")
    assert g.terminals["ST"].expr is not None
    parser = pytest.importorskip("tether.parser")
    assert parser.accepts(g, "xyz")
    assert not parser.accepts(g, "xaz")


def test_stop_attribute_makes_a_lazy_terminal() -> None:
    g = Grammar.from_lark('start: foo "!"\nfoo[stop="END"]: /.*/')
    t = next(t for t in g.terminals.values() if t.stop)
    assert t.stop == "END" and t.lazy


def test_json_schema_is_embedded() -> None:
    pytest.importorskip("tether.grammar.json_schema")
    g = Grammar.from_lark('start: "x" %json {"type": "integer"}')
    parser = pytest.importorskip("tether.parser")
    assert parser.accepts(g, "x12") and not parser.accepts(g, "x1.5")
    with pytest.raises(GrammarError, match="JSON"):
        Grammar.from_lark('start: %json {"type": "nonsense"}')


def test_nested_lark_grammar() -> None:
    parser = pytest.importorskip("tether.parser")
    g = Grammar.from_lark('start: /[ab]+/ foobar\nfoobar: %lark {\n start: "foo" | x\n x: "{" "}"\n}')
    assert parser.accepts(g, "abfoo") and parser.accepts(g, "a{}") and not parser.accepts(g, "a")
    with pytest.raises(GrammarError, match="in %lark grammar: unknown name 'valeu'") as info:
        Grammar.from_lark('start: %lark {\n start: "a" valeu\n}')
    assert (info.value.line, info.value.column) == (2, 13)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("start: foo{x}\nfoo: \"a\"", "'foo' is a rule, not a template"),
        ("start: foo\nfoo::_: \"a\"", "parametric"),
        ("%declare X\nstart: \"a\"", "%declare"),
        ("%import python.NAME\nstart: NAME", "only %import common"),
        ("start: <[100-200]>", "token ranges"),
        ("start: /a(?=b)/", "look-around"),
        ("start: /(a)\\1/", "backreferences"),
    ],
)
def test_unsupported_features_fail_clearly(text: str, fragment: str) -> None:
    with pytest.raises(GrammarError, match=fragment):
        Grammar.from_lark(text)
