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
