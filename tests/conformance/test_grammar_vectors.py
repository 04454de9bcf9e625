"""Acceptance vectors of llama.cpp (GBNF), xgrammar (EBNF) and llguidance (Lark) through
tether's front ends and the byte-level reference recognizer (greedy lexing).

This checks the front ends' lowering choices end to end: a GBNF grammar lowered with
the wrong terminals would reject strings llama.cpp accepts. Vectors that need features
tether does not have are skipped with the reason; known differences are listed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from tether.errors import GrammarError
from tether.grammar import Grammar

parser = pytest.importorskip("tether.parser")

DATA = Path(__file__).resolve().parents[2] / "../shared/data/grammars/vectors"
if not DATA.exists():
    pytest.skip(f"{DATA} is absent (shared test data)", allow_module_level=True)

LLAMA = json.loads((DATA / "llama.cpp-test-grammar-integration.json").read_text())
XGR = json.loads((DATA / "xgrammar-tests.json").read_text())
LLG = json.loads((DATA / "llguidance-test-lark.json").read_text())

# xgrammar vectors where the regex flavors differ (the regex layer's ECMAScript reading)
XGR_DIFFERENCES = {
    ('root ::= Regex("a.b")', "a\nb"): "xgrammar's '.' matches a newline",
    ('root ::= Regex("(?i)Σ")', "σ"): "case folding of Σ/σ/ς differs",
}


@pytest.mark.parametrize(
    "case", [c for c in LLAMA["cases"] if c["format"] == "gbnf"], ids=lambda c: c["description"]
)
def test_llama_cpp_gbnf(case: dict) -> None:  # type: ignore[type-arg]
    g = Grammar.from_gbnf(case["grammar"])
    for s in case["valid"]:
        assert parser.accepts(g, s), s
    for s in case["invalid"]:
        assert not parser.accepts(g, s), s


def _xgr_groups() -> list[tuple[str, list[tuple[str, bool]]]]:
    groups: dict[str, list[tuple[str, bool]]] = {}
    for c in XGR["cases"]:
        if c["kind"] == "ebnf":
            groups.setdefault(c["grammar"], []).append((c["input"], c["accepted"]))
    return sorted(groups.items())


@pytest.mark.parametrize(("grammar", "cases"), _xgr_groups(), ids=lambda x: x[:40] if isinstance(x, str) else "")
def test_xgrammar_ebnf(grammar: str, cases: list[tuple[str, bool]]) -> None:
    try:
        g = Grammar.from_gbnf(grammar)
    except GrammarError as exc:
        if "look-around" in str(exc) or "options are not supported" in str(exc):
            pytest.skip(str(exc).splitlines()[0])
        raise
    for text, want in cases:
        if (grammar, text) in XGR_DIFFERENCES:
            continue
        assert parser.accepts(g, text) == want, (text, want)


def _llg_cases() -> list[dict]:  # type: ignore[type-arg]
    return [c for c in LLG["cases"] if "%json" not in c["grammar"]]


@pytest.mark.parametrize("case", _llg_cases(), ids=lambda c: f"{c['test_fn']}-{c['line']}")
def test_llguidance_lark(case: dict) -> None:  # type: ignore[type-arg]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = Grammar.from_lark(case["grammar"])
    except GrammarError as exc:
        if "parametric" in str(exc) or "%lark" in str(exc):
            pytest.skip(str(exc).splitlines()[0])
        raise
    for s in case["valid"]:
        assert parser.accepts(g, s), s
    for s in case["invalid_viable_prefix"]:
        assert parser.is_viable_prefix(g, s) and not parser.accepts(g, s), s
    for s in case["invalid"]:
        assert not parser.is_viable_prefix(g, s), s
