"""Fuzzing generate()'s arguments on the scripted model: every call either returns a
truthful result or raises a tether error, never a foreign exception.

Arguments are drawn from good values, bad values of the right type (out of range, NaN,
empty) and values of the wrong type, for every argument at once. Outcomes are counted by
class and printed at the end of the module (``-s`` or the terminal summary). The CI
variant runs ~30 s at most; ``-m slow`` runs the long one.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import TetherError
from tether.limits import Limits
from tether.models.scripted import ScriptedModel
from tether.program import Generation, generate, regex

OUTCOMES: Counter[str] = Counter()
MODEL = ScriptedModel(seed=5)
LIMITS = Limits(max_tokens=64, max_n=6, max_batch=4, max_prompt_chars=2_000)


@pytest.fixture(scope="module", autouse=True)
def report(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    yield
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"generate() fuzz: {sum(OUTCOMES.values())} calls"] + [f"  {k}: {v}" for k, v in OUTCOMES.most_common()]
    if tr is not None:
        tr.write_line("\n".join(lines))


weird = st.sampled_from([None, "x", b"x", -1, 0, 1.5, math.nan, math.inf, -math.inf, True, [], {}, object()])
ints = st.one_of(st.integers(-3, 8), st.sampled_from([2**70, -(2**70)]), weird)
floats = st.one_of(st.floats(-2, 3), st.integers(-1, 2), weird)
decoders = st.one_of(
    st.sampled_from(["argmax", "sample", "beam", "best_of", "greedy", "beam_search", "bogus", "", "beam(", "1+1"]),
    st.builds(lambda name, k, v: f"{name}({k}={v!r})",
              st.sampled_from(["argmax", "sample", "beam", "best_of"]),
              st.sampled_from(["n", "temperature", "top_p", "width", "seed", "bogus"]),
              st.one_of(st.integers(-2, 5), st.floats(-1, 2, allow_nan=False), st.just("x"))),
    weird,
)
texts = st.text(alphabet="abc xyz:\n{}\"0123", max_size=20)
messages = st.lists(
    st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "system", ""]), "content": texts}),
        st.fixed_dictionaries({"role": st.just("user")}),
        st.fixed_dictionaries({"role": st.just("user"), "content": st.one_of(st.none(), st.integers())}),
        texts,
    ),
    min_size=0, max_size=3,
)
prompts = st.one_of(texts, messages, st.lists(st.one_of(texts, messages), max_size=6), weird,
                    st.just("\u4e00 not in the scripted vocabulary"), st.just("a" * 2_001))
outputs = st.one_of(
    st.none(),
    st.lists(st.text(alphabet="abc yesno", max_size=5), max_size=4),
    st.builds(regex, st.sampled_from([r"[0-9]{1,3}", r"(abc)+", r"yes|no", r"[a-", r"a{2,}b?", ""])),
    st.sampled_from([5, "[0-9]+", [1, 2], {"type": "integer"}, {"type": 5}, object()]),
)
stops = st.one_of(st.none(), st.sampled_from(["", "a", "\n", "y"]), st.lists(st.sampled_from(["", "b", "no", "1"]), max_size=3), weird)


def check_result(g: Generation, output: Any, max_tokens: int) -> None:
    assert isinstance(g, Generation)
    assert g.finish_reason in ("stop", "length", "error")
    assert len(g.tokens) <= max_tokens
    if g.valid:
        assert g.error is None
        if isinstance(output, list) and output:
            assert g.value in output and g.text == g.value
        if isinstance(output, type(regex("x"))):
            assert re.fullmatch(output.pattern, g.text), (output.pattern, g.text)
    else:
        assert g.value is None and g.error


def one_call(kwargs: dict[str, Any]) -> None:
    prompt, output = kwargs.pop("prompt"), kwargs.pop("output")
    try:
        out = generate(MODEL, prompt, output, limits=LIMITS, **kwargs)
    except TetherError as exc:
        assert isinstance(exc, ValueError | RuntimeError | SyntaxError | ImportError), type(exc)
        OUTCOMES[type(exc).__name__] += 1
        return
    items = out if isinstance(out, list) else [out]
    flat = [g for x in items for g in (x if isinstance(x, list) else [x])]
    for g in flat:
        check_result(g, output, kwargs["max_tokens"])
    OUTCOMES["ok (valid)" if all(g.valid for g in flat) else "ok (some not valid)"] += 1


ANY = {
    "prompt": prompts,
    "output": outputs,
    "decoder": decoders,
    "n": ints,
    "max_tokens": st.one_of(st.integers(-1, 12), st.just(65), weird),
    "temperature": st.one_of(st.none(), floats),
    "top_k": ints,
    "top_p": floats,
    "min_p": floats,
    "seed": st.one_of(st.none(), ints),
    "stop": stops,
    "healing": st.one_of(st.booleans(), ints),
}
GOOD = {
    "prompt": st.one_of(texts, st.lists(texts, min_size=1, max_size=3),
                        st.just([{"role": "user", "content": "hi"}])),
    "output": st.one_of(st.none(), st.lists(st.text(alphabet="abc yesno", min_size=1, max_size=5), min_size=1,
                                            max_size=4),
                        st.builds(regex, st.sampled_from([r"[0-9]{1,3}", r"(abc)+", r"yes|no", r" ?[a-z]+!"]))),
    "decoder": st.sampled_from(["argmax", "sample", "beam", "best_of", "sample(n=3)", "beam(n=2, width=3)"]),
    "n": st.just(1),
    "max_tokens": st.integers(1, 10),
    "temperature": st.sampled_from([None, 0.0, 0.7, 1.5]),
    "top_k": st.integers(0, 5),
    "top_p": st.sampled_from([0.5, 0.9, 1.0]),
    "min_p": st.sampled_from([0.0, 0.1]),
    "seed": st.one_of(st.none(), st.integers(0, 100)),
    "stop": st.one_of(st.none(), st.sampled_from(["a", "y", "1", "\n"])),
    "healing": st.booleans(),
}


@st.composite
def arguments(draw: st.DrawFn) -> dict[str, Any]:
    """Good values for every argument but a few (0 to 3) drawn from anything."""
    wild = draw(st.sets(st.sampled_from(sorted(ANY)), max_size=3))
    return {k: draw(ANY[k] if k in wild else GOOD[k]) for k in sorted(ANY)}


def run_fuzz(data: dict[str, Any]) -> None:
    kwargs = dict(data)
    if isinstance(kwargs["max_tokens"], int) and not isinstance(kwargs["max_tokens"], bool):
        one_call(kwargs)
    else:  # a bad max_tokens must be refused
        with pytest.raises(TetherError):
            generate(MODEL, kwargs.pop("prompt"), kwargs.pop("output"), limits=LIMITS, **kwargs)
        OUTCOMES["ArgumentError (max_tokens)"] += 1


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments())
def test_generate_arguments_fail_closed(data: dict[str, Any]) -> None:
    run_fuzz(data)


well_formed = st.fixed_dictionaries(GOOD)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(well_formed)
def test_well_formed_arguments_give_truthful_results(data: dict[str, Any]) -> None:
    """Valid arguments: every result is checked (valid only when complete and matching)."""
    run_fuzz(data)


@pytest.mark.slow
@settings(max_examples=5_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arguments())
def test_generate_arguments_fail_closed_long(data: dict[str, Any]) -> None:
    run_fuzz(data)


def test_the_fuzzer_reached_both_outcomes() -> None:
    """Runs last in this module: both refusals and results were seen (else the strategies
    are broken and the fuzz proves nothing)."""
    if not OUTCOMES:
        pytest.skip("run with the fuzz tests above")
    assert any(k.startswith("ok") for k in OUTCOMES) and any(not k.startswith("ok") for k in OUTCOMES), OUTCOMES
