"""Typed holes lowered as generate's outputs (tether.program.outputs.output_spec): bounded
numbers, closed objects, compact JSON, an optional leading space after text, stop_outside,
budget closing, and AFTER(V, triggers) regions — on scripted models."""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lang_rule_model import rule_model

from tether.errors import ConstraintError
from tether.lang import load_query, run_query
from tether.models.scripted import DEFAULT_TOKENS, ScriptedModel


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_int_after_text_takes_one_leading_space_and_ends_where_the_model_leaves_digits() -> None:
    m = rule_model({"A:": " 4 legs\n"})
    r = run_query('"Q: How many legs?\\nA:[N: int]"', model=m)
    h = r.holes[0]
    assert r["N"] == 4 and h.text == " 4" and h.stopped == "eos" and h.satisfied


def test_no_leading_space_after_whitespace() -> None:
    m = rule_model({"A: ": " 4"})  # the model wants a second space: the type refuses it
    r = run_query('"A: [N: int]"', model=m)
    assert not r.holes[0].text.startswith(" ")


def test_negative_int() -> None:
    r = run_query('"t: [N: int]"', model=rule_model({"t: ": "-12 degrees"}))
    assert r["N"] == -12


@pytest.mark.parametrize("digits", [25, 40])
def test_unbounded_int_is_bounded_and_finishes(digits: int) -> None:
    m = rule_model({"n: ": "7" * digits})
    r = run_query('"n: [N: int]"', model=m, max_tokens=64)
    h = r.holes[0]
    assert isinstance(r["N"], int) and len(str(r["N"])) <= 19
    assert h.satisfied and h.stopped == "eos"


def _plateau_model() -> ScriptedModel:
    """After "n: 4" the best single token is the digit "2", but ten non-digit tokens hold
    together more probability than it: the model means the number has ended."""
    box: dict[str, ScriptedModel] = {}
    others = [" ", "\n", ".", ",", "a", "b", "c", "d", "e", "f"]

    def script(toks: list[int]) -> np.ndarray:
        m = box["m"]
        v = m.vocabulary
        text = v.decode(t for t in toks if t != v.bos_id).decode()
        logits = np.full(v.n_logits, -20.0, dtype=np.float32)
        tid = {t: i for i, t in enumerate(v.tokens)}
        if text.endswith("n: "):
            logits[tid[b"4"]] = 10.0
        else:
            logits[tid[b"2"]] = 2.0
            for o in others:
                logits[tid[o.encode()]] = 1.5
        return logits

    m = ScriptedModel(DEFAULT_TOKENS, script=script)
    box["m"] = m
    return m


def test_stop_outside_counts_the_forbidden_mass_as_end_at_argmax() -> None:
    r = run_query('"n: [N: int]"', model=_plateau_model())
    assert r["N"] == 4 and r.holes[0].stopped == "eos"


def test_stop_outside_off_in_the_decoder_clause() -> None:
    r = run_query('argmax(stop_outside=False)\n    "n: [N: int]"', model=_plateau_model())
    assert str(r["N"]).startswith("42")  # the best single token wins: the digits go on


def test_stop_outside_in_beam() -> None:
    r = run_query('beam(n=2)\n    "n: [N: int]"', model=_plateau_model())
    assert r["N"] == 4


def test_sampled_int_ends_with_a_stop() -> None:
    for seed in range(3):
        r = load_query('sample(temperature=1.0)\n    "A:[N: int]"').run(model=rule_model({"A:": " 12 and more"}),
                                                                      seed=seed)
        assert isinstance(r["N"], int) and r.holes[0].stopped == "eos", r.holes[0]


def test_dataclass_hole_is_a_closed_compact_object() -> None:
    # the model wants an undeclared key: it is not written (the object closes instead)
    m = rule_model({"P: ": '{"x":1,"y":2,"z":3}'})
    r = load_query('"P: [P: Point]"', env={"Point": Point}).run(model=m)
    h = r.holes[0]
    assert h.text.startswith('{"x":1,"y":2') and "z" not in h.text and " " not in h.text
    assert isinstance(r["P"], Point) and r["P"].x == 1 and h.satisfied


def test_pydantic_and_generic_types() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        name: str
        n: int

    m = rule_model({"I: ": '{"name":"ab","n":3}', "L: ": "[1,2,3]", "C: ": '"yes"'})
    src = '"I: [I: Item]\\nL: [L: list[int]]\\nC: [C: Literal[\\"yes\\", \\"no\\"]]"'
    r = load_query(src, env={"Item": Item, "Literal": Literal}).run(model=m)
    assert r["I"] == Item(name="ab", n=3) and r["L"] == [1, 2, 3] and r["C"] == "yes"
    assert all(h.satisfied for h in r.holes)


def test_bool_and_float_holes() -> None:
    m = rule_model({"b:": " true!", "f: ": "3.25 or so"})
    r = run_query('"b:[B: bool]\\nf: [F: float]"', model=m)
    assert r["B"] is True and r["F"] == 3.25


