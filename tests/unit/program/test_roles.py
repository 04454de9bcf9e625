"""Chat turns in Programs: system/user/assistant pieces written with the model's template."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import ArgumentError, ModelError
from tether.models.scripted import ScriptedModel
from tether.program import Program, assistant, gen, role, select, system, user
from tether.program.chat import render_jinja

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


class Recorder:
    """A scripted model that records the token sequences it is asked about."""

    def __init__(self, template: str | None = TEMPLATE, **kwargs: Any) -> None:
        self.seen: list[list[int]] = []
        self.model = ScriptedModel(script=self._script, **kwargs)
        self.model.chat_template = template
        self._rng = np.random.default_rng(0)

    def _script(self, tokens: list[int]) -> Any:
        self.seen.append(list(tokens))
        return self._rng.standard_normal(self.model.vocabulary.n_logits).astype(np.float32)

    def text_of(self, tokens: list[int]) -> str:
        return self.model.vocabulary.decode(tokens).decode()


def test_turns_are_written_with_the_models_template() -> None:
    rec = Recorder()
    p = system("Be brief.") + user("Sky blue?") + assistant(select(["yes", "no"], name="a"))
    r = p.run(rec.model, healing=False)
    assert r["a"] in ("yes", "no") and not r.errors
    assert r.text == f"<|system|>Be brief.<|end|>\n<|user|>Sky blue?<|end|>\n<|assistant|>{r['a']}<|end|>\n"
    # the hole's prompt: the conversation so far, the assistant turn left open
    assert rec.text_of(rec.seen[0]) == "<|system|>Be brief.<|end|>\n<|user|>Sky blue?<|end|>\n<|assistant|>"


def test_text_and_holes_inside_one_turn_share_it() -> None:
    rec = Recorder()
    p = user("Name: ", gen("name", regex="[a-z]{2}"), ". Age: ", gen("age", regex="[1-9]"))
    r = p.run(rec.model, healing=False)
    assert r.text == f"<|user|>Name: {r['name']}. Age: {r['age']}<|end|>\n"
    assert rec.text_of(rec.seen[-1]).startswith(f"<|user|>Name: {r['name']}. Age: ")
    assert "<|end|>" not in rec.text_of(rec.seen[-1])  # the open turn is not closed in the prompt


def test_text_before_the_first_turn_is_a_system_turn() -> None:
    r = ("Be brief." + user("Hi") + assistant(select(["a"], name="x"))).run(Recorder().model)
    assert r.text.startswith("<|system|>Be brief.<|end|>\n<|user|>Hi<|end|>\n")


def test_text_outside_turns_after_a_turn_is_refused_whitespace_dropped() -> None:
    model = Recorder().model
    r = (user("Hi") + "\n" + assistant("Yo")).run(model)
    assert r.text == "<|user|>Hi<|end|>\n<|assistant|>Yo<|end|>\n"
    with pytest.raises(ArgumentError, match="inside system"):
        (user("Hi") + "loose text").run(model)
    with pytest.raises(ArgumentError, match="inside system"):
        (user("Hi") + gen("x", max_tokens=2)).run(model)


def test_turns_do_not_nest() -> None:
    with pytest.raises(ArgumentError, match="cannot sit inside"):
        user(assistant("x"))
    with pytest.raises(ArgumentError, match="cannot sit inside"):
        user("a" + ("b" + system("c")))
    inner = Program((Program((assistant("x"),)),))
    with pytest.raises(ArgumentError, match="cannot sit inside"):
        user(inner)


def test_a_block_is_not_a_piece_and_role_names_are_checked() -> None:
    with pytest.raises(ArgumentError, match="with"):
        "x" + user()  # noqa: B018
    with pytest.raises(ArgumentError, match="with"):
        Program() + assistant()
    for bad in ("", "a b", 3, None, "x" * 200, "<|end|>"):
        with pytest.raises(ArgumentError):
            role(bad, "text")  # type: ignore[arg-type]
    assert role("tool", "42").role == "tool"


def test_the_backends_own_template_without_a_jinja_one() -> None:
    model = ScriptedModel(target="yes")  # apply_chat_template: "role: content\n"
    r = (user("Sky blue?") + assistant(select(["yes", "no"], name="a"))).run(model)
    assert r.text == f"user: Sky blue?\nassistant: {r['a']}\n"


def test_a_model_without_template_fails_closed() -> None:
    model = ScriptedModel()
    model.apply_chat_template = None  # type: ignore[assignment,method-assign]
    with pytest.raises(ModelError, match="no chat template"):
        (user("Hi") + assistant(gen("x", max_tokens=2))).run(model)
    # plain programs still run on it
    assert ("a" + select(["b"], name="x")).run(model).text == "ab"


def test_chat_template_argument_wins_and_is_checked() -> None:
    rec = Recorder(template=None)
    r = (user("Hi") + assistant(select(["ok"], name="x"))).run(rec.model, chat_template="{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}")
    assert r.text == "[user]Hi[assistant]ok"
    for bad in ("", 5, b"x"):
        with pytest.raises(ArgumentError, match="chat_template"):
            user("Hi").run(rec.model, chat_template=bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="chat_template"):
        user("Hi").run(rec.model, chat_template="{% for %}")


def test_a_template_that_drops_the_open_turn() -> None:
    drops = "{% for m in messages %}{% if m.role != 'assistant' %}<{{ m.role }}>{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}<go>{% endif %}"
    model = Recorder(template=drops).model
    r = (user("Hi") + assistant(select(["ok"], name="x"))).run(model)  # generation prompt instead
    assert r["x"] == "ok"
    with pytest.raises(ModelError, match="drops the text"):
        (user("Hi") + assistant("so far ", select(["ok"], name="x"))).run(model)


def test_a_model_is_required() -> None:
    with pytest.raises(ArgumentError, match="load_model"):
        user("Hi").run(object())


def test_captures_and_errors_inside_turns() -> None:
    model = Recorder().model
    r = (user("Q") + assistant(gen("n", regex="[0-9]{5}", max_tokens=1, close_on_budget=False))).run(model)
    assert r["n"] is None and "incomplete" in r.errors["n"]


_roles = st.sampled_from(["system", "user", "assistant"])
_texts = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(_roles, _texts), max_size=5), st.sampled_from(["user", "assistant"]),
       st.integers(0, 3))
def test_prompt_is_the_rendered_conversation_so_far(turns: list[tuple[str, str]], last: str, seed: int) -> None:
    """For any conversation, the hole's prompt is the template's rendering of the turns
    before it with the hole's turn open, and the result text is the whole conversation."""
    rec = Recorder(seed=seed)
    p = Program()
    for r, t in turns:
        p = p + role(r, t)
    p = p + role(last, "A: ", select(["x", "yz"], name="v"))
    res = p.run(rec.model, healing=False)
    msgs = [{"role": r, "content": t} for r, t in turns]
    whole = render_jinja(TEMPLATE, [*msgs, {"role": last, "content": "A: " + res["v"]}], add_generation_prompt=False)
    assert res.text == whole
    before = render_jinja(TEMPLATE, msgs, add_generation_prompt=False) + f"<|{last}|>A: "
    assert rec.text_of(rec.seen[0]) == before


