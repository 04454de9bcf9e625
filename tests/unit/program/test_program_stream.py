"""Programs and model states streamed hole by hole (``lm.stream``, ``program.stream``):
the same text and captures as ``lm + piece`` / ``program.run``, events that grow to the
captured value, typed partials for JSON holes."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tether.errors import ArgumentError, LimitError, ModelError
from tether.limits import Limits
from tether.models.scripted import ScriptedModel
from tether.program import ModelState, Program, assistant, gen, select, user
from tether.program.compose import HoleEvent

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "tags": {"type": "array", "items": {"type": "string", "maxLength": 4},
                                                    "maxItems": 3}},
          "required": ["name", "tags"]}


class Pet(BaseModel):
    name: str
    legs: int


def _program() -> Program:
    return ("Name: " + gen("name", regex="[A-Z][a-z]{1,6}") + "\nPerson: " + gen("person", output=PERSON,
            max_tokens=60) + "\nPet: " + gen("pet", output=Pet, max_tokens=40) + "\nOK? "
            + select(["yes", "no"], name="ok"))


def _check_events(events: list[HoleEvent], captures: dict[str, object]) -> None:
    by_hole: dict[int, list[HoleEvent]] = {}
    for e in events:
        by_hole.setdefault(e.index, []).append(e)
    assert sorted(by_hole) == list(range(len(by_hole)))
    for evs in by_hole.values():
        *growing, last = evs
        assert last.done and not any(e.done for e in growing)
        assert len({e.name for e in evs}) == 1
        texts = [e.text for e in evs]
        assert all(last.text.startswith(t) for t in texts)  # the text only grows
        if last.name is not None:
            assert last.value == captures[last.name]


@pytest.mark.parametrize("seed", range(4))
def test_program_stream_writes_what_run_writes(seed: int) -> None:
    program = _program()
    ran = program.run(ScriptedModel(seed=seed))
    stream = program.stream(ScriptedModel(seed=seed))
    events = list(stream)
    result = stream.result()
    assert result.text == ran.text and result.captures == ran.captures and result.errors == ran.errors
    _check_events(events, result.captures)
    assert [e.name for e in events if e.done] == ["name", "person", "pet", "ok"]


@pytest.mark.parametrize("seed", range(4))
def test_state_stream_is_the_append(seed: int) -> None:
    base = ModelState(ScriptedModel(seed=seed)) + "Start. "
    appended = base + _program()
    stream = base.stream(_program())
    events = list(stream)
    lm = stream.result()
    assert str(lm) == str(appended) and lm.captures == appended.captures
    assert str(base) == "Start. "  # the state streamed from is unchanged
    _check_events(events, lm.captures)


def test_json_hole_partials_grow_to_the_value() -> None:
    lm = ModelState(ScriptedModel(seed=5))
    stream = lm.stream("P: " + gen("person", output=PERSON, max_tokens=60))
    events = list(stream)
    lm = stream.result()
    partials = [e.value for e in events if not e.done]
    assert partials and all(isinstance(p, dict) for p in partials)
    final = json.loads(events[-1].text)
    assert partials[-1] == final == lm["person"]
    for p in partials:  # every member shown is final, except a string still growing
        for key, value in p.items():
            if isinstance(value, str):
                assert final[key].startswith(value)


def test_pydantic_hole_partials_are_dicts_and_the_capture_a_model() -> None:
    stream = Program(("Pet: " + gen("pet", output=Pet, max_tokens=40)).pieces).stream(ScriptedModel(seed=2))
    events = list(stream)
    result = stream.result()
    assert all(isinstance(e.value, dict) for e in events if not e.done)
    assert isinstance(events[-1].value, Pet) and events[-1].value == result["pet"]
    assert events[-2].value == result["pet"].model_dump()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_text_hole_events_are_its_text_so_far(seed: int) -> None:
    stream = ModelState(ScriptedModel(seed=seed)).stream("x" + gen("t", max_tokens=12, stop="\n"))
    events = list(stream)
    lm = stream.result()
    assert all(e.value == e.text for e in events)
    assert events[-1].done and events[-1].text == lm["t"] and "\n" not in lm["t"]


def test_stream_in_a_turn() -> None:
    model = ScriptedModel(seed=1)
    model.chat_template = TEMPLATE
    lm = ModelState(model)
    with user():
        lm += "Say a word."
    plain = lm
    with assistant():
        stream = lm.stream(gen("word", regex="[a-z]{2,5}"))
    events = list(stream)
    lm = stream.result()
    with assistant():
        expected = plain + gen("word", regex="[a-z]{2,5}")
    assert str(lm) == str(expected) and events[-1].value == lm["word"]
    assert "<|assistant|>" in str(lm)


def test_unnamed_holes_and_text_only() -> None:
    stream = ModelState(ScriptedModel(seed=3)).stream("a" + gen(regex="[0-9]{3}") + "b")
    events = list(stream)
    lm = stream.result()
    assert events and all(e.name is None for e in events) and str(lm) == "a" + events[-1].text + "b"
    stream = ModelState(ScriptedModel(seed=3)).stream("only text")
    assert list(stream) == [] and str(stream.result()) == "only text"


def test_close_and_errors() -> None:
    stream = ModelState(ScriptedModel(seed=4)).stream(gen("a", max_tokens=20) + gen("b", max_tokens=20))
    next(stream)
    stream.close()
    assert list(stream) == []
    with pytest.raises(ModelError, match="ended before"):
        stream.result()
    lm = ModelState(ScriptedModel(seed=4))
    with pytest.raises(ArgumentError):
        lm.stream(lm)
    with pytest.raises(ArgumentError):
        Program(()).stream(ScriptedModel(), temperature=-1)


def test_stream_runs_under_the_limits() -> None:
    program = "x" * 50 + gen("a", max_tokens=5)
    stream = Program(program.pieces).stream(ScriptedModel(seed=1), limits=Limits(max_prompt_chars=10))
    with pytest.raises(LimitError, match="max_prompt_chars"):
        list(stream)
    with pytest.raises(ModelError, match="ended before"):  # the failed stream has no result
        stream.result()
