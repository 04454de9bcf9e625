"""Beam search with triggered regions (close_at/reserve) and stop_outside, as the
sampling/argmax loop does them."""

from __future__ import annotations

import numpy as np
import pytest

from tether.decoding import Beam
from tether.decoding.beam import beam_search
from tether.models.scripted import DEFAULT_TOKENS, ScriptedModel
from tether.program.generate import compile_output
from tether.program.outputs import output_spec, triggered_spec

TOKENS = [*DEFAULT_TOKENS, "</think>", " so", "42"]


def scripted(rules: list[tuple[str, str]]) -> ScriptedModel:
    """After the last rule trigger found in the text, the model wants its continuation
    (longest tokens first), then EOS; elsewhere small fixed noise."""
    box: dict[str, ScriptedModel] = {}

    def script(toks: list[int]) -> np.ndarray:
        m = box["m"]
        v = m.vocabulary
        text = v.decode(t for t in toks if t != v.bos_id).decode("utf-8", "ignore")
        logits = np.random.default_rng(len(toks)).standard_normal(v.n_logits).astype(np.float32) * 0.1
        at, best = -1, None
        for trig, cont in rules:
            i = text.rfind(trig)
            if i >= 0 and i + len(trig) >= at:
                at, best = i + len(trig), cont
        if best is not None:
            written = text[at:]
            rest = best[len(written):].encode() if best.startswith(written) else b""
            if best.startswith(written) and not rest:
                logits[v.eos_ids[0]] += 30.0
            for i, t in enumerate(v.tokens):
                if t and rest.startswith(t):
                    logits[i] += 10.0 + len(t)
        return logits

    m = ScriptedModel(TOKENS, script=script)
    box["m"] = m
    return m


def run(m: ScriptedModel, spec, **kw):  # type: ignore[no-untyped-def]
    p = m.tokenize("A:", add_bos=True)
    ds = beam_search(m, p, compile_output(m, spec).matcher(), Beam(n=2), **kw)
    return [(d.text.decode(), d) for d in ds]


def test_region_closing_leaves_the_constrained_part_to_the_model() -> None:
    # the model rambles and never writes the trigger; after it, it means 42
    m = scripted([("A:", " so" * 40), ("</think>", "42")])
    spec = triggered_spec("</think>", int)
    (text, d), *_ = run(m, spec, max_tokens=20, close_on_budget=True, close_at=["</think>"], reserve=6)
    assert d.complete and d.finish_reason == "stop" and len(d.tokens) <= 20
    assert spec.parse(text) == 42 and "</think>" in text
    # without the region options the whole completion is forced: the shortest int
    (text0, d0), *_ = run(m, spec, max_tokens=20, close_on_budget=True)
    assert d0.complete and spec.parse(text0) == 0


def test_region_beam_follows_the_trigger_the_model_writes() -> None:
    m = scripted([("A:", " so so</think>42")])
    spec = triggered_spec("</think>", int)
    (text, d), *_ = run(m, spec, max_tokens=40, close_on_budget=True, close_at=["</think>"], reserve=8)
    assert text == " so so</think>42" and d.complete


def _plateau() -> ScriptedModel:
    """After "A:4" the best token is "2" but ten non-digit tokens together outweigh it."""
    box: dict[str, ScriptedModel] = {}

    def script(toks: list[int]) -> np.ndarray:
        m = box["m"]
        v = m.vocabulary
        text = v.decode(t for t in toks if t != v.bos_id).decode()
        tid = {t: i for i, t in enumerate(v.tokens)}
        logits = np.full(v.n_logits, -20.0, dtype=np.float32)
        if text.endswith("A:"):
            logits[tid[b"4"]] = 10.0
        else:
            logits[tid[b"2"]] = 2.0
            for o in " \n.,abcdef":
                logits[tid[o.encode()]] = 1.5
        return logits

    m = ScriptedModel(TOKENS, script=script)
    box["m"] = m
    return m


@pytest.mark.parametrize(("stop_outside", "short"), [(True, True), (False, False)])
def test_stop_outside_in_beam(stop_outside: bool, short: bool) -> None:
    m = _plateau()
    (text, d), *_ = run(m, output_spec(int), max_tokens=30, stop_outside=stop_outside)
    assert d.complete
    assert (text == "4") == short
    if not short:
        assert text.startswith("42")


def test_bad_region_arguments() -> None:
    from tether.decoding.decoders import ArgumentError

    m = _plateau()
    with pytest.raises(ArgumentError):
        run(m, output_spec(int), reserve=-1)
    with pytest.raises(ArgumentError):
        run(m, output_spec(int), stop_outside="yes")
