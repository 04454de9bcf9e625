"""Truthful results on every path (generate, stream, beam, sample(n), best_of, Program
holes): ``valid`` only for a complete output; a full context window ends the output with
"length"; a prompt that does not fit raises; backend exceptions come out as ModelError."""

from __future__ import annotations

import re

import pytest

from tether.errors import ContextLengthError, ModelError
from tether.models.scripted import ScriptedModel
from tether.program import Generation, gen, generate, regex, select


class SmallContext(ScriptedModel):
    """A scripted model with a context window of ``n_ctx`` tokens (raises as backends do)."""

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


class Broken(ScriptedModel):
    def logits(self, tokens):  # type: ignore[no-untyped-def]
        raise RuntimeError("device lost")

    logits_rows = None  # type: ignore[assignment]
    logits_batch = None  # type: ignore[assignment]


def flat(g: Generation | list[Generation]) -> list[Generation]:
    return g if isinstance(g, list) else [g]


DECODERS = [("argmax", 1), ("sample", 3), ("beam", 2), ("best_of", 3)]


@pytest.mark.parametrize(("decoder", "n"), DECODERS)
def test_stop_cutting_a_choice_is_not_valid(decoder: str, n: int) -> None:
    # the example: stop="y" cut " yes" to " ", which was reported valid
    model = ScriptedModel(target="Answer: yes")
    for g in flat(generate(model, "Answer:", [" yes", " no"], stop="y", decoder=decoder, n=n, seed=1)):
        if g.text in (" yes", " no"):
            assert g.valid and g.value == g.text
            continue
        assert g.text == " " and g.finish_reason == "stop"
        assert not g.valid and g.value is None and "stop text 'y'" in (g.error or "")


def test_stop_cutting_a_choice_when_streaming() -> None:
    s = generate(ScriptedModel(target="Answer: yes"), "Answer:", [" yes", " no"], stop="y", stream=True)
    assert "".join(s) == " "
    assert s.generation is not None and not s.generation.valid and s.generation.value is None


def test_stop_leaving_a_complete_output_is_valid() -> None:
    # "12" is itself a full match of [0-9]+, so the cut output is complete
    g = generate(ScriptedModel(target="x123"), "x", regex(r"[0-9]+"), stop="3")
    assert g.text == "12" and g.finish_reason == "stop" and g.valid and g.value == "12"


def test_free_text_cut_by_a_stop_is_valid() -> None:
    g = generate(ScriptedModel(target="x ab cd"), "x", stop="c")
    assert g.text == " ab " and g.valid and g.finish_reason == "stop"


@pytest.mark.parametrize(("decoder", "n"), DECODERS)
def test_budget_cut_regex_is_not_valid(decoder: str, n: int) -> None:
    out = generate(ScriptedModel(target="xabcabcabc"), "x", regex(r"(abc)+!"), max_tokens=2,
                   decoder=decoder, n=n, seed=1, close_on_budget=False)
    for g in flat(out):
        assert not g.valid and g.value is None and g.finish_reason == "length"
        assert "incomplete" in (g.error or "")


@pytest.mark.parametrize(("decoder", "n"), DECODERS)
def test_budget_closes_structured_outputs_by_default(decoder: str, n: int) -> None:
    out = generate(ScriptedModel(target="xabcabcabc"), "x", regex(r"(abc)+!"), max_tokens=2,
                   decoder=decoder, n=n, seed=1)
    for g in flat(out):
        assert g.valid and re.fullmatch(r"(abc)+!", g.text) and len(g.tokens) <= 2


def test_context_full_mid_output_ends_with_length() -> None:
    model = SmallContext(8, target="x abc abc abc abc")
    p = model.tokenize("x", add_bos=True)
    g = generate(model, "x", max_tokens=50, healing=False)
    assert g.finish_reason == "length" and len(p) + len(g.tokens) <= 8 + 1
    assert g.valid and g.value == g.text  # free text: what fits is the output
    c = generate(model, "x", regex(r"( abc)+!"), max_tokens=50, healing=False)
    assert c.finish_reason == "length" and not c.valid and c.value is None


@pytest.mark.parametrize(("decoder", "n"), DECODERS)
def test_context_full_on_every_decoder(decoder: str, n: int) -> None:
    model = SmallContext(6, seed=2)
    for g in flat(generate(model, "x", regex(r"[a-z]{20}"), max_tokens=50, decoder=decoder, n=n, seed=3)):
        assert g.finish_reason == "length" and not g.valid and g.value is None


