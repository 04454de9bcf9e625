"""The decoding layer fails closed: decoder values check their fields, `decode` and
`beam_search` check their arguments and limits, a stop-cut output is complete only when
the cut text is, and a full context window ends a sequence with "length"."""

from __future__ import annotations

import math

import pytest
from finite_matcher import FiniteMatcher
from hypothesis import given
from hypothesis import strategies as st

from tether.decoding import (
    Argmax,
    ArgumentError,
    Beam,
    BestOf,
    Sample,
    beam_search,
    decode,
    decode_iter,
    make_decoder,
)
from tether.decoding.decoders import parse_decoder_call
from tether.errors import ContextLengthError, LimitError, ModelError
from tether.limits import Limits, limits
from tether.models.scripted import ScriptedModel


@pytest.mark.parametrize(("make", "argument"), [
    (lambda: Sample(temperature=-1), "temperature"),
    (lambda: Sample(temperature=math.nan), "temperature"),
    (lambda: Sample(temperature="hot"), "temperature"),
    (lambda: Sample(top_k=-1), "top_k"),
    (lambda: Sample(top_k=1.5), "top_k"),
    (lambda: Sample(top_p=0), "top_p"),
    (lambda: Sample(top_p=1.2), "top_p"),
    (lambda: Sample(min_p=-0.1), "min_p"),
    (lambda: Sample(seed=-3), "seed"),
    (lambda: Sample(seed="3"), "seed"),
    (lambda: Sample(n=0), "n"),
    (lambda: Sample(n="x"), "n"),
    (lambda: Argmax(n=2), "n"),
    (lambda: Beam(n=0), "n"),
    (lambda: Beam(n=3, width=2), "width"),
    (lambda: BestOf(n=-1), "n"),
    (lambda: BestOf(sample="greedy"), "sample"),
])
def test_decoder_fields_are_checked(make, argument: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ArgumentError) as e:
        make()
    assert e.value.argument == argument and isinstance(e.value, ValueError)


@given(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=3), st.none(), st.booleans()))
def test_sample_temperature_any_value(t: object) -> None:
    try:
        s = Sample(temperature=t)  # type: ignore[arg-type]
    except ArgumentError:
        return
    assert isinstance(s.temperature, int | float) and not isinstance(s.temperature, bool)
    assert math.isfinite(s.temperature) and s.temperature >= 0


def test_make_decoder_and_parse() -> None:
    assert make_decoder(*parse_decoder_call("beam(n=3, width=4)")) == Beam(n=3, width=4)
    assert make_decoder("best_of", {"n": 2, "temperature": 0.5}) == BestOf(n=2, sample=Sample(temperature=0.5))
    for bad in ["beam(3)", "beam(n=1, n=2)", "beam(n=x)", "beam(**k)", "x.y", "", "beam(n=" + "[" * 300]:
        with pytest.raises(ArgumentError):
            make_decoder(*parse_decoder_call(bad))
    with pytest.raises(ArgumentError, match="known keyword"):
        make_decoder("argmax", {"temperature": 1.0})


def prompt(m: ScriptedModel) -> list[int]:
    return m.tokenize("Answer:", add_bos=True)


def test_decode_checks_its_arguments() -> None:
    m = ScriptedModel()
    with pytest.raises(ArgumentError):
        decode(m, prompt(m), None, "argmax", max_tokens=3)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError):
        decode(m, prompt(m), None, Argmax(), max_tokens=-1)
    with pytest.raises(ArgumentError):
        decode(m, prompt(m), None, Argmax(), max_tokens=3, stop="ab")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError):
        decode(m, prompt(m), None, Argmax(), max_tokens=3, stop=[""])
    with limits(Limits(max_n=2)), pytest.raises(LimitError):
        decode(m, prompt(m), None, Sample(n=3), max_tokens=3)
    with limits(Limits(max_n=2)), pytest.raises(LimitError):
        beam_search(m, prompt(m), None, Beam(n=2, width=3), max_tokens=3)
    with limits(Limits(max_tokens=2)), pytest.raises(LimitError):
        decode(m, prompt(m), None, Argmax(), max_tokens=3)
    # every option is checked before anything is counted (decode_iter checks on first step)
    with pytest.raises(ArgumentError):
        decode(m, prompt(m), None, Sample(n=2), reserve=-1)
    with pytest.raises(ArgumentError):
        next(decode_iter(m, prompt(m), None, Argmax(), stop_outside="yes"))  # type: ignore[arg-type]
    with pytest.raises(ArgumentError):
        beam_search(m, prompt(m), None, Beam(n=2), reserve="2")  # type: ignore[arg-type]
    assert m.costs.model_calls == 0 and m.costs.generate_calls == 0


