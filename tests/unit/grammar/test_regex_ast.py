"""Simple Python regexes read into the front-end AST keep their language."""

from __future__ import annotations

import re

import pytest
from grammar_reference import cf_accepts
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.grammar import Grammar
from tether.grammar.lower import lower
from tether.grammar.regex_ast import regex_to_ast

PATTERNS = [
    "abc", "a|bc|", "[a-c]+d?", "[^ab]*", "a{2,3}b{2}", "(ab)+|c*", "(?:a|b)(?:c|d)", ".",
    "(?s:.)", "\\d+", "\\w\\W", "\\s?", "(?i)ab", "(?i:a)b", "[^\\d]", "a.c", "x*?y", "[a-]",
    # an empty class; a long alternation of literals (read as a trie); merged counts
    "[^\\s\\S]|a", "ab|abc|b|bc|c|cd|d|dx|x|xy|1", "a?a?a{2}",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=25, deadline=None)
@given(text=st.text("abcdxyAB1 \n_", max_size=5))
def test_same_language_as_re(pattern: str, text: str) -> None:
    node = regex_to_ast(pattern)
    assert node is not None
    g = lower({"s": node}, "s", mode="lexeme").simplified()
    assert cf_accepts(g, text) == bool(re.fullmatch(pattern, text)), (pattern, text)


@pytest.mark.parametrize("pattern", ["^a", "a$", "(?=a)a", "(a)\\1", "a{1000}", "\\bab"])
def test_unsupported_stays_opaque(pattern: str) -> None:
    assert regex_to_ast(pattern) is None


def test_kbnf_regex_followed_by_what_it_could_swallow() -> None:
    parser = pytest.importorskip("tether.parser")
    # the greedy terminal [a-z]+ would swallow the mandatory "end"
    g = Grammar.from_kbnf('start ::= #"[a-z]+" "end" ;')
    assert parser.accepts(g, "abcend") and not parser.accepts(g, "end")


@pytest.mark.parametrize(("pattern", "flags", "text"), [
    ("[^\\w]", "i", "\u0345"),  # U+0345 folds to a word character, but is not one itself
    ("[^\\w]", "i", "\u212a"),  # KELVIN SIGN: a word character under any folding
    ("\\W", "i", "\u0345"),
    ("[^K\\W]", "i", "k"),
    ("[a-z]+", "i", "\u212a"),  # folds to k
])
def test_case_folding_follows_re(pattern: str, flags: str, text: str) -> None:
    # the AST is read by the regex layer's parser, so it folds case exactly as `re` does
    from tether.grammar.regexgen import to_regex
    from tether.regex import matches, parse

    node = regex_to_ast(pattern, flags=flags)
    assert node is not None
    written = parse(to_regex(node, lambda r: node))
    assert matches(written, text) == bool(re.fullmatch(f"(?{flags}){pattern}", text))
