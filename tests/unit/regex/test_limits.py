"""Hostile regexes meet the `tether.limits.Limits`: each bound has its own named test.

Every refusal is a `LimitError` naming the limit and ``offset N in pattern`` (or a
`RegexError` at an offset), in bounded time; nothing recurses with the input's depth.
"""

from __future__ import annotations

import random
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import LimitError, RegexError, RegexLimitError, TetherError
from tether.limits import Limits, check_deadline, deadline, limits
from tether.regex import LexerDfa, matches, parse, search
from tether.regex.show import size


def _fresh(tag: str) -> str:
    """A group that makes a pattern unique (compiled patterns are cached)."""
    return f"(?:{tag}{random.random()})?"


# --- max_text_chars -----------------------------------------------------------------------


def test_pattern_longer_than_max_text_chars_is_a_limit_error() -> None:
    with limits(max_text_chars=100), pytest.raises(LimitError, match="max_text_chars") as e:
        parse("a" * 101)
    assert e.value.value == 101 and e.value.maximum == 100
    with limits(max_text_chars=100):
        assert matches(parse("b" * 100), "b" * 100)


# --- max_repeat -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "offset"),
    [("a{11}", 1), ("xy{2,11}", 2), ("(ab){11,}", 4), ("[a-z]{0,11}", 5), ("a{11,12}", 1)],
)
def test_repeat_count_above_max_repeat_names_the_offset(pattern: str, offset: int) -> None:
    with limits(max_repeat=10), pytest.raises(LimitError) as e:
        parse(pattern)
    assert e.value.limit == "max_repeat" and e.value.place == f"offset {offset} in pattern"
    assert f"offset {offset} in pattern" in str(e.value)


def test_default_max_repeat_refuses_200000() -> None:
    with pytest.raises(LimitError, match=r"max_repeat exceeded: 200000 > 100000 at offset 1 in pattern"):
        parse("a{200000}")


def test_repeat_count_with_thousands_of_digits_is_a_limit_error_not_a_value_error() -> None:
    for p in ("a{" + "9" * 5000 + "}", "a{1," + "9" * 5000 + "}", "a{" + "0" * 5000 + "1}"):
        try:
            parse(p)
        except LimitError as e:
            assert e.limit == "max_repeat" and e.place == "offset 1 in pattern"
        else:
            assert p.startswith("a{000")  # leading zeros: the count is 1
    assert matches(parse("a{" + "0" * 5000 + "1}"), "a")


def test_repeat_at_the_limit_compiles() -> None:
    with limits(max_repeat=10):
        assert matches(parse("a{10}" + _fresh("r")), "a" * 10)


# --- max_alternatives -----------------------------------------------------------------------


def test_alternation_past_max_alternatives_names_the_offset() -> None:
    with limits(max_alternatives=3), pytest.raises(LimitError) as e:
        parse("a|b|c|d")
    assert e.value.limit == "max_alternatives" and e.value.place == "offset 5 in pattern"
    with limits(max_alternatives=3):
        assert matches(parse("x|y|z"), "z")
        assert matches(parse("(?:a|b)(?:c|d)(?:e|f)"), "ade")  # the bound is per alternation


# --- max_nesting ------------------------------------------------------------------------------


def test_group_nesting_deeper_than_max_nesting_names_the_offset() -> None:
    with limits(max_nesting=5), pytest.raises(LimitError) as e:
        parse("((((((a))))))")
    assert e.value.limit == "max_nesting" and e.value.place == "offset 5 in pattern"
    with limits(max_nesting=5):
        assert matches(parse("(((((a)))))" + _fresh("n")), "a")


@pytest.mark.parametrize(
    "shape",
    [
        "(" * 500 + "a" + ")" * 500,
        "(?:" * 500 + "a" + ")*" * 500,
        "(?:b|" * 500 + "a" + ")" * 500,
        "(?=" * 500 + "a" + ")" * 500,
        "(?!" * 500 + "b$" + ")" * 500 + "a",
        "(?i:" * 500 + "a" + ")" * 500,
        "[" + "(" * 500 + "]",  # in a class, "(" is a character: no nesting
    ],
    ids=["groups", "stars", "alternations", "lookaheads", "negative-lookaheads", "flag-groups", "class"],
)
def test_500_nested_groups_give_a_limit_error_or_a_correct_result(shape: str) -> None:
    for f in (parse, search):
        try:
            node = f(shape)
        except LimitError as e:
            assert e.limit == "max_nesting" and "offset" in e.place
            continue
        oracle = re.compile(shape)
        for text in ("a", "(", "b", ""):
            want = (oracle.fullmatch if f is parse else oracle.search)(text) is not None
            assert matches(node, text) == want, (shape[:20], text)