def test_context_full_while_streaming() -> None:
    model = SmallContext(6, seed=2)
    s = generate(model, "x", regex(r"[a-z]{20}"), max_tokens=50, stream=True)
    text = "".join(s)
    assert s.generation is not None and s.generation.finish_reason == "length" and s.generation.text == text


def test_prompt_that_does_not_fit_raises_before_decoding() -> None:
    model = SmallContext(4)
    with pytest.raises(ContextLengthError) as e:
        generate(model, "a long prompt here", max_tokens=3)
    assert e.value.n_ctx == 4 and e.value.needed > 4
    assert model.costs.model_calls == 0


def test_prompt_that_does_not_fit_raises_without_n_ctx() -> None:
    # a backend that does not say its window still raises on the prompt: not an empty output
    model = SmallContext(4)
    model.n_ctx = None  # type: ignore[assignment]
    model._fits = lambda toks: (_ for _ in ()).throw(ContextLengthError(4, len(toks))) if len(toks) > 4 else None  # type: ignore[method-assign]
    with pytest.raises(ContextLengthError):
        generate(model, "a long prompt here", max_tokens=3)


def test_backend_exception_becomes_model_error() -> None:
    with pytest.raises(ModelError, match="device lost") as e:
        generate(Broken(), "x", max_tokens=3)
    assert isinstance(e.value.__cause__, RuntimeError)


def test_tokenizer_failure_becomes_model_error() -> None:
    with pytest.raises(ModelError, match="0x"):
        generate(ScriptedModel(), "\u4e00", max_tokens=3, healing=False)


def test_program_hole_cut_by_budget_captures_none() -> None:
    model = ScriptedModel(target="Id: abcabcabc")
    r = ("Id:" + gen("id", regex=r"( abc)+!", max_tokens=2, close_on_budget=False)).run(model)
    assert r["id"] is None and "incomplete" in r.errors["id"]
    closed = ("Id:" + gen("id", regex=r"( abc)+!", max_tokens=5)).run(model)  # healed ":" + " a" "b" "c" "!"
    assert closed["id"] is not None and re.fullmatch(r"( abc)+!", closed["id"]) and not closed.errors


def test_program_hole_cut_by_stop_captures_none() -> None:
    model = ScriptedModel(target="Answer: yes")
    r = ("Answer:" + gen("a", output=[" yes", " no"], stop="y")).run(model)
    assert r["a"] is None and "stop text" in r.errors["a"]
    ok = ("Answer:" + select([" yes", " no"], name="a")).run(model)
    assert ok["a"] == " yes" and not ok.errors


def test_program_holes_in_a_small_context() -> None:
    model = SmallContext(7, target="Q: abcabcabcabc")
    r = ("Q:" + gen("x", regex=r"[a-c]+!", max_tokens=40, close_on_budget=False)).run(model)
    assert r["x"] is None and "x" in r.errors
    assert re.fullmatch(r"Q:[a-c]*", r.text)


class FakeServer:
    """A black-box model answering every completion with one fixed text."""

    black_box = True
    name = "fake-server"

    def __init__(self, text: str, finish: str = "stop") -> None:
        from tether.models.base import Costs

        self.costs, self.text, self.finish = Costs(), text, finish

    def complete(self, prompt: str, **params):  # type: ignore[no-untyped-def]
        return {"choices": [{"text": self.text, "finish_reason": self.finish}], "usage": {}}


def test_remote_regex_check_is_linear_on_a_hostile_pattern() -> None:
    import time

    t0 = time.perf_counter()
    g = generate(FakeServer("a" * 40 + "c"), "x", regex(r"(a*)*b"))
    assert time.perf_counter() - t0 < 5  # Python's re backtracks exponentially here
    assert not g.valid and g.value is None and "does not match" in (g.error or "")
    ok = generate(FakeServer("aab"), "x", regex(r"(a*)*b"))
    assert ok.valid and ok.value == "aab"


def test_remote_regex_check_reads_the_pattern_as_the_constraint_does() -> None:
    # "." does not match a newline in the python flavour (the constraint's reading)
    assert not generate(FakeServer("a\nb"), "x", regex(r"a.b")).valid
    assert generate(FakeServer("a-b"), "x", regex(r"a.b")).valid


def test_remote_cut_output_is_not_valid() -> None:
    g = generate(FakeServer('{"a": 1', finish="length"), "x", {"type": "object"})
    assert g.finish_reason == "length" and not g.valid and g.value is None


def test_remote_beam_is_refused() -> None:
    from tether.decoding import ArgumentError

    with pytest.raises(ArgumentError):
        generate(FakeServer("x"), "x", decoder="beam", n=2)