def test_budget_closes_a_typed_hole_validly() -> None:
    m = rule_model({"P: ": '{"x":1234567,"y":7654321}'})
    r = load_query('"P: [P: Point]"', env={"Point": Point}).run(model=m, max_tokens=12)
    h = r.holes[0]
    assert isinstance(r["P"], Point) and h.satisfied and h.n_tokens <= 12


def test_budget_closing_off_leaves_the_value_none() -> None:
    m = rule_model({"P: ": '{"x":1234567,"y":7654321}'})
    r = load_query('argmax(close_on_budget=False)\n    "P: [P: Point]"', env={"Point": Point}).run(model=m, max_tokens=6)
    assert r["P"] is None and not r.holes[0].satisfied


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet="0123456789-x .", max_size=30))
def test_int_holes_are_always_ints_or_none(script: str) -> None:
    r = run_query('"A:[N: int]"', model=rule_model({"A:": script}), max_tokens=24)
    h = r.holes[0]
    assert re.fullmatch(r" ?-?(0|[1-9][0-9]{0,18})", h.text) or not h.satisfied
    if h.satisfied:
        assert r["N"] == int(h.text)


# --- AFTER(V, triggers) --------------------------------------------------------------------


def test_after_gives_free_text_then_the_type() -> None:
    m = rule_model({"A:": " the sky is blue</think>42 and more"})
    r = run_query('"A:[N: int]" where AFTER(N, "</think>")', model=m)
    h = r.holes[0]
    assert r["N"] == 42 and h.text == " the sky is blue</think>42" and h.satisfied


def test_after_closes_the_free_region_within_the_budget() -> None:
    m = rule_model({"A:": " and so on" * 20})  # never writes the trigger
    r = run_query('"A:[N: int]" where AFTER(N, "</think>")', model=m, max_tokens=40)
    h = r.holes[0]
    assert "</think>" in h.text and isinstance(r["N"], int) and h.satisfied and h.n_tokens <= 40


def test_after_closes_the_free_region_in_sampled_branches() -> None:
    m = rule_model({"A:": " and so on" * 20, "</think>": "7"})
    r = load_query('sample(n=2, temperature=1.0)\n    "A:[N: int]" where AFTER(N, "</think>")').run(
        model=m, max_tokens=40, seed=3)
    for x in r.results:
        h = x.holes[0]
        assert h.satisfied and h.n_tokens <= 40 and "</think>" in h.text and x["N"] == 7, h


def test_after_with_a_dict_of_triggers_and_beam() -> None:
    m = rule_model({"A:": " hmm<b>true"})
    r = load_query('beam(n=2)\n    "A:[X]" where AFTER(X, {"<a>": int, "<b>": bool})').run(model=m)
    assert r["X"] is True


def test_after_with_budget_in_beam() -> None:
    m = rule_model({"A:": " and so on" * 20})
    r = run_query('beam(n=2)\n    "A:[N: int]" where AFTER(N, ["</think>"])', model=m, max_tokens=30)
    assert isinstance(r["N"], int) and "</think>" in r.holes[0].text


@pytest.mark.parametrize(("where", "word"), [
    ('AFTER(N, "</think>") or len(N) < 3', "conjunct"),
    ('AFTER(N, 5)', "triggers"),
    ('AFTER(N, "")', "triggers"),
    ('AFTER(N)', "argument"),
    ('AFTER(Z, "x")', "hole"),
    ('AFTER(N, "a") and AFTER(N, "b")', "more than one"),
    ('AFTER(N, ["think>", "</think>"])', "ends"),
])
def test_after_errors(where: str, word: str) -> None:
    with pytest.raises(ConstraintError, match=word):
        run_query(f'"A:[N: int]" where {where}', model=rule_model({}))


def test_typed_hole_on_a_black_box_model_sends_the_type_and_checks_the_reply() -> None:
    from test_runtime import FakeHTTPModel

    m = FakeHTTPModel({"n:": "12", "p:": '{"x":1}'})
    r = load_query('"n:[N: int]\\np:[P: Point]"', env={"Point": Point}).run(model=m)
    assert r["N"] == 12 and r.holes[0].satisfied
    assert r["P"] is None and not r.holes[1].satisfied  # "y" is missing: reported, not trusted
    with pytest.raises(Exception, match="AFTER"):
        run_query('"n:[N: int]" where AFTER(N, "</think>")', model=FakeHTTPModel({}))


def test_a_typed_hole_ended_by_the_budget_token_is_judged_on_its_whole_text() -> None:
    # the last token the budget allows completes the value: satisfied, value parsed
    r = run_query('"n: [N: int]"', model=rule_model({"n: ": "123"}), max_tokens=1)
    h = r.holes[0]
    assert h.n_tokens == 1 and h.satisfied == (r["N"] is not None)
    assert r["N"] == int(h.text)
