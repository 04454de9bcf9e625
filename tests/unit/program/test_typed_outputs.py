"""Generation-side typed outputs: strict schemas (closed objects, bounded numbers, compact
JSON), the whitespace option, and triggered regions (``after=``), on the scripted model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from tether.decoding.decoders import ArgumentError
from tether.errors import ConstraintError
from tether.models.scripted import ScriptedModel
from tether.program import NumberBounds, gen, generate, regex
from tether.program.generate import compile_output
from tether.program.outputs import (
    OutputOptions,
    check_output_options,
    first_trigger,
    output_spec,
    schema_options,
    triggered_spec,
)

MODEL = ScriptedModel()
OBJ = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}


def accepts(spec: Any, text: str) -> bool:
    """The compiled constraint of ``spec`` accepts ``text`` as a whole."""
    m = compile_output(MODEL, spec).matcher()
    return bool(m.consume_bytes(text.encode()) and m.is_accepting())


def no_duplicate_keys(text: str) -> dict[str, Any]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), f"a key written twice: {text}"
        return dict(pairs)

    return json.loads(text, object_pairs_hook=hook)  # type: ignore[no-any-return]


# --- schema options ------------------------------------------------------------------------

def test_schema_options_defaults_are_strict_and_compact() -> None:
    assert schema_options("json") == {"closed": True, "bounded_numbers": True}
    assert schema_options("json", OutputOptions(strict=False)) == {}
    assert schema_options("json", OutputOptions(whitespace="flexible")) == {
        "closed": True, "bounded_numbers": True, "whitespace": "flexible"}
    assert schema_options("json", OutputOptions(strict=False, whitespace=regex("[ ]?")))["whitespace_pattern"] == "[ ]?"
    nb = NumberBounds(integer_digits=3)
    assert schema_options("json", OutputOptions(strict=False, number_bounds=nb)) == {"bounded_numbers": nb}


def test_closed_objects_by_default_open_with_strict_false() -> None:
    strict, loose = output_spec(OBJ), output_spec(OBJ, OutputOptions(strict=False))
    assert accepts(strict, '{"a":1,"b":"x"}') and accepts(loose, '{"a":1,"b":"x"}')
    assert not accepts(strict, '{"a":1,"zz":2}') and accepts(loose, '{"a":1,"zz":2}')
    assert not accepts(strict, '{"a":1,"a":2}')


def test_explicit_additional_properties_and_pydantic_extra_allow_stay_open() -> None:
    assert accepts(output_spec({**OBJ, "additionalProperties": True}), '{"a":1,"zz":2}')

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: int

    class Closed(BaseModel):
        a: int

    assert accepts(output_spec(Open), '{"a":1,"zz":2}')
    assert not accepts(output_spec(Closed), '{"a":1,"zz":2}')
    assert accepts(output_spec(Closed, OutputOptions(strict=False)), '{"a":1,"zz":2}')


def test_numbers_bounded_by_default_schema_bounds_win() -> None:
    assert accepts(output_spec(int), "9" * 19) and not accepts(output_spec(int), "9" * 20)
    assert accepts(output_spec(int, OutputOptions(strict=False)), "9" * 40)
    three = output_spec(int, OutputOptions(number_bounds=NumberBounds(integer_digits=3)))
    assert accepts(three, "123") and not accepts(three, "1234")
    big = output_spec({"type": "integer", "maximum": 10**30})
    assert accepts(big, "1" + "0" * 30)


def test_whitespace_option() -> None:
    text = '{ "a": 1 }'
    assert not accepts(output_spec(OBJ), text)
    assert accepts(output_spec(OBJ, OutputOptions(whitespace="flexible")), text)
    assert accepts(output_spec(OBJ, OutputOptions(whitespace=regex("[ ]?"))), text)
    assert not accepts(output_spec(OBJ, OutputOptions(whitespace=regex("[ ]?"))), '{  "a":1}')


@pytest.mark.parametrize("kw", [{"strict": "yes"}, {"whitespace": "wide"}, {"whitespace": 3},
                                {"number_bounds": 19}, {"after": 5}, {"after": ""}, {"after": []},
                                {"after": ["</think>", "think>"]}, {"after": {"<a>": int}, "output": int}])
def test_bad_options_raise_argument_error(kw: dict[str, Any]) -> None:
    kw = {"output": OBJ, **kw}
    with pytest.raises(ArgumentError):
        generate(MODEL, "x", max_tokens=4, **kw)
    if "output" not in kw or kw["output"] is OBJ:
        with pytest.raises(ArgumentError):
            gen("v", **{k: v for k, v in kw.items()})


def test_a_whitespace_pattern_that_is_not_whitespace_is_a_constraint_error() -> None:
    check_output_options(whitespace=regex("x"))  # checked as a regex only here
    with pytest.raises(ConstraintError):
        generate(MODEL, "x", OBJ, whitespace=regex("x"), max_tokens=4)


@pytest.mark.parametrize("seed", range(6))
def test_sampled_objects_hold_only_declared_keys_once(seed: int) -> None:
    g = generate(ScriptedModel(seed=seed), "x", OBJ, decoder="sample", seed=seed, max_tokens=40)
    assert g.valid, g.error
    value = no_duplicate_keys(g.text)
    assert set(value) <= {"a", "b"} and " " not in g.text.replace(value.get("b", ""), "")


@pytest.mark.parametrize("seed", range(4))
def test_sampled_ints_end_within_the_digit_bound(seed: int) -> None:
    g = generate(ScriptedModel(target="1" * 60, seed=seed), "x", int, max_tokens=64)
    assert g.valid and g.finish_reason == "stop" and len(g.text) <= 19


# --- triggered regions -----------------------------------------------------------------------

def test_after_free_text_then_the_output() -> None:
    g = generate(ScriptedModel(target="x hmm the url</think>12"), "x", int, after="</think>", max_tokens=40)
    assert g.valid and g.text == " hmm the url</think>12" and g.value == 12


def test_after_dict_first_trigger_picks_the_output() -> None:
    after = {"<a>": int, "<b>": ["yes", "no"]}
    g = generate(ScriptedModel(target="x the<b>yes"), "x", after=after, max_tokens=40)
    assert g.valid and g.value == "yes" and g.text.endswith("<b>yes")
    g = generate(ScriptedModel(target="x the<a>123"), "x", after=after, max_tokens=40)
    assert g.valid and g.value == 123


def test_after_keeps_room_for_the_constrained_part() -> None:
    for mt in (4, 7, 20, 40):  # the model never writes the trigger: closing writes it, early enough
        g = generate(ScriptedModel(target="x " + "the " * 40), "x", int, after="<t>", max_tokens=mt)
        head, _, tail = g.text.partition("<t>")
        assert g.valid and tail == str(g.value) and len(g.tokens) <= mt, (mt, g.text)
        if mt >= 20:  # a quarter of the budget (at least 8 tokens) was kept for the value
            assert len(g.tokens) - len(tail) <= mt - 8, (mt, g.text)
    cut = generate(ScriptedModel(target="x " + "the " * 40), "x", int, after="<t>", max_tokens=5,
                   close_on_budget=False)
    assert not cut.valid and cut.value is None and cut.finish_reason == "length"


@pytest.mark.parametrize("decoder", ["sample", "beam", "best_of"])
def test_after_with_every_decoder(decoder: str) -> None:
    gs = generate(ScriptedModel(seed=3), "x", int, after=["<t>", "<u>"], decoder=decoder, n=2, seed=1,
                  max_tokens=12)
    for g in gs if isinstance(gs, list) else [gs]:
        assert g.valid, g.error
        trigger, end = first_trigger(g.text, ["<t>", "<u>"])
        assert trigger is not None and g.value == int(g.text[end:])


def test_after_in_a_program_hole() -> None:
    p = "Q:" + gen("n", output=["yes", "no"], after="</think>", max_tokens=30) + "!"
    r = p.run(ScriptedModel(target="Q: the</think>yes!"))
    assert r["n"] == "yes" and r.text == "Q: the</think>yes!" and not r.errors


TRIGGERS = ["<a>", "<bb>", "ab>"]
TEXT = st.text(alphabet="ab<>x ", max_size=12)


@settings(max_examples=80, deadline=None)
@given(free=TEXT, which=st.sampled_from(TRIGGERS), value=st.integers(0, 999))
def test_after_language_is_free_text_without_a_trigger_then_one(free: str, which: str, value: int) -> None:
    spec = triggered_spec({t: int for t in TRIGGERS}, None)
    text = free + which + str(value)
    # accepted exactly when no trigger ends before `which` does
    expected = first_trigger(text, TRIGGERS) == (which, len(free) + len(which))
    assert accepts(spec, text) == expected
    if expected:
        assert spec.parse(text) == value


def test_first_trigger() -> None:
    assert first_trigger("x<b>y<a>", ["<a>", "<b>"]) == ("<b>", 4)
    assert first_trigger("nothing", ["<a>"]) == (None, -1)


# --- ending where the value ends ---------------------------------------------------------------

def test_stop_outside_ends_a_number_where_the_model_leaves_it() -> None:
    model = ScriptedModel(target="x 12 legs and more text")
    g = generate(model, "x ", int, max_tokens=30)
    assert g.valid and g.text == "12" and g.finish_reason == "stop"
    g = generate(model, "x ", int, max_tokens=30, stop_outside=False)
    assert g.valid and g.text.startswith("12") and len(g.text) > 2  # the mask alone lets it wander
    with pytest.raises(ArgumentError):
        generate(model, "x ", int, stop_outside=1)


def test_after_streams_the_whole_text() -> None:
    s = generate(ScriptedModel(target="x hmm the</think>12"), "x", int, after="</think>", max_tokens=30, stream=True)
    text = "".join(s)
    assert s.generation is not None and s.generation.text == text and s.generation.value == 12
