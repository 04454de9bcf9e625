"""GBNF, Lark and KBNF terminals carry their regex nodes, built from the front-end AST.

The lowering spells each terminal's AST as the regex parse tree and lowers it once
(``grammar/terminal_nodes.py``); the engine then compiles nodes and never parses a grammar
terminal's text. The node is the very node the terminal's text parses to (nodes are
interned) on every grammar of ``../shared/data/grammars``, and a node of the same language on
generated ones.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether import regex as rx
from tether.errors import TetherError
from tether.grammar import ir
from tether.grammar.ir import Grammar, Terminal

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "grammars"


def _parsed(t: Terminal) -> rx.Node:
    """The node parsed from the terminal's text (what the engine compiled before)."""
    return ir._terminal_node(t.regex, t.literal, t.flavor, False, None, t.expr)


def _load(fmt: str, text: str, start: str | None = None) -> Grammar:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fmt == "gbnf":
            return Grammar.from_gbnf(text)
        if fmt == "kbnf":
            return Grammar.from_kbnf(text)
        return Grammar.from_lark(text, start=start) if start else Grammar.from_lark(text)


def _check_carried(g: Grammar, identical: bool = True) -> int:
    """Every non-literal terminal carries its node: the very node its text parses to, or
    (``identical=False``) a node of the same language. The parser merges neighbouring
    counted repeats only where it reads an atom (``\\.?\\.`` is one counter, ``a?a`` two
    nodes), so a built tree can differ in shape from the text's, never in language."""
    n = 0
    for t in g.terminals.values():
        if t.literal is not None:
            continue  # literals compile from their bytes, no text is parsed
        assert t.node is not None, f"terminal {t.name} reaches the engine as text"
        assert t.to_node() is t.node
        if identical:
            assert t.node is _parsed(t), f"terminal {t.name}: {t.regex or t.expr}"
        else:
            assert rx.is_equivalent(t.node, _parsed(t)), f"terminal {t.name}: {t.regex or t.expr}"
        n += 1
    return n


def _manifest() -> list[tuple[str, str, str | None]]:
    path = DATA / "manifest.json"
    if not path.exists():
        return []
    m = json.loads(path.read_text())
    return [(g["file"], g["format"], g.get("start")) for g in m["grammars"]]


@pytest.mark.skipif(not (DATA / "manifest.json").exists(), reason="../shared/data/grammars is not present")
def test_every_shared_grammar_terminal_carries_the_node_its_text_parses_to() -> None:
    carried = 0
    for file, fmt, start in _manifest():
        carried += _check_carried(_load(fmt, (DATA / file).read_text(), start))
    assert carried >= 50  # the manifest's grammars have 73 regex terminals


def test_lookarounds_are_judged_on_the_whole_terminal() -> None:
    # the look-ahead of the regex reads past it into the literal that follows in the
    # same terminal: lowered on its own it would see the end of the text
    g = _load("lark", 'start: A\nA: /a(?=bc)/ "bc"\n')
    (t,) = [t for t in g.terminals.values() if t.literal is None]
    assert rx.matches(t.node, b"abc") and not rx.matches(t.node, b"a")
    assert t.node is _parsed(t)


def test_the_engine_compiles_grammar_terminals_without_parsing_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.engine.compiled import compile as compile_constraint
    from tether.tokens.vocabulary import Vocabulary

    g = _load("gbnf", 'root ::= [a-z]+ ("," [0-9]{1,3})* "."\n')
    g2 = _load("lark", 'start: WORD ("," NUM)*\nWORD: /[a-z]+/i\nNUM: /(?!0)\\d{1,3}/\n')

    def refuse(*args: object) -> object:
        raise AssertionError("a terminal's text was parsed")

    monkeypatch.setattr(ir, "_parse", refuse)
    vocab = Vocabulary.from_bytes([b"", b"a", b"b", b"ab", b",", b"1", b"12", b".", b"A"], eos_ids=[0])
    for grammar in (g, g2):
        c = compile_constraint(grammar, vocab)
        out = np.zeros(c.n_words, dtype=np.uint32)
        c.matcher().compute_mask(out)
        assert out.any()


