"""Guidance-style model states: ``lm + ...`` immutable, holes filled on append, roles as
``with`` blocks, stateful functions."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tether
from tether.errors import ArgumentError
from tether.models.scripted import ScriptedModel
from tether.program import ModelState, Program, assistant, function, gen, select, system, user

TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def chat_model(**kwargs: object) -> ScriptedModel:
    m = ScriptedModel(**kwargs)  # type: ignore[arg-type]
    m.chat_template = TEMPLATE
    return m


def test_exported_from_tether() -> None:
    assert tether.ModelState is ModelState and tether.function is function
    assert tether.user is user and tether.assistant is assistant and tether.system is system


def test_appends_fill_holes_and_captures() -> None:
    model = ScriptedModel(target="The url is https://www.abc.com yes")
    lm = ModelState(model) + "The url is http"
    lm += gen("url", stop=" ")
    lm += " " + select(["yes", "no"], name="ok")
    assert str(lm) == lm.text == "The url is https://www.abc.com yes"
    assert lm["url"] == "s://www.abc.com" and lm["ok"] == "yes" and "ok" in lm and not lm.errors
    assert lm.captures == {"url": "s://www.abc.com", "ok": "yes"}
    with pytest.raises(KeyError, match="no capture named 'nope'"):
        lm["nope"]  # noqa: B018
    assert lm.get("nope", 3) == 3


def test_states_are_immutable_and_branch() -> None:
    model = ScriptedModel(seed=3)
    base = ModelState(model) + "Pick: "
    a = base + select(["aa", "bb"], name="x")
    b = base + "[" + gen("x", regex="[0-9]{2}") + "]"
    assert str(base) == "Pick: " and "x" not in base
    assert str(a) == "Pick: " + a["x"] and re.fullmatch(r"Pick: \[[0-9]{2}\]", str(b))
    with pytest.raises(AttributeError, match="immutable"):
        base.model = model  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del base.model


@pytest.mark.parametrize("seed", range(3))
def test_same_result_as_the_program(seed: int) -> None:
    """Appending pieces one by one writes what running them as one program writes."""
    model = ScriptedModel(seed=seed)
    pieces = ["Age: ", gen("age", regex=r"[1-9][0-9]?"), "\nOk: ", select(["yes", "no"], name="ok"),
              " ", gen("n", output=int, max_tokens=4)]
    lm = ModelState(model, temperature=1.0, seed=seed)
    for p in pieces:
        lm += p
    r = Program()
    for p in pieces:
        r = r + p
    res = r.run(ScriptedModel(seed=seed), temperature=1.0, seed=seed)
    assert str(lm) == res.text and lm.captures == res.captures


def test_the_kv_cache_is_reused_across_appends() -> None:
    model = ScriptedModel(seed=1)
    lm = ModelState(model) + "the the the the the the the the: "
    lm += select(["yes", "no"], name="a")
    before = model.costs.snapshot()
    lm += " and " + select(["yes", "no"], name="b")
    spent = model.costs.snapshot() - before
    assert spent.prompt_tokens > 10 and spent.evaluated_tokens < spent.prompt_tokens / 2
    assert lm.costs.generate_calls == 2


def test_roles_as_with_blocks() -> None:
    model = chat_model(seed=2)
    lm = ModelState(model)
    with system():
        lm += "Be brief."
    with user():
        lm += "Sky blue? "
        lm += "Say yes or no."
    with assistant():
        lm += select(["yes", "no"], name="a")
        assert str(lm).endswith(f"<|assistant|>{lm['a']}")  # the open turn, while the block is
    assert str(lm) == (f"<|system|>Be brief.<|end|>\n<|user|>Sky blue? Say yes or no.<|end|>\n"
                       f"<|assistant|>{lm['a']}<|end|>\n")


def test_turn_pieces_and_blocks_mix() -> None:
    lm = ModelState(chat_model()) + user("Hi")
    with assistant():
        lm += "Hello"
    lm += user("Bye")
    assert str(lm) == "<|user|>Hi<|end|>\n<|assistant|>Hello<|end|>\n<|user|>Bye<|end|>\n"


def test_two_blocks_of_one_role_are_two_turns() -> None:
    lm = ModelState(chat_model())
    with user():
        lm += "a"
    with user():
        lm += "b"
    assert str(lm) == "<|user|>a<|end|>\n<|user|>b<|end|>\n"


def test_blocks_fail_closed() -> None:
    lm = ModelState(chat_model())
    with user():
        lm += "Hi"
        with pytest.raises(ArgumentError, match="outside other role blocks"), assistant():
            pass
        with pytest.raises(ArgumentError, match="cannot sit inside|outside other turns"):
            lm += assistant("x")
    with pytest.raises(ArgumentError, match="inside system"):
        lm += "loose"
    with pytest.raises(ArgumentError, match="inside system"):
        lm += gen("x", max_tokens=2)
    assert str(lm) == "<|user|>Hi<|end|>\n"  # the failed appends changed nothing
    block = user()
    with block:
        pass
    with pytest.raises(ArgumentError, match="fresh block"), block:
        pass


def test_bad_operands() -> None:
    lm = ModelState(ScriptedModel())
    for bad in (3, None, b"x", object(), lm):
        with pytest.raises(ArgumentError):
            lm + bad  # noqa: B018
    with pytest.raises(ArgumentError, match="written after the state"):
        "x" + lm  # noqa: B018
    with pytest.raises(ArgumentError, match="load_model"):
        ModelState(object())
    with pytest.raises(ArgumentError):
        ModelState(ScriptedModel(), temperature=-1)


def test_a_stateful_function() -> None:
    @function
    def qa(lm: ModelState, question: str, *, options: tuple[str, ...] = ("yes", "no")) -> ModelState:
        with user():
            lm += question
        with assistant():
            lm += select(list(options), name="answer")
        return lm

    lm = ModelState(chat_model()) + qa("Sky blue?", options=("y", "n"))
    assert lm["answer"] in ("y", "n")
    assert str(lm) == f"<|user|>Sky blue?<|end|>\n<|assistant|>{lm['answer']}<|end|>\n"
    assert qa.__name__ == "qa"


def test_a_function_inside_a_turn_and_a_program() -> None:
    @function
    def number(lm: ModelState, label: str) -> ModelState:
        return lm + label + ": " + gen("n", regex="[0-9]")

    with user():
        lm = ModelState(chat_model()) + number("Count")
    assert re.fullmatch(r"<\|user\|>Count: [0-9]<\|end\|>\n", str(lm))
    r = (user("Hi") + assistant(number("Answer"))).run(chat_model())
    assert re.fullmatch(r"<\|user\|>Hi<\|end\|>\n<\|assistant\|>Answer: [0-9]<\|end\|>\n", r.text)
    seen: list[str] = []

    @function
    def look(lm: ModelState) -> ModelState:
        lm += "so far"
        seen.append(str(lm))
        return lm

    (user("Hi") + assistant(look(), select(["!"], name="e"))).run(chat_model())
    assert seen == ["<|user|>Hi<|end|>\n<|assistant|>so far"]  # its turn is still open
    plain = ("x " + number("N")).run(ScriptedModel())
    assert re.fullmatch(r"x N: [0-9]", plain.text) and plain["n"] == plain.text[-1]


def test_a_function_must_return_the_grown_state() -> None:
    @function
    def nothing(lm: ModelState) -> None:
        lm += "x"

    @function
    def other(lm: ModelState) -> ModelState:
        return ModelState(lm.model) + "y"

    lm = ModelState(ScriptedModel()) + "a"
    with pytest.raises(ArgumentError, match="return value"):
        lm + nothing()  # noqa: B018
    with pytest.raises(ArgumentError, match="grown from"):
        lm + other()  # noqa: B018
    with pytest.raises(ArgumentError):
        function(3)  # type: ignore[arg-type]


_texts = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(_texts, st.sampled_from(["hole", "choice"])), max_size=6), st.integers(0, 5))
def test_state_and_program_agree(parts: list[str], seed: int) -> None:
    """Any sequence of text and holes: appending one by one = one program run."""
    def piece(p: str, i: int) -> object:
        if p == "hole":
            return gen(f"h{i}", regex="[a-c]{1,3}")
        return select(["x", "yy"], name=f"c{i}") if p == "choice" else p

    lm = ModelState(ScriptedModel(seed=seed))
    prog = Program()
    for i, p in enumerate(parts):
        lm += piece(p, i)
        prog = prog + piece(p, i)
    res = prog.run(ScriptedModel(seed=seed))
    assert str(lm) == res.text and lm.captures == res.captures


_ops = st.lists(st.tuples(st.sampled_from(["text", "hole", "user", "assistant", "nested", "turn"]),
                          st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6)),
                max_size=8)


@settings(max_examples=40, deadline=None)
@given(_ops)
def test_any_sequence_of_appends_fails_closed(ops: list[tuple[str, str]]) -> None:
    """Random appends inside and outside blocks: each either grows the state or raises
    ArgumentError and leaves it as it was; the text always renders."""
    lm = ModelState(chat_model())
    for op, text in ops:
        before = str(lm)
        try:
            if op == "text":
                lm += text
            elif op == "hole":
                lm += select(["a", "b"], name="h")
            elif op == "turn":
                lm += user(text or "x")
            elif op == "nested":
                with user(), assistant():
                    lm += text
            else:
                with (user() if op == "user" else assistant()):
                    lm += text
        except ArgumentError:
            assert str(lm) == before
        assert isinstance(str(lm), str)