def test_nesting_up_to_the_default_limit_agrees_with_re() -> None:
    n = Limits().max_nesting
    for shape in ("(?:" * n + "a" + ")" * n, "(?:x|" * n + "a" + ")?" * n, "(?=" * n + "a" + ")" * n + "a"):
        node = parse(shape)
        oracle = re.compile(shape)
        for text in ("a", "x", "", "xa", "aa"):
            assert matches(node, text) == (oracle.fullmatch(text) is not None), (shape[:12], text)


def test_raised_max_nesting_never_raises_recursion_error() -> None:
    with limits(max_nesting=5000):
        for shape in ("(?:" * 3000 + "a" + ")" * 3000, "(?:" * 3000 + "a" + ")?" * 3000):
            try:
                node = parse(shape)
            except LimitError as e:
                assert e.limit == "max_nesting"
            else:
                assert matches(node, "a")


def test_long_sequences_do_not_recurse() -> None:
    for p, text, want in [
        ("^" + "a" * 5000 + "$", "a" * 5000, True),
        ("a?" * 3000, "a" * 2999, True),
        ("(?:a|b)?" * 2000, "ab" * 1000, True),
        ("\\b" + "a" * 3000 + "\\b", "a" * 3000, True),
    ]:
        node = parse(p)
        assert matches(node, text) is want
        assert len(str(node)) <= 400


# --- nested counted repeats --------------------------------------------------------------------


def test_nested_counted_repeats_compile_fast_and_exactly() -> None:
    t = time.perf_counter()
    node = parse("((a{50}){50}){50}")
    assert time.perf_counter() - t < 1.0
    assert size(node) < 20  # lazy counters: one node per level, not 125,000
    assert matches(node, "a" * 125_000) and not matches(node, "a" * 124_999)


def test_nested_counted_repeats_past_max_expanded_are_a_limit_error() -> None:
    with limits(max_expanded=10_000), pytest.raises(LimitError) as e:
        parse("((a{50}){50}){50}")
    assert e.value.limit == "max_expanded" and e.value.value == 125_000
    assert e.value.place == "offset 13 in pattern"  # the outermost {50}


def test_counted_repeats_adding_up_past_max_expanded_are_a_limit_error() -> None:
    # no quantifier wraps them: the sum is checked once the pattern is read
    with limits(max_expanded=10_000), pytest.raises(LimitError) as e:
        parse("a{4000}b{4000}c{4000}")
    assert e.value.limit == "max_expanded" and e.value.value == 12_000
    with limits(max_expanded=10_000), pytest.raises(LimitError, match="max_expanded"):
        parse("(?:x{3000}y{3000}z{3000}w{3000})*")  # a star adds nothing, the parts do
    with limits(max_expanded=10_000):
        parse("(?:a{3000}b{3000}c{3000})*d*e+f?")  # 9,003: within


def test_a_1000_1000_is_refused_in_python_and_bounded_in_ecma() -> None:
    with pytest.raises(RegexError, match="multiple repeat") as e:
        parse("a{1000}{1000}")
    assert e.value.offset == 7 and re.compile("(?:a{1000}){1000}")  # re refuses a{1000}{1000} too
    t = time.perf_counter()
    node = parse("a{1000}{1000}", flavor="ecma")
    assert parse("(?:a{1000}){1000}") is node
    assert not matches(node, "a" * 1000)
    with limits(max_dfa_states=2_000), pytest.raises(RegexLimitError, match="max_dfa_states"):
        LexerDfa([node]).fill_reachable()
    with limits(max_expanded=999_999), pytest.raises(LimitError, match="max_expanded"):
        parse("a{1000}{1000}" + _fresh("e"), flavor="ecma")
    assert time.perf_counter() - t < 10.0


