"""Parse trees of accepted texts: leaves spell the text, every node follows a rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parser_grammars import build, language
from test_byte_parser import JSON

from tether.errors import GrammarError
from tether.grammar.ir import Grammar
from tether.parser import ByteParser, Lexeme, Tree, parse


def check_tree(tree: Tree, grammar: Grammar) -> None:
    """Every node's children are the right side of one of its rules."""
    rules = {(r.lhs, tuple(s.name for s in r.rhs)) for r in grammar.rules}
    todo = [tree]
    while todo:
        node = todo.pop()
        names = tuple(c.terminal if isinstance(c, Lexeme) else c.rule for c in node.children)
        assert (node.rule, names) in rules, (node.rule, names)
        todo += [c for c in node.children if isinstance(c, Tree)]


def test_json_tree() -> None:
    text = ' {"a": [1, 2.5, true], "b": {}} '
    tree = parse(JSON, text)
    assert tree.rule == "value"
    leaves = tree.iter_lexemes()
    assert "".join(x.text for x in leaves) == text.replace(" ", "")  # %ignore'd WS left out
    assert [x.terminal for x in leaves][:4] == ["LBRACE", "STRING", "COLON", "LBRACK"]
    assert all(text.encode()[x.start : x.end].decode() == x.text for x in leaves)
    assert "NUMBER '2.5'" in tree.pretty()


def test_incomplete_or_wrong_text_raises() -> None:
    with pytest.raises(ValueError, match="incomplete"):
        parse(JSON, "[1, 2")
    with pytest.raises(ValueError, match="not allowed"):
        parse(JSON, "[1, x]")


def test_pending_lexeme_at_the_end_is_part_of_the_tree() -> None:
    p = ByteParser(JSON.tables, lexer=JSON.lexer)
    p.feed("123")  # the NUMBER lexeme has not been ended by a following byte
    assert p.parse_tree().iter_lexemes() == [Lexeme("NUMBER", "123", 0, 3)]


def test_ambiguous_and_nullable() -> None:
    g = build("E", {"E": ["E p E", "n"]})
    tree = parse(g, "npnpn")
    check_tree(tree, g)
    assert "".join(x.text for x in tree.iter_lexemes()) == "npnpn"
    g = build("A", {"A": ["B B B"], "B": ["b", ""]})
    tree = parse(g, "bb")
    check_tree(tree, g)
    assert len(tree.children) == 3


def test_long_right_recursive_input_needs_no_recursion() -> None:
    g = build("S", {"S": ["a S", "a"]})
    tree = parse(g, "a" * 1200)  # deeper than the default recursion limit
    depth = 0
    node: Tree | Lexeme = tree
    while isinstance(node, Tree):
        node = node.children[-1]
        depth += 1
    assert depth == 1200


NTS = ["S", "A", "B"]
TERMS = ["a", "b"]
symbol = st.sampled_from(NTS + TERMS)
grammar_rules = st.fixed_dictionaries(
    {n: st.lists(st.lists(symbol, max_size=3).map(" ".join), min_size=1, max_size=3) for n in NTS}
)


@settings(max_examples=80, deadline=None)
@given(grammar_rules)
def test_trees_of_generated_grammars(rules) -> None:
    sentences = language(rules, set(TERMS), 5)["S"]
    try:
        g = build("S", rules, {x: x for x in TERMS})
        bp = ByteParser(g)
    except GrammarError:
        assert not sentences
        return
    for w in sorted(sentences)[:20]:
        text = "".join(w)
        tree = parse(bp, text)
        check_tree(tree, g)
        assert "".join(x.text for x in tree.iter_lexemes()) == text
        assert tree.rule == "S"