def test_the_template_comes_from_the_models_accessor() -> None:
    from tether.models.base import ChatTemplated
    from tether.program.chat import template_of

    model = ScriptedModel()
    assert isinstance(model, ChatTemplated) and template_of(model) is None
    model.chat_template = TEMPLATE
    assert template_of(model) == TEMPLATE
    model.chat_template = ""  # an empty template is none
    assert template_of(model) is None
    assert template_of(object()) is None


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=70), st.lists(st.one_of(st.text(max_size=5), st.integers(), st.none()), max_size=3))
def test_role_arguments_fail_closed(name: str, content: list[object]) -> None:
    """Any role name and content: a turn, a block, or ArgumentError — nothing else."""
    try:
        r = role(name, *content)
    except ArgumentError:
        return
    assert r.role == name


def test_healing_never_backs_into_the_templates_markup() -> None:
    """A hole that opens its turn starts right after the template's text (as a chat
    prompt to `generate` does); one after the turn's own text heals that boundary."""
    spaced = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"  # markup ends in " "
    rec = Recorder(template=spaced)
    r = (user("Hi") + assistant(select(["x", "yz"], name="a"))).run(rec.model)
    assert rec.text_of(rec.seen[0]) == "user: Hi\nassistant: " and r["a"] in ("x", "yz")
    rec = Recorder()
    r = (user("Hi") + assistant("so t", select(["he", "hen"], name="a"))).run(rec.model)
    assert rec.text_of(rec.seen[0]).endswith("<|assistant|>so ")  # "t" healed: "the" may follow
    assert r.text == f"<|user|>Hi<|end|>\n<|assistant|>so t{r['a']}<|end|>\n"


def test_whitespace_before_the_first_turn_is_no_turn() -> None:
    r = ("\n  " + user("Hi") + assistant(select(["a", "b"], name="x"))).run(Recorder().model)
    assert r.text.startswith("<|user|>Hi<|end|>\n")


def test_has_chat_format() -> None:
    from tether.program.chat import has_chat_format

    model = ScriptedModel()
    assert has_chat_format(model)  # its own apply_chat_template
    model.apply_chat_template = None  # type: ignore[assignment,method-assign]
    assert not has_chat_format(model)
    model.chat_template = TEMPLATE
    assert has_chat_format(model)
    assert not has_chat_format(object())
