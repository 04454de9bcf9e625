"""generate() on the scripted model: outputs, decoders, batches, streaming, chat."""

from __future__ import annotations

import re

import pytest

from tether.errors import ConstraintError, ModelError
from tether.grammar import Grammar
from tether.models.scripted import ScriptedModel
from tether.program import Generation, Stream, generate, regex

needs_json = pytest.mark.skipif(not hasattr(Grammar, "from_json_schema"),
                                reason="the JSON Schema front end (Grammar.from_json_schema) is not in the tree")


def m(**kw) -> ScriptedModel:
    return ScriptedModel(**kw)


def test_free_text_follows_the_model() -> None:
    g = generate(m(target="The url is https://www.abc.com"), "The url is", max_tokens=20)
    assert isinstance(g, Generation)
    assert g.text == " https://www.abc.com" and g.value == g.text and g.valid
    assert g.costs.generate_calls == 1 and g.costs.model_calls >= 1


def test_token_healing_on_by_default() -> None:
    model = m(target="The url is https://www.abc.com")
    healed = generate(model, "The url is http")
    assert healed.text == "s://www.abc.com"
    assert model.vocabulary.tokens[healed.tokens[0]] == b"https"  # the prompt's "http" redone
    plain = generate(model, "The url is http", healing=False)
    assert model.vocabulary.tokens[plain.tokens[0]] == b"s://"


@pytest.mark.parametrize("seed", range(6))
def test_regex_output_always_matches(seed: int) -> None:
    g = generate(m(seed=seed), "Number:", regex(r"[0-9]{2,4}"), decoder="sample", seed=seed)
    assert re.fullmatch(r"[0-9]{2,4}", g.text), g.text
    assert g.valid and g.value == g.text


@pytest.mark.parametrize("seed", range(6))
def test_choices_output_is_one_option(seed: int) -> None:
    gs = generate(m(seed=seed), "Answer:", ["yes", "no", "maybe"], decoder="sample", seed=seed, n=3)
    assert len(gs) == 3 and all(g.value in ("yes", "no", "maybe") for g in gs)


def test_beam_returns_distinct_sorted() -> None:
    gs = generate(m(seed=1), "Answer:", ["yes", "no", "maybe", "nothing"], decoder="beam", n=3)
    assert len({g.text for g in gs}) == 3
    assert [g.logprob for g in gs] == sorted((g.logprob for g in gs), reverse=True)


def test_best_of_returns_one() -> None:
    g = generate(m(seed=1), "Answer:", ["yes", "no", "maybe"], decoder="best_of", n=4, seed=2)
    assert isinstance(g, Generation) and g.value in ("yes", "no", "maybe")


def test_temperature_with_default_decoder_samples_reproducibly() -> None:
    a = generate(m(seed=3), "x", max_tokens=6, temperature=1.5, seed=9)
    b = generate(m(seed=3), "x", max_tokens=6, temperature=1.5, seed=9)
    assert a.tokens == b.tokens


def test_batch_of_prompts() -> None:
    gs = generate(m(target="ab"), ["x", "y"], ["ab", "abc"])
    assert [g.value for g in gs] == ["ab", "ab"]


def test_stream_yields_the_same_text() -> None:
    model = m(target="name: abc\nage: 12")
    s = generate(model, "x", stream=True, stop="\n")
    assert isinstance(s, Stream)
    chunks = list(s)
    assert "".join(chunks) == "name: abc" == generate(model, "x", stop="\n").text
    assert len(chunks) > 1 and s.generation is not None and s.generation.text == "name: abc"


def test_chat_uses_the_models_template() -> None:
    model = m(target="user: hi\nassistant: yes")
    g = generate(model, [{"role": "user", "content": "hi"}], ["yes", "no"])
    assert g.prompt == "user: hi\nassistant: " and g.value == "yes"


def test_chat_without_template_raises() -> None:
    model = m()
    model.apply_chat_template = None  # type: ignore[assignment,method-assign]
    with pytest.raises(ModelError, match="no chat template"):
        generate(model, [{"role": "user", "content": "hi"}])


def test_plain_string_output_is_rejected_with_a_hint() -> None:
    with pytest.raises(ConstraintError, match="regex"):
        generate(m(), "x", "[0-9]+")


def test_close_on_budget() -> None:
    g = generate(m(target="abcabcabc"), "x", regex(r"(abc)+"), max_tokens=2, close_on_budget=True)
    assert re.fullmatch(r"(abc)+", g.text) and g.valid and len(g.tokens) <= 2
    cut = generate(m(target="abcabcabcabc"), "x", regex(r"(abc)+!"), max_tokens=2, close_on_budget=False)
    assert not cut.valid and cut.value is None and cut.finish_reason == "length"


@needs_json
def test_json_schema_output_parses() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    for seed in range(4):
        g = generate(m(seed=seed), "x", schema, decoder="sample", seed=seed, max_tokens=64, close_on_budget=True)
        assert g.valid and isinstance(g.value, dict) and isinstance(g.value["a"], int)


@needs_json
def test_pydantic_and_python_type_outputs() -> None:
    from pydantic import BaseModel

    class P(BaseModel):
        ok: bool

    g = generate(m(seed=2), "x", P, max_tokens=64, close_on_budget=True)
    assert isinstance(g.value, P)
    g = generate(m(seed=2), "x", int, max_tokens=16, close_on_budget=True)
    assert isinstance(g.value, int)