WORDS = ["yes", "no", "maybe"]


@pytest.mark.parametrize("decoder", [Argmax(), Sample(n=2, seed=1), BestOf(n=2, sample=Sample(seed=1)), Beam(n=2)])
def test_stop_cut_is_complete_only_when_the_cut_text_is(decoder) -> None:  # type: ignore[no-untyped-def]
    m = ScriptedModel(target="Answer:maybe")
    ds = decode(m, prompt(m), FiniteMatcher(WORDS, m.vocabulary), decoder, stop=["y"])
    for d in ds:
        if d.stop_text is None:
            assert d.complete == (d.text in [w.encode() for w in WORDS])
        else:
            assert d.text.decode() not in WORDS and not d.complete


def test_stop_cut_leaving_a_word_is_complete() -> None:
    m = ScriptedModel(target="Answer:nobody")
    [d] = decode(m, prompt(m), FiniteMatcher(["no", "nobody"], m.vocabulary), Argmax(), stop=["b"])
    assert d.text == b"no" and d.stop_text == b"b" and d.complete


class Window(ScriptedModel):
    def __init__(self, n_ctx: int, **kw) -> None:
        super().__init__(**kw)
        self.n_ctx = n_ctx

    def _fits(self, tokens) -> None:  # type: ignore[no-untyped-def]
        if len(tokens) > self.n_ctx:
            raise ContextLengthError(self.n_ctx, len(tokens))

    def logits(self, tokens):  # type: ignore[no-untyped-def]
        self._fits(tokens)
        return super().logits(tokens)

    def logits_rows(self, tokens, ids):  # type: ignore[no-untyped-def]
        self._fits(tokens)
        return super().logits_rows(tokens, ids)

    def logits_batch(self, seqs):  # type: ignore[no-untyped-def]
        for s in seqs:
            self._fits(s)
        return super().logits_batch(seqs)


@pytest.mark.parametrize("decoder", [Argmax(), Sample(n=3, seed=2), Beam(n=2)])
def test_full_context_ends_with_length(decoder) -> None:  # type: ignore[no-untyped-def]
    m = Window(6, seed=4)
    p = m.tokenize("ab", add_bos=True)
    for d in decode(m, p, None, decoder, max_tokens=30):
        assert d.finish_reason in ("length", "stop") and len(p) + len(d.tokens) <= 7
        if len(d.tokens) < 30 and d.finish_reason == "length":
            assert len(p) + len(d.tokens) == 7  # the window held every token it could


def test_prompt_longer_than_the_window_raises_before_any_call() -> None:
    m = Window(3)
    with pytest.raises(ContextLengthError):
        decode(m, m.tokenize("abcdef", add_bos=True), None, Argmax())
    with pytest.raises(ContextLengthError):
        beam_search(m, m.tokenize("abcdef", add_bos=True), None, Beam(n=2))
    assert m.costs.model_calls == 0


def test_foreign_backend_error_is_model_error() -> None:
    m = ScriptedModel()
    m.logits = lambda toks: (_ for _ in ()).throw(KeyError("bad"))  # type: ignore[method-assign]
    with pytest.raises(ModelError, match="KeyError"):
        decode(m, prompt(m), None, Argmax(), max_tokens=2)
