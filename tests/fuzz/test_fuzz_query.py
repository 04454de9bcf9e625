"""Fuzzing the query language: query texts built from grammar-ish fragments (decoder
clauses, prompt statements with holes, Python statements, where / from / distribute
clauses, well- and ill-formed constraints), then mangled by random noise (inserted
brackets, quotes, null bytes, cut spans, repeated spans for nesting).

Loading must give a query or a tether error (QuerySyntaxError, ConstraintError,
LimitError, ArgumentError), never a foreign exception or a RecursionError; queries made
from fragments alone are also run on a scripted rule model: a result or a tether error.
Outcomes are counted by class and printed at the end of the module. The CI variant
runs ~30 s at most; ``-m slow`` runs the long one.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lang_rule_model import rule_model

from tether.errors import TetherError
from tether.lang import QueryResult, load_query
from tether.limits import Limits, limits

OUTCOMES: Counter[str] = Counter()
# noise can make the query's own Python warn (invalid escapes): that is the user's code
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")
MODEL = rule_model({"Q:": " abc. no", "R:": " 12 apples", "S:": " yes", "item": " one"})
LIMITS = Limits(max_text_chars=20_000, max_tokens=64, max_n=4)


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"query fuzz: {sum(OUTCOMES.values())} texts"] + [f"  {k}: {v}" for k, v in OUTCOMES.most_common()]
    if tr is not None:
        tr.write_line("\n".join(lines))


DECODERS = ["", "argmax\n", "sample(n=2, temperature=0.7)\n", "beam(n=2)\n", 'beam(n="x")\n', "beam(n=-1)\n",
            "sample(temperature=-1)\n", "beam_search(n=2)\n", "argmax(chunksize=4)\n"]
STATEMENTS = [
    '"Q: [A]"', '"R:[B: int]"', '"S: [C]" where len(C) < 5', '"{x} [D]"', "\"T: [E: r'[a-c]+'] ok\"",
    '"x = {x + 1}"', 'for i in range(2):\n    "item [F]"', 'if x:\n    "S: [G]" where G in [" yes", " no"]',
    '"S:[H]" where STOPS_AT(H, ".")', '"[[literal]] {{braces}} [I]"', '"{:user} hi [J]"', "y = [x] * 2",
]
CONSTRAINTS = [
    'A in [" abc", " no"]', 'STOPS_AT(A, ".")', "len(TOKENS(A)) < 5", "INT(B)", 'REGEX(A, r"[a-")', "A in 5",
    "STOPS_AT(A)", "Y == 1", "FOO(A)", 'len(A) < "a"', "len(A) < 0", "INT(A, 3)", 'A == " abc"',
    "not A", "len(words(A)) < 3 or A == ' x'", 'REGEX(A, r"[a-z ]+")', "type(B) is int",
]
TAILS = ["", '\nfrom "embedded"', '\nfrom 5', '\ndistribute A over [" a", " b"]', "\ndistribute Z over [1]"]
NOISE = list("[]{}()\"'\\\n\t :#@,=+-") + ["\x00", "where ", "[A", '"""', "    ", "\\x", "lambda: ", "**"]


def nest(k: int, inner: str) -> str:
    return "(" * k + inner + ")" * k


@st.composite
def query_text(draw: st.DrawFn) -> tuple[str, bool]:
    """(text, clean): clean texts come from fragments only (and are run)."""
    parts = ["x = 1"]
    parts += draw(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4))
    text = draw(st.sampled_from(DECODERS)) + "\n".join(parts)
    cs = draw(st.lists(st.sampled_from(CONSTRAINTS), max_size=3))
    if cs:
        depth = draw(st.sampled_from([0, 0, 0, 3, 250]))
        text += "\nwhere\n    " + " and ".join(nest(depth, c) for c in cs)
    text += draw(st.sampled_from(TAILS))
    clean = True
    for _ in range(draw(st.integers(0, 4))):
        clean = False
        op = draw(st.sampled_from(["insert", "delete", "cut", "repeat"]))
        i = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(NOISE)) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 5)):]
        elif op == "cut":
            text = text[:i]
        else:
            j = draw(st.integers(i, min(len(text), i + 6)))
            text = text[:i] + text[i:j] * draw(st.integers(2, 400)) + text[j:]
    return text, clean


def try_query(text: str, clean: bool) -> None:
    with limits(LIMITS):
        try:
            q = load_query(text)
        except TetherError as exc:
            assert isinstance(exc, ValueError | SyntaxError), type(exc)
            OUTCOMES[f"load: {type(exc).__name__}"] += 1
            return
        if not clean:
            OUTCOMES["load: ok (noisy text, not run)"] += 1
            return
        try:
            r = q.run(model=MODEL, max_tokens=6, seed=1)
        except TetherError as exc:
            OUTCOMES[f"run: {type(exc).__name__}"] += 1
            return
        assert isinstance(r, QueryResult)
        for h in r.holes:
            assert h.stopped in ("stop", "eos", "budget", "masked", "length", "supplied", "distribute")
        OUTCOMES["run: ok"] += 1


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(query_text())
def test_query_text_fails_closed(case: tuple[str, bool]) -> None:
    try_query(*case)


@pytest.mark.slow
@settings(max_examples=5_000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(query_text())
def test_query_text_fails_closed_long(case: tuple[str, bool]) -> None:
    try_query(*case)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_random_text_fails_closed(text: str) -> None:
    with limits(LIMITS):
        try:
            load_query(text)
            OUTCOMES["random text: ok"] += 1
        except TetherError as exc:
            assert isinstance(exc, ValueError | SyntaxError), type(exc)
            OUTCOMES[f"random text: {type(exc).__name__}"] += 1


def test_the_fuzzer_reached_every_outcome() -> None:
    """Runs last in this module: texts loaded, ran and failed (else the fragments are broken)."""
    if not OUTCOMES:
        pytest.skip("run with the fuzz tests above")
    assert OUTCOMES["run: ok"] > 0 and OUTCOMES["load: QuerySyntaxError"] > 0, OUTCOMES
    assert any(k.endswith("ConstraintError") for k in OUTCOMES), OUTCOMES
