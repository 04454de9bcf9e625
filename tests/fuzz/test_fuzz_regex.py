"""Fuzzing the regex compiler with hostile patterns.

Whatever the text, ``tether.regex.parse`` / ``search`` (and the lazy DFA built on the
result) either compile, and then agree with Python's ``re`` on short texts wherever ``re``
accepts the pattern, or raise a ``TetherError``; never another exception, and every
example finishes in bounded time under small `Limits`. The quick tests run in CI; the
``slow`` variants run many more examples and print the outcomes by class.
"""

from __future__ import annotations

import re
import time
import warnings
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from regex_strategies import patterns

import tether
from tether.errors import TetherError
from tether.limits import Limits, limits
from tether.regex import LexerDfa, Regex, matches, parse, search

SMALL = Limits(max_text_chars=400, max_repeat=2_000, max_nesting=40, max_expanded=50_000,
               max_dfa_states=3_000, compile_seconds=5.0)
BOUND_S = 20.0  # per example, generous for a loaded machine (most take milliseconds)
TEXTS = ["", "a", "ab", "aB", "0", "a\n", "\n", " a", "é", "aaa", "{", "-", "_x"]

_META = list("()[]{}|*+?.^$\\-,:=!<>#&~")
_LETTERS = list("aAbBzZ019dDwWsSbBpPuUxXNkgGLimsx _\n")
fuzz_text = st.text(alphabet=st.sampled_from(_META + _LETTERS) | st.characters(), max_size=40)

_ATOMS = ["a", "[ab]", ".", r"\w", "(?:ab|c)", "(a)", r"\d", "[^x]"]


@st.composite
def huge_counts(draw: st.DrawFn) -> str:
    """Counted repeats with huge or many-digit counts, nested and chained."""
    atom = draw(st.sampled_from(_ATOMS))
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 10**30).map(str) | st.integers(0, 3000).map(str)
                 | st.just("9" * 5000) | st.just("0" * 4400 + "7"))
        form = draw(st.sampled_from(["{%s}", "{%s,}", "{0,%s}", "{%s,%s}"]))
        count = form % ((n, n) if form.count("%s") == 2 else (n,))
        atom = f"(?:{atom}){count}" if draw(st.booleans()) else atom + count
    return atom


@st.composite
def deep_nesting(draw: st.DrawFn) -> str:
    """Groups nested tens to thousands deep, of every opening kind."""
    depth = draw(st.integers(1, 1500))
    opener = draw(st.sampled_from(["(", "(?:", "(?=", "(?!", "(?i:", "(?:a|"]))
    closer = draw(st.sampled_from([")", ")*", ")?", "){2}", "|b)"]))
    return opener * depth + draw(st.sampled_from(["a", "$", "", "\\b"])) + closer * depth


# Python's ``re`` backtracks: on groups quantified inside quantified groups its time grows
# exponentially with their depth (``(?:a|`` x 10 ``a`` ``)*`` x 10 takes 24 s on "aaa"; 8
# levels 0.2 s). Deeper patterns are still compiled and bounded here; only the oracle is
# not asked.
_ORACLE_DEPTH = 6


def _quantified_depth(pattern: str) -> int:
    """The deepest nesting of groups that a quantifier follows (escapes and classes
    skipped; an approximation of the text, enough to keep the oracle fast)."""
    opened: list[int] = []  # offsets of the open groups
    closed: list[tuple[int, int]] = []  # (open offset, close offset) of quantified groups
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            j = i + 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            opened.append(i)
        elif c == ")" and opened:
            start = opened.pop()
            if i + 1 < n and pattern[i + 1] in "*+?{":
                closed.append((start, i))
        i += 1
    best = 0
    stack: list[int] = []  # close offsets of the enclosing quantified groups
    for start, end in sorted(closed):
        while stack and stack[-1] < start:
            stack.pop()
        stack.append(end)
        best = max(best, len(stack))
    return best


def _outcome(pattern: str, flavor: str) -> str:
    """Compile ``pattern`` under SMALL; return the outcome class (raises on a defect)."""
    start = time.perf_counter()
    try:
        with limits(SMALL):
            full = parse(pattern, flavor=flavor)  # type: ignore[arg-type]
            found = search(pattern, flavor=flavor)  # type: ignore[arg-type]
            LexerDfa([full, found]).fill_reachable(limit=300)
        outcome = "compiled"
    except TetherError as e:
        outcome = type(e).__name__
        full = found = None
    elapsed = time.perf_counter() - start
    assert elapsed < BOUND_S, (pattern[:80], elapsed)
    assert isinstance(Regex(pattern, flavor), Regex)  # type: ignore[arg-type]
    if full is not None and found is not None and flavor == "python":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                oracle = re.compile(pattern)
            except (re.error, OverflowError, RecursionError, ValueError):
                oracle = None
        if oracle is not None and _quantified_depth(pattern) <= _ORACLE_DEPTH:
            for t in TEXTS:
                assert matches(full, t) == (oracle.fullmatch(t) is not None), (pattern, t, "fullmatch")
                assert matches(found, t) == (oracle.search(t) is not None), (pattern, t, "search")
    return outcome


OUTCOMES: Counter[str] = Counter()


def _check(pattern: str, flavor: str = "python") -> None:
    OUTCOMES[_outcome(pattern, flavor)] += 1


def test_tether_regex_builds_the_constraint_without_compiling() -> None:
    r = tether.regex("a{99999999999}")
    assert isinstance(r, Regex) and r.pattern == "a{99999999999}"
    with pytest.raises(TetherError):
        parse(r.pattern)


_QUICK = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
_LONG = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck),
                 database=None)


@_QUICK
@given(fuzz_text, st.sampled_from(["python", "ecma"]))
def test_arbitrary_text_compiles_or_raises_a_tether_error(pattern: str, flavor: str) -> None:
    _check(pattern, flavor)


@_QUICK
@given(patterns())
def test_structured_patterns_compile_or_raise_a_tether_error(pattern: str) -> None:
    _check(pattern)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(huge_counts())
def test_huge_counts_compile_or_raise_a_tether_error(pattern: str) -> None:
    _check(pattern)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(deep_nesting())
@example("(?:a|" * 16 + ")*" * 16)  # tether compiles it; Python's re would take hours on it
def test_deep_nesting_compiles_or_raises_a_tether_error(pattern: str) -> None:
    _check(pattern)


@pytest.mark.slow
def test_fuzz_regex_long() -> None:
    OUTCOMES.clear()

    @_LONG
    @given(fuzz_text, st.sampled_from(["python", "ecma"]))
    def text(pattern: str, flavor: str) -> None:
        _check(pattern, flavor)

    @_LONG
    @given(patterns())
    def structured(pattern: str) -> None:
        _check(pattern)

    @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(huge_counts() | deep_nesting())
    def hostile(pattern: str) -> None:
        _check(pattern)

    text()
    structured()
    hostile()
    print(f"\nregex fuzz: {sum(OUTCOMES.values())} inputs, outcomes {dict(OUTCOMES)}")
