"""generate()'s arguments fail closed: each bad one raises a tether error (a ValueError)
that names it, before any model call."""

from __future__ import annotations

import math

import pytest

from tether.decoding import ArgumentError
from tether.errors import ConstraintError, LimitError, SchemaError, TetherError
from tether.limits import Limits, limits
from tether.models.scripted import ScriptedModel
from tether.program import Program, gen, generate, regex, select
from tether.program.generate import resolve_decoder


class CountingModel(ScriptedModel):
    """Counts logits calls: a rejected argument must not reach the model."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.logit_calls = 0

    def logits(self, tokens):  # type: ignore[no-untyped-def]
        self.logit_calls += 1
        return super().logits(tokens)


def rejects(argument: str, **kwargs) -> ArgumentError:
    model = CountingModel()
    prompt = kwargs.pop("prompt", "x")
    output = kwargs.pop("output", None)
    with pytest.raises(ArgumentError) as e:
        generate(model, prompt, output, **kwargs)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TetherError)
    assert e.value.argument.startswith(argument), (e.value.argument, argument)
    assert argument in str(e.value)
    assert model.logit_calls == 0
    return e.value


def test_n_not_an_int() -> None:
    rejects("n", n="x", decoder="sample")


def test_n_negative() -> None:
    rejects("n", n=-1, decoder="sample")


def test_n_zero() -> None:
    rejects("n", n=0, decoder="beam")


def test_n_bool_is_not_an_int() -> None:
    rejects("n", n=True, decoder="sample")


def test_temperature_negative() -> None:
    rejects("temperature", temperature=-1)


@pytest.mark.parametrize("name", ["temperature", "top_p", "min_p"])
def test_nan_and_inf_are_refused(name: str) -> None:
    rejects(name, **{name: math.nan}, decoder="sample")
    rejects(name, **{name: math.inf}, decoder="sample")


@pytest.mark.parametrize("top_p", [0, 0.0, -0.1, 1.01, 2])
def test_top_p_outside_0_1(top_p: float) -> None:
    rejects("top_p", top_p=top_p, decoder="sample")


def test_top_p_one_is_fine() -> None:
    assert generate(ScriptedModel(target="ab"), "x", ["ab"], top_p=1.0, decoder="sample", seed=1).valid


def test_top_k_negative() -> None:
    rejects("top_k", top_k=-1, decoder="sample")


@pytest.mark.parametrize("min_p", [-0.5, 1.5])
def test_min_p_outside_0_1(min_p: float) -> None:
    rejects("min_p", min_p=min_p, decoder="sample")


@pytest.mark.parametrize("max_tokens", [0, -3, 2.5, "10", None, True])
def test_max_tokens_not_a_positive_int(max_tokens: object) -> None:
    rejects("max_tokens", max_tokens=max_tokens)


def test_max_tokens_past_the_limit() -> None:
    with pytest.raises(LimitError) as e:
        generate(ScriptedModel(), "x", max_tokens=11, limits=Limits(max_tokens=10))
    assert e.value.limit == "max_tokens" and e.value.value == 11 and e.value.maximum == 10


def test_n_past_max_n() -> None:
    with pytest.raises(LimitError) as e:
        generate(ScriptedModel(), "x", decoder="sample", n=5, limits=Limits(max_n=4))
    assert e.value.limit == "max_n"


def test_batch_past_max_batch() -> None:
    with pytest.raises(LimitError) as e:
        generate(ScriptedModel(), ["a", "b", "c"], limits=Limits(max_batch=2))
    assert e.value.limit == "max_batch"


def test_limits_context_is_honoured_too() -> None:
    with limits(Limits(max_tokens=5)), pytest.raises(LimitError):
        generate(ScriptedModel(), "x", max_tokens=6)


def test_limits_argument_must_be_limits() -> None:
    rejects("limits", limits={"max_tokens": 3})


def test_prompt_past_max_prompt_chars() -> None:
    with pytest.raises(LimitError) as e:
        generate(ScriptedModel(), "a" * 101, limits=Limits(max_prompt_chars=100))
    assert e.value.limit == "max_prompt_chars"
    with pytest.raises(LimitError):  # chat content, and the rendered chat
        generate(ScriptedModel(), [{"role": "user", "content": "a" * 101}], limits=Limits(max_prompt_chars=100))
    with pytest.raises(LimitError):
        generate(ScriptedModel(), [{"role": "user", "content": "a" * 95}], limits=Limits(max_prompt_chars=100))


@pytest.mark.parametrize("seed", [1.5, "7", -1, 2**130, True])
def test_seed_not_an_int(seed: object) -> None:
    rejects("seed", seed=seed, decoder="sample")


@pytest.mark.parametrize("stop", [5, b"x", {"a"}, ["a", 3], [""], ""])
def test_stop_not_str_or_list_of_nonempty_str(stop: object) -> None:
    rejects("stop", stop=stop)


@pytest.mark.parametrize("healing", ["yes", -1, 1.5, None])
def test_healing_wrong_type(healing: object) -> None:
    rejects("healing", healing=healing)


@pytest.mark.parametrize("flag", ["fast_forward", "close_on_budget", "stream", "selective"])
def test_flags_must_be_bools(flag: str) -> None:
    rejects(flag, **{flag: "no"})


@pytest.mark.parametrize("decoder", ["greedyy", "beams", "", "1+1", 5, None, "beam(3)", "__import__('os')"])
def test_unknown_decoder_names(decoder: object) -> None:
    rejects("decoder", decoder=decoder)


def test_decoder_call_with_bad_keyword_value() -> None:
    rejects("n", decoder='beam(n="x")')
    rejects("n", decoder="beam(n=-1)")
    rejects("temperature", decoder="sample(temperature=-1)")
    rejects("decoder argument width", decoder="beam(width=x)")
    rejects("beam(m", decoder="beam(m=2)")


def test_decoder_call_strings_work() -> None:
    assert resolve_decoder("beam(n=3)", n=1, temperature=None, top_k=0, top_p=1.0, min_p=0.0, seed=None).n == 3
    gs = generate(ScriptedModel(seed=1), "Answer:", ["yes", "no", "maybe"], decoder="beam(n=2)")
    assert len(gs) == 2 and all(g.valid for g in gs)
    d = resolve_decoder("sample(temperature=0.5)", n=2, temperature=None, top_k=3, top_p=1.0, min_p=0.0, seed=4)
    assert (d.temperature, d.n, d.top_k, d.seed) == (0.5, 2, 3, 4)


def test_argmax_with_n_above_one() -> None:
    rejects("n", n=3)


@pytest.mark.parametrize("prompt", [None, 5, b"bytes", [], [1, 2], {"role": "user"}, [["a"]], ("x", 3)])
def test_prompt_of_the_wrong_type(prompt: object) -> None:
    rejects("prompt", prompt=prompt)


@pytest.mark.parametrize("messages", [
    [{"role": "user"}],  # no content
    [{"content": "hi"}],  # no role
    [{"role": "user", "content": None}],
    [{"role": "user", "content": 5}],
    [{"role": "", "content": "hi"}],
    [{"role": "user", "content": "hi"}, "not a message"],
])
def test_bad_chat_messages(messages: list) -> None:
    rejects("prompt", prompt=messages)


def test_bad_message_in_a_batch_names_its_place() -> None:
    e = rejects("prompt[1]", prompt=["ok", [{"role": "user", "content": "hi"}, {"role": "user"}]])
    assert "prompt[1][1]" in str(e)


def test_chat_template_wrong_type_or_broken() -> None:
    rejects("chat_template", prompt=[{"role": "user", "content": "hi"}], chat_template=5)
    rejects("chat_template", prompt=[{"role": "user", "content": "hi"}], chat_template="{% for %}")


@pytest.mark.parametrize("output", [5, 2.5, object(), [1, 2], ["a", 3], {1, 2}, b"x", "[0-9]+"])
def test_output_of_an_unknown_type(output: object) -> None:
    with pytest.raises(ConstraintError):
        generate(CountingModel(), "x", output)


def test_output_type_pydantic_cannot_describe() -> None:
    class Opaque:
        pass

    with pytest.raises((ConstraintError, SchemaError)) as e:
        generate(CountingModel(), "x", Opaque)
    assert isinstance(e.value, ValueError) and "Opaque" in str(e.value)


def test_regex_pattern_not_a_string() -> None:
    with pytest.raises(ConstraintError):
        regex(5)  # type: ignore[arg-type]
    with pytest.raises(ConstraintError):
        regex("a", flavor="perl")  # type: ignore[arg-type]


def test_stream_with_several_outputs() -> None:
    rejects("stream", stream=True, decoder="sample", n=2)


# --- holes ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"max_tokens": 0}, "gen(max_tokens"),
    ({"max_tokens": "5"}, "gen(max_tokens"),
    ({"temperature": -1}, "gen(temperature"),
    ({"stop": ""}, "stop"),
    ({"stop": [3]}, "stop[0]"),
    ({"regex": 5}, "gen(regex"),
    ({"list_append": "yes"}, "gen(list_append"),
])
def test_gen_arguments(kwargs: dict, argument: str) -> None:
    with pytest.raises(ArgumentError) as e:
        gen("x", **kwargs)
    assert e.value.argument.startswith(argument)


def test_gen_output_of_unknown_type() -> None:
    with pytest.raises(ConstraintError):
        gen("x", output=5)


@pytest.mark.parametrize("options", [[], "ab", [1, 2], None, ["a", None]])
def test_select_options(options: object) -> None:
    with pytest.raises(ArgumentError):
        select(options)  # type: ignore[arg-type]


def test_program_run_arguments() -> None:
    p = "a" + gen("x", max_tokens=3)
    with pytest.raises(ArgumentError):
        p.run(ScriptedModel(), temperature=-1)
    with pytest.raises(ArgumentError):
        p.run(ScriptedModel(), seed="1")
    with pytest.raises(ArgumentError):
        _ = p + 5
    assert isinstance(p, Program)


def test_program_text_past_max_prompt_chars() -> None:
    p = "a" * 50 + gen("x", max_tokens=2) + "b" * 60 + gen("y", max_tokens=2)
    with pytest.raises(LimitError) as e:
        p.run(ScriptedModel(), limits=Limits(max_prompt_chars=100))
    assert e.value.limit == "max_prompt_chars"
