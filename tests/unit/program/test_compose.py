"""Guidance-style composition: text + holes, captures, healing at hole boundaries."""

from __future__ import annotations

import re

import pytest

from tether.models.scripted import ScriptedModel
from tether.program import Program, gen, select


def test_plus_builds_a_program() -> None:
    p = "a" + gen("x") + "b" + select(["1", "2"], name="y")
    assert isinstance(p, Program) and len(p.pieces) == 4


def test_captures_and_text() -> None:
    model = ScriptedModel(target="The url is https://www.abc.com yes")
    p = "The url is http" + gen("url", stop=" ") + " " + select(["yes", "no"], name="ok")
    r = p.run(model)
    assert r.text == "The url is https://www.abc.com yes"
    assert r["url"] == "s://www.abc.com" and r["ok"] == "yes" and not r.errors


@pytest.mark.parametrize("seed", range(5))
def test_regex_holes_hold_with_sampling(seed: int) -> None:
    model = ScriptedModel(seed=seed)
    p = "Age: " + gen("age", regex=r"[1-9][0-9]?") + "\nOk: " + select(["yes", "no"], name="ok")
    r = p.run(model, temperature=1.0, seed=seed)
    assert re.fullmatch(r"[1-9][0-9]?", r["age"]) and r["ok"] in ("yes", "no")
    assert r.text == f"Age: {r['age']}\nOk: {r['ok']}"
    again = p.run(model, temperature=1.0, seed=seed)
    assert again.captures == r.captures


def test_list_append() -> None:
    model = ScriptedModel(seed=1)
    p = "a" + select(["x", "y"], name="v", list_append=True) + "b" + select(["x", "y"], name="v", list_append=True)
    r = p.run(model)
    assert len(r["v"]) == 2


def test_gen_rejects_regex_and_output_together() -> None:
    with pytest.raises(ValueError):
        ("a" + gen("x", regex="a", output=["a"])).run(ScriptedModel())