# --- the lazy DFA and the compile deadline -------------------------------------------------------


def test_lazy_dfa_uses_the_current_max_dfa_states() -> None:
    node = parse("[ab]*a[ab]{12}")
    assert LexerDfa([node]).max_states == Limits().max_dfa_states
    with limits(max_dfa_states=300):
        dfa = LexerDfa([node])
    assert dfa.max_states == 300
    with pytest.raises(RegexLimitError, match="more than 300 states"):
        dfa.fill_reachable()
    assert LexerDfa([node], max_states=7).max_states == 7


def test_a_long_dfa_build_stops_at_the_compile_deadline() -> None:
    node = parse("[ab]*a[ab]{14}")
    with limits(compile_seconds=0.02), deadline(), pytest.raises(LimitError) as e:  # noqa: PT012
        time.sleep(0.03)
        LexerDfa([node]).fill_reachable()
    assert e.value.limit == "compile_seconds"


def test_regex_compile_checks_the_deadline() -> None:
    with limits(compile_seconds=1e-9), pytest.raises(LimitError, match="compile_seconds"):
        parse("^x" + _fresh("d") + "y$")
    check_deadline()  # no deadline outside a compile


# --- large alternations ----------------------------------------------------------------------


def _words(n: int) -> list[str]:
    return [f"literal_number_{i:05d}" for i in range(n)]


@pytest.mark.parametrize("n", [10_000, 20_000])
def test_alternation_of_many_literals_compiles_in_linear_time(n: int) -> None:
    words = _words(n)
    t = time.perf_counter()
    node = parse("|".join(words) + _fresh("w"))
    elapsed = time.perf_counter() - t
    # left-factored: nodes for distinct prefixes only (about 1.1 n here), not 22 n
    assert size(node) < 2 * n
    assert elapsed < 0.5 * n / 1000, elapsed  # ~0.04 s per 1000 measured; 3.3 s for 10k before
    rng = random.Random(n)
    for w in rng.sample(words, 50):
        assert matches(node, w) and not matches(node, w + "0") and not matches(node, w[:-1])


def test_alternation_of_ignore_case_literals_is_fast() -> None:
    t = time.perf_counter()
    node = parse("|".join(_words(10_000)) + _fresh("i"), ignore_case=True)
    assert time.perf_counter() - t < 5.0  # 37 s before case folding was cached per character
    assert matches(node, "LITERAL_Number_09999")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(alphabet="abc\n.", max_size=4), min_size=8, max_size=30),
       st.lists(st.text(alphabet="abc\n.", max_size=5), max_size=10))
def test_factored_alternations_agree_with_re(words: list[str], texts: list[str]) -> None:
    pattern = "|".join(re.escape(w) for w in words)
    oracle = re.compile(pattern)
    full, found = parse(pattern), search(pattern, flavor="python")
    for t in [*texts, *words, *(w + "a" for w in words)]:
        assert matches(full, t) == (oracle.fullmatch(t) is not None), (pattern, t)
        assert matches(found, t) == (oracle.search(t) is not None), (pattern, t)


def test_lookbehind_of_an_alternation_of_single_characters_still_compiles() -> None:
    p = "(?<=a|b|c|d|e|f|g|h|i)x"
    node = search(p, flavor="python")
    assert matches(node, "ax") and not matches(node, "zx")


# --- foreign exceptions ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [b"a", None, 3, ["a"]])
def test_a_pattern_that_is_not_a_str_is_a_regex_error(bad: object) -> None:
    with pytest.raises(RegexError, match="pattern must be str"):
        parse(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("flavor", ["perl", None, ["python"]])
def test_an_unknown_flavor_is_a_regex_error(flavor: object) -> None:
    with pytest.raises(RegexError, match="flavor must be one of"):
        parse("a", flavor=flavor)  # type: ignore[arg-type]


def test_every_refusal_is_a_tether_value_error() -> None:
    for p in ("a{200000}", "(" * 300, "a**", "(?<=ab)c", "\\1"):
        with pytest.raises(TetherError) as e:
            parse(p)
        assert isinstance(e.value, ValueError)
