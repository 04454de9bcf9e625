"""Nested counted repeats: ``(x{a,b}){lo,hi}`` is ``x{lo*a, hi*b}`` when the counts it
allows form one interval (``ast._merge_counts``), and stays nested when they have gaps.

Without the merge, ``(?:(?:a){0,215}){215}`` had derivatives that were unions of hundreds
of terms: 300 DFA states took 23 s (found by the long fuzz run, issue 14)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tether import regex as rx
from tether.regex.ast import K_REPEAT


def test_a_repeat_of_a_nullable_repeat_is_one_counter() -> None:
    assert rx.parse("(?:(?:(a)){0,215}){215,215}") is rx.parse("a{0,46225}")
    assert rx.parse("(?:a{2,3}){4}") is rx.parse("a{8,12}")
    assert rx.parse("(?:a{1,}){3,5}") is rx.parse("a{3,}")


def test_counts_with_gaps_stay_nested() -> None:
    n = rx.parse("(?:a{3}){0,4}")  # 0, 3, 6, 9, 12
    assert n.kind == K_REPEAT and n.args[0].kind == K_REPEAT
    assert rx.matches(n, b"aaaaaa") and not rx.matches(n, b"aaaa")


def test_a_nested_repeat_fills_its_dfa_with_few_terms_per_state() -> None:
    # each state of a{0,46225} is one counter: its size does not grow with the count read
    dfa = rx.LexerDfa([rx.parse("(?:(?:a){0,215}){215}")])
    assert dfa.fill_reachable(limit=300) > 300
    node = rx.parse("(?:(?:a){0,215}){215}")
    for _ in range(250):
        node = rx.derivative(node, ord("a"))
    assert len(rx.to_string(node)) < 40


COUNT = st.integers(0, 4)
HI = st.one_of(st.none(), st.integers(0, 5))


@settings(max_examples=300, deadline=None)
@given(a=COUNT, b=HI, lo=COUNT, hi=HI, item=st.sampled_from(["x", "xy", "(?:x|)", "[xy]"]))
def test_nested_repeats_match_as_python_re(a: int, b: int | None, lo: int, hi: int | None, item: str) -> None:
    if (b is not None and b < a) or (hi is not None and hi < lo):
        return
    pattern = f"(?:(?:{item}){{{a},{'' if b is None else b}}}){{{lo},{'' if hi is None else hi}}}"
    node, oracle = rx.parse(pattern), re.compile(pattern)
    for n in range(0, 26):
        for text in ("x" * n, "xy" * (n // 2), "y" * n):
            assert rx.matches(node, text.encode()) == (oracle.fullmatch(text) is not None), (pattern, text)
