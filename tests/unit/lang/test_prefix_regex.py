"""Regex prefix viability (the Follow rule of REGEX without the engine), checked against
Python's ``re``: every prefix of a matching string is viable (soundness), and a prefix
is reported dead only when no tested extension matches."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.lang.prefix_regex import PrefixRegex

CASES = {
    r"[A-Z]{2}-[0-9]{3}": ["AB-123", "ZZ-000"],
    r"[0-2][0-9]:[0-5][0-9]": ["12:30", "00:00"],
    r" ?-?[0-9]+(?:\.[0-9]+)?": [" 3.14", "-7", "42"],
    r"(ab|cd)*e?": ["", "abcd", "cde", "e"],
    r'\{ ?"a" ?: ?"(?:[^"\\\n]|\\.)*" ?\}': ['{"a": "x\\"y"}', '{"a":""}'],
    r"(?i)yes|no": ["YES", "no"],
    r"a{2,4}b*": ["aa", "aaaab", "aaabbb"],
}


@pytest.mark.parametrize(("pattern", "examples"), list(CASES.items()))
def test_every_prefix_of_a_match_is_viable(pattern: str, examples: list[str]) -> None:
    rx = PrefixRegex(pattern)
    for s in examples:
        assert re.fullmatch(pattern, s), s
        assert rx.fullmatch(s)
        for k in range(len(s) + 1):
            assert rx.viable(s[:k]), (pattern, s[:k])


@pytest.mark.parametrize(("pattern", "dead"), [
    (r"[A-Z]{2}-[0-9]{3}", ["a", "ABC", "AB-1234", "AB_"]),
    (r"[0-2][0-9]:[0-5][0-9]", ["3", "12:6", "12:345"]),
    (r"(ab|cd)*e?", ["ac", "abe e", "ee"]),
])
def test_dead_prefixes(pattern: str, dead: list[str]) -> None:
    rx = PrefixRegex(pattern)
    for s in dead:
        assert not rx.viable(s), (pattern, s)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(CASES)), st.text(alphabet="ab-AB0123:.e{}\" ", max_size=6),
       st.text(alphabet="ab-AB0123:.e{}\" ", max_size=6))
def test_dead_means_no_extension_matches(pattern: str, prefix: str, rest: str) -> None:
    if not PrefixRegex(pattern).viable(prefix):
        assert re.fullmatch(pattern, prefix + rest) is None
