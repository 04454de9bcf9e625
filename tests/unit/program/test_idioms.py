"""The idioms users bring: ``model(prompt, output)`` and `Generator` (Outlines),
``model + "text"`` (Guidance), on the scripted model."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys

import pytest
from pydantic import BaseModel

import tether
from tether.engine import compiled
from tether.errors import ArgumentError, ConstraintError
from tether.models.base import IDIOMS, ModelIdioms
from tether.models.scripted import ScriptedModel
from tether.program import (
    GeneratedText,
    Generation,
    Generator,
    ModelState,
    Stream,
    gen,
    generate,
    regex,
    select,
)


class Person(BaseModel):
    name: str
    age: int


def test_every_backend_class_has_the_idioms() -> None:
    from tether.models.llama_cpp import LlamaCppModel
    from tether.models.openai_http import OpenAIModel
    from tether.models.transformers_model import TransformersModel

    for cls in (LlamaCppModel, OpenAIModel, ScriptedModel, TransformersModel):
        assert issubclass(cls, ModelIdioms), cls


def test_the_program_layer_registers_the_idioms() -> None:
    from tether.program.generator import call_model
    from tether.program.state import add_to_model

    assert IDIOMS.call is call_model and IDIOMS.add is add_to_model


def test_a_fresh_interpreter_finds_the_idioms_without_importing_program() -> None:
    """``tether.load_model`` imports the models layer only; the first idiom call imports
    the program layer through the provider the ``tether`` package registered."""
    code = (
        "import sys, tether\n"
        "from tether.models.scripted import ScriptedModel\n"
        "m = ScriptedModel(target='yes')\n"
        "assert 'tether.program' not in sys.modules\n"
        "out = m('Answer: ', ['yes', 'no'])\n"
        "assert out == 'yes' and out.value == 'yes', out\n"
        "lm = m + 'Hi'\n"
        "assert type(lm).__name__ == 'ModelState' and str(lm) == 'Hi'\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_model_call_is_generate() -> None:
    model = ScriptedModel(seed=2)
    out = model("Age: ", regex(r"[1-9][0-9]"), max_tokens=4)
    g = generate(ScriptedModel(seed=2), "Age: ", regex(r"[1-9][0-9]"), max_tokens=4)
    assert isinstance(out, str) and isinstance(out, GeneratedText)
    assert out == g.text and str(out) == g.text and type(str(out)) is str
    assert out.value == g.value and out.valid and out.error is None
    assert isinstance(out.generation, Generation) and out.generation.tokens == g.tokens


def test_model_call_takes_output_by_keyword() -> None:
    assert ScriptedModel(target="no")("x", output=["yes", "no"]).value == "no"
    g = Generator(model=ScriptedModel(target="no"), output=["yes", "no"])
    assert g("x") == "no"


def test_model_call_typed_values() -> None:
    model = ScriptedModel(target='{"name":"abc","age":12}')
    out = model("", Person, max_tokens=40)
    assert out.valid and isinstance(out.value, Person) and out == out.generation.text
    n = ScriptedModel(seed=1)("n = ", int, max_tokens=5)
    assert isinstance(n.value, int) and int(n) == n.value


def test_model_call_lists_and_streams() -> None:
    model = ScriptedModel(seed=3)
    outs = model("x", ["aa", "bb", "ab"], decoder="sample", n=3, seed=1)
    assert isinstance(outs, list) and len(outs) == 3 and all(isinstance(o, GeneratedText) for o in outs)
    batch = model(["a", "b"], ["yes", "no"])
    assert [type(o) for o in batch] == [GeneratedText, GeneratedText]
    stream = model("x", regex("[a-z]{4}"), stream=True)
    assert isinstance(stream, Stream)
    text = "".join(stream)
    assert stream.generation is not None and stream.generation.text == text and len(text) == 4


def test_model_call_checks_its_options() -> None:
    model = ScriptedModel()
    with pytest.raises(ArgumentError, match="option 'bogus'"):
        model("x", int, bogus=1)
    with pytest.raises(ArgumentError, match="max_tokens"):
        model("x", int, max_tokens=0)
    with pytest.raises(ConstraintError):
        model("x", object())
    with pytest.raises(ArgumentError, match="prompt"):
        model(3)


def test_an_incomplete_output_is_still_text_with_no_value() -> None:
    model = ScriptedModel(seed=0)
    out = model("n: ", regex("[a-z]{20}"), max_tokens=3, close_on_budget=False)
    assert not out.valid and out.value is None and out.error and isinstance(out, str)


def test_generated_text_pickles_and_copies() -> None:
    out = ScriptedModel(target="yes")("", ["yes", "no"])
    for again in (pickle.loads(pickle.dumps(out)), copy.copy(out), copy.deepcopy(out)):
        assert again == out and type(again) is GeneratedText and again.value == "yes"
    with pytest.raises(ArgumentError):
        GeneratedText("text")  # type: ignore[arg-type]


# -- Generator ------------------------------------------------------------------------------


class _Counting(compiled.CompiledConstraint):
    made = 0

    def __init__(self, *args: object, **kwargs: object) -> None:
        type(self).made += 1
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def test_generator_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "CompiledConstraint", _Counting)
    _Counting.made = 0
    model = ScriptedModel(seed=4)
    g = Generator(model, regex(r"[0-9]{3}q9z|[a-c]{2}q9z"), max_tokens=8)  # a pattern no other test compiles
    assert _Counting.made == 1 and g.constraint is not None
    outs = [g(p) for p in ("a", "b", "c")]
    assert _Counting.made == 1  # every call found it in the engine's cache
    assert all(o.valid and o.endswith("q9z") for o in outs)
    assert outs[0] == generate(ScriptedModel(seed=4), "a", regex(r"[0-9]{3}q9z|[a-c]{2}q9z"), max_tokens=8).text


def test_generator_lowers_the_output_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.program import outputs

    model = ScriptedModel(target='{"name":"abc","age":12}')
    g = Generator(model, Person, max_tokens=40)
    expected = generate(ScriptedModel(target='{"name":"abc","age":12}'), "", Person, max_tokens=40)

    def again(*args: object) -> None:
        raise AssertionError("the output was lowered again")

    monkeypatch.setattr(outputs, "_typed_spec", again)
    out = g("")
    assert out.valid and out.value == expected.value == Person(name="abc", age=12)
    assert out == expected.text and out.generation.tokens == expected.tokens


def test_generator_options_and_overrides() -> None:
    model = ScriptedModel(seed=5)
    g = Generator(model, ["aa", "bb", "ab"], decoder="sample", temperature=1.0, seed=3)
    assert g("x") == g("x")  # the seeded default
    assert g("x", seed=3) == g("x") and isinstance(g("x", n=2), list)
    free = Generator(model, max_tokens=3)
    assert free.constraint is None and len(free("x").generation.tokens) <= 3
    assert "Generator('scripted'" in repr(g)


def test_generator_stream() -> None:
    g = Generator(ScriptedModel(seed=6), regex("[a-z]{5}"))
    s = g.stream("x")
    text = "".join(s)
    assert s.generation is not None and s.generation.value == text and len(text) == 5


def test_generator_fails_closed_when_made() -> None:
    model = ScriptedModel()
    with pytest.raises(ArgumentError, match="option 'bogus'"):
        Generator(model, int, bogus=1)
    with pytest.raises(ArgumentError, match="stream"):
        Generator(model, int, stream=True)
    with pytest.raises(ArgumentError, match="top_p"):
        Generator(model, int, top_p=3)
    with pytest.raises(ArgumentError, match="decoder"):
        Generator(model, int, decoder="nope")
    with pytest.raises(ArgumentError, match="whitespace"):
        Generator(model, Person, whitespace="wide")
    with pytest.raises(ConstraintError):
        Generator(model, object())
    with pytest.raises(ArgumentError, match="model"):
        Generator(42, int)
    with pytest.raises(tether.LimitError):
        Generator(model, int, max_tokens=10, limits=tether.Limits(max_tokens=5))


def test_generator_refuses_shape_options_at_call() -> None:
    g = Generator(ScriptedModel(), Person)
    for name, value in (("strict", False), ("whitespace", "pretty"), ("after", "x"), ("stream", True)):
        with pytest.raises(ArgumentError, match=name):
            g("x", **{name: value})
    with pytest.raises(ArgumentError, match="option 'output'"):
        g("x", output=int)


# -- model + text ---------------------------------------------------------------------------


def test_model_plus_text_is_a_model_state() -> None:
    model = ScriptedModel(target="The url is https://www.abc.com yes")
    lm = model + "The url is http"
    assert isinstance(lm, ModelState) and str(lm) == "The url is http" and lm.model is model
    lm += gen("url", stop=" ") + " " + select(["yes", "no"], name="ok")
    assert lm["url"] == "s://www.abc.com" and lm["ok"] == "yes"
    same = ModelState(model) + "The url is http" + gen("url", stop=" ") + " " + select(["yes", "no"], name="ok")
    assert str(same) == str(lm)


def test_model_plus_a_hole_and_bad_pieces() -> None:
    model = ScriptedModel(seed=1)
    lm = model + gen("x", regex="[0-9]{2}")
    assert len(lm["x"]) == 2
    with pytest.raises(ArgumentError, match="program piece"):
        model + 3  # noqa: B018
    with pytest.raises(ArgumentError, match="not 'text' \\+ model"):
        "text" + model  # noqa: B018
    with pytest.raises(ArgumentError, match="not 'text' \\+ model"):
        3 + model  # type: ignore[operator]  # noqa: B018
