"""Fuzzing the grammar front ends and the engine: any grammar text gives a correct result
or a TetherError within small limits; never another exception, never a hang.

Generated inputs (hypothesis): structured GBNF / Lark / KBNF grammars (literals, classes,
references, groups, alternations, repeats with small and huge counts), the same texts
mutated (characters inserted or deleted), deep nesting, long rule chains, and random
text. Each is loaded under a small `tether.limits.Limits`, compiled for a byte
vocabulary, and driven a few steps: every token the mask allows is consumed, the prefix
must stay viable for the reference recognizer, an accepting matcher must be accepted by
it, and the shortest completion must complete the prefix.

Counts of outcomes by front end and error class are kept in ``OUTCOMES`` and printed at
the end of the module (``pytest -s``; also written to ``$TETHER_FUZZ_REPORT`` if set).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.engine import compile as engine_compile
from tether.engine.completion import shortest_completion
from tether.errors import TetherError
from tether.grammar.ir import Grammar
from tether.limits import Limits, limits
from tether.parser import accepts, is_viable_prefix
from tether.tokens.vocabulary import Vocabulary

SMALL = Limits(
    max_text_chars=20_000, max_rules=300, max_nesting=40, max_repeat=60, max_expanded=4_000,
    max_alternatives=300, max_dfa_states=3_000, max_earley_items=30_000, compile_seconds=5.0,
    completion_states=3_000, completion_bytes=3_000,
)
VOCAB = Vocabulary.from_bytes([b""] + [bytes([i]) for i in range(256)], eos_ids=[0])
OUTCOMES: Counter[str] = Counter()
LOADERS: dict[str, Callable[[str], Grammar]] = {
    "gbnf": lambda t: Grammar.from_gbnf(t, start="root"),
    "lark": lambda t: Grammar.from_lark(t),
    "kbnf": lambda t: Grammar.from_kbnf(t, start="root"),
}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    lines = [f"{k}: {v}" for k, v in sorted(OUTCOMES.items())]
    text = "fuzz outcomes (front/stage/result: count)\n" + "\n".join(lines)
    print("\n" + text)
    path = os.environ.get("TETHER_FUZZ_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")


# ---- expressions, rendered in each syntax ------------------------------------------------

COUNTS = st.one_of(st.integers(0, 3), st.sampled_from([59, 61, 1000, 10**6, 10**12, 10**40]))
LIT = st.text(alphabet='ab c"\\\n', min_size=0, max_size=4)
LEAF = st.one_of(
    st.tuples(st.just("lit"), LIT),
    st.tuples(st.just("cls"), st.sampled_from(["a-c", "^a", "0-9", "a"])),
    st.tuples(st.just("ref"), st.integers(0, 5)),
    st.tuples(st.just("any")),
)


def _branches(inner: st.SearchStrategy) -> st.SearchStrategy:  # type: ignore[type-arg]
    return st.one_of(
        st.tuples(st.just("seq"), st.lists(inner, min_size=1, max_size=4)),
        st.tuples(st.just("alt"), st.lists(inner, min_size=1, max_size=4)),
        st.tuples(st.just("rep"), inner, COUNTS, st.one_of(st.none(), COUNTS)),
        st.tuples(st.sampled_from(["star", "plus", "opt"]), inner),
    )


EXPR = st.recursive(LEAF, _branches, max_leaves=12)


def _gbnf_lit(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render(front: str, e: tuple) -> str:  # type: ignore[type-arg]
    """One expression in the syntax of ``front`` (recursion bounded by ``max_leaves``)."""
    k = e[0]
    if k == "lit":
        if front == "kbnf":
            return "'" + e[1].replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"
        return _gbnf_lit(e[1])
    if k == "cls":
        return {"gbnf": f"[{e[1]}]", "lark": f"/[{e[1]}]/", "kbnf": f'#"[{e[1]}]"'}[front]
    if k == "ref":
        return f"r{e[1]}"
    if k == "any":
        return {"gbnf": ".", "lark": "/./s", "kbnf": '#"."'}[front]
    if k == "seq":
        return " ".join(render(front, x) for x in e[1])
    if k == "alt":
        return "(" + " | ".join(render(front, x) for x in e[1]) + ")"
    inner = "(" + render(front, e[1]) + ")"
    if k == "rep":
        lo, hi = e[2], e[3]
        if front == "kbnf":
            return "{" + render(front, e[1]) + "}"
        if front == "lark" and hi is not None and hi >= lo:
            return f"{inner} ~ {lo}..{hi}"
        return f"{inner}{{{lo}}}" if hi is None else f"{inner}{{{lo},{hi}}}"
    if front == "kbnf":
        return {"star": "{" + render(front, e[1]) + "}", "opt": "[" + render(front, e[1]) + "]",
                "plus": f"{inner} {{{render(front, e[1])}}}"}[k]
    return inner + {"star": "*", "plus": "+", "opt": "?"}[k]


def grammar_text(front: str, bodies: list[tuple]) -> str:  # type: ignore[type-arg]
    names = ["root"] + [f"r{i}" for i in range(6)]
    # every referenced rule is defined (r_i with no body derives "x")
    bodies = bodies + [("lit", "x")] * (7 - len(bodies))
    if front == "gbnf":
        return "\n".join(f"{n} ::= {render(front, b)}" for n, b in zip(names, bodies, strict=True))
    if front == "lark":
        lines = [f"{'start' if n == 'root' else n}: {render(front, b)}" for n, b in zip(names, bodies, strict=True)]
        return "\n".join(lines)
    return "\n".join(f"{n} ::= {render(front, b)};" for n, b in zip(names, bodies, strict=True))


GRAMMARS = st.lists(EXPR, min_size=1, max_size=7)


@st.composite
def mutated(draw: st.DrawFn, front: str) -> str:
    text = grammar_text(front, draw(GRAMMARS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        if draw(st.booleans()) and text:
            text = text[:i] + text[i + 1:]
        else:
            text = text[:i] + draw(st.sampled_from(list('()[]{}|"\'\\*+?:=;-~&/#%.,\n0x9é\ud800'))) + text[i:]
    return text


def deep(front: str, depth: int, kind: str) -> str:
    if kind == "parens":
        body = "(" * depth + ("'a'" if front == "kbnf" else '"a"') + ")" * depth
    elif kind == "alts":
        lit = "'a'" if front == "kbnf" else '"a"'
        body = f"({lit} | " * depth + lit + ")" * depth
    else:  # a chain of rules
        lines = []
        for i in range(depth):
            lit = "'x'" if front == "kbnf" else '"x"'
            lines.append((f"r{i}", f"{lit} r{i + 1}" if kind == "chain" else f"r{i + 1}"))
        lines.append((f"r{depth}", "'y'" if front == "kbnf" else '"y"'))
        head = {"gbnf": "root ::= r0", "lark": "start: r0", "kbnf": "root ::= r0;"}[front]
        sep = {"gbnf": " ::= ", "lark": ": ", "kbnf": " ::= "}[front]
        end = ";" if front == "kbnf" else ""
        return head + "\n" + "\n".join(f"{n}{sep}{b}{end}" for n, b in lines)
    return {"gbnf": f"root ::= {body}", "lark": f"start: {body}", "kbnf": f"root ::= {body};"}[front]


# ---- the property -------------------------------------------------------------------------


def _allowed(out: np.ndarray) -> list[int]:  # type: ignore[type-arg]
    bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: len(VOCAB)]
    return [int(t) for t in np.flatnonzero(bits) if t != 0]


def check(front: str, text: str, choose: Callable[[list[int]], int], steps: int) -> None:
    """Load, compile and drive ``text``; only TetherErrors may escape the front end and
    engine, and whatever the engine allows must agree with the reference recognizer."""
    OUTCOMES[f"{front}/tried"] += 1
    with limits(SMALL):
        try:
            g = LOADERS[front](text)
        except TetherError as exc:
            OUTCOMES[f"{front}/load/{type(exc).__name__}"] += 1
            return
        try:
            cc = engine_compile(g, VOCAB)
            m = cc.matcher()
            out = np.zeros(cc.n_words, np.uint32)
            produced = b""
            for _ in range(steps):
                m.compute_mask(out)
                allowed = _allowed(out)
                if not allowed:
                    assert out[0] & 1, "no token and no EOS allowed: a dead end"
                    break
                t = choose(allowed)
                if not m.consume(t):  # only a bound may refuse what the mask allowed
                    assert m.error and "exceeded" in m.error, m.error
                    OUTCOMES[f"{front}/decode/bound"] += 1
                    return
                produced += bytes([t - 1])
            assert is_viable_prefix(g, produced), produced
            if m.is_accepting():
                assert accepts(g, produced), produced
            tail = shortest_completion(m)
            assert accepts(g, produced + tail), (produced, tail)
            OUTCOMES[f"{front}/ok"] += 1
        except TetherError as exc:
            OUTCOMES[f"{front}/engine/{type(exc).__name__}"] += 1


FRONTS = ["gbnf", "lark", "kbnf"]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


def _structured(front: str, data: st.DataObject) -> None:
    text = grammar_text(front, data.draw(GRAMMARS, label="rules"))
    check(front, text, lambda xs: data.draw(st.sampled_from(xs)), data.draw(st.integers(0, 6)))


def _mutated(front: str, data: st.DataObject) -> None:
    text = data.draw(mutated(front), label="text")
    check(front, text, lambda xs: data.draw(st.sampled_from(xs)), data.draw(st.integers(0, 4)))


def _deep(front: str, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(["parens", "alts", "chain", "unit"]))
    depth = data.draw(st.one_of(st.integers(1, 45), st.sampled_from([100, 300, 1000])))
    check(front, deep(front, depth, kind), lambda xs: xs[0], 3)


def _random(front: str, data: st.DataObject) -> None:
    text = data.draw(st.one_of(st.text(max_size=80), st.binary(max_size=80).map(
        lambda b: b.decode("utf-8", "replace"))))
    check(front, text, lambda xs: xs[-1], 2)


CASES = {"structured": _structured, "mutated": _mutated, "deep": _deep, "random": _random}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("front", FRONTS)
@FAST
@given(data=st.data())
def test_fuzz_grammars(front: str, case: str, data: st.DataObject) -> None:
    CASES[case](front, data)


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("front", FRONTS)
@LONG
@given(data=st.data())
def test_fuzz_grammars_long(front: str, case: str, data: st.DataObject) -> None:
    CASES[case](front, data)