# ---- generated grammars --------------------------------------------------------------

PIECE = st.sampled_from([
    '"ab"', '"a"i', "/[a-c]+/", "/x(?=y)/", "/(?!ab)[a-z]{1,3}/", "/\\d+/", "/a|bc|bd/",
    "/[^\\n]*/s", "/\\bq/", '"q" "r"', "/(?i:k)z/", "/é+/", "/[\\u00e0-\\u00ff]/",
])


@st.composite
def lark_terminals(draw: st.DrawFn) -> str:
    body = []
    for _ in range(draw(st.integers(1, 4))):
        p = draw(PIECE)
        q = draw(st.sampled_from(["", "?", "*", "+", "~ 2", "~ 0..3"]))
        body.append(f"({p}){q}" if q and not q.startswith("~") else f"({p}) {q}" if q else p)
    alt = " | ".join([" ".join(body), draw(PIECE)]) if draw(st.booleans()) else " ".join(body)
    return f"start: T+\nT: {alt}\n"


GB_ATOM = st.sampled_from(['"ab"', "[a-c]", "[^x]", '"\\n"', ".", '"é"', "[0-9]", "r1"])


@st.composite
def gbnf_grammars(draw: st.DrawFn) -> str:
    def expr(depth: int) -> str:
        if depth == 0 or draw(st.integers(0, 2)) == 0:
            return draw(GB_ATOM)
        k = draw(st.sampled_from(["seq", "alt", "rep"]))
        if k == "rep":
            q = draw(st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}"]))
            return f"({expr(depth - 1)}){q}"
        items = [expr(depth - 1) for _ in range(draw(st.integers(1, 3)))]
        return " ".join(items) if k == "seq" else "(" + " | ".join(items) + ")"

    return f"root ::= {expr(3)}\nr1 ::= {expr(2).replace('r1', '[z]')}\n"


KB_ATOM = st.sampled_from(["'ab'", '#"[a-c]+"', "except!('>>')", "except!(#\"[0-9]\", 3)", "'x'"])


@st.composite
def kbnf_grammars(draw: st.DrawFn) -> str:
    items = [draw(KB_ATOM) for _ in range(draw(st.integers(1, 3)))]
    return f"start ::= {' '.join(items)} ;"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.tuples(st.just("lark"), lark_terminals()),
                      st.tuples(st.just("gbnf"), gbnf_grammars()),
                      st.tuples(st.just("kbnf"), kbnf_grammars())))
def test_generated_grammars_carry_the_nodes_their_texts_parse_to(text: tuple[str, str]) -> None:
    fmt, source = text
    try:
        g = _load(fmt, source)
    except TetherError:
        return  # refused with a tether error (e.g. a look-ahead the lexer cannot decide)
    _check_carried(g, identical=False)


@settings(max_examples=80, deadline=None)
@given(pattern=st.sampled_from(["a*", "[a-z]+", "(?:x|)", "é?", "\\d{2,4}", "(?=a)a|b", "^x$"]),
       ignore_case=st.booleans())
def test_a_regex_grammar_carries_the_node_of_its_one_parse(pattern: str, ignore_case: bool) -> None:
    t = Grammar.from_regex(pattern, ignore_case=ignore_case).terminals["REGEX"]
    assert t.to_node() is t.node
    assert t.node is ir._terminal_node(t.regex, t.literal, t.flavor, t.ignore_case, None, t.expr)


@settings(max_examples=80, deadline=None)
@given(triggers=st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=10, unique=True))
def test_a_trigger_terminal_carries_a_node_of_its_language(triggers: list[str]) -> None:
    from tether.program.outputs import _trigger_terminal

    t = _trigger_terminal("T", triggers[0], triggers)
    assert rx.is_equivalent(t.node, _parsed(t))
