"""``_kernels.row_min`` / ``row_targets`` (the depth search's row reads) against numpy,
on random tables with UNKNOWN and DEAD entries, and the depth search they serve against
a plain breadth-first search over the same table."""

from __future__ import annotations

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tether.engine import _kernels as k
from tether.engine.slices import ASCII_TEXT, INF, UTF8_BETWEEN, UTF8_MOVES
from tether.engine.walk import containment_depth

DEAD, UNKNOWN = -1, -2


@st.composite
def tables(draw: st.DrawFn) -> np.ndarray:
    """Rows of a few runs of values: next states, sometimes DEAD or UNKNOWN."""
    n = draw(st.integers(1, 6))
    states = st.integers(0, n - 1)
    values = st.one_of(states, states, states, st.sampled_from([UNKNOWN, DEAD]))
    table = np.zeros((n, 256), np.int32)
    for s in range(n):
        table[s, :] = draw(states)
        for _ in range(draw(st.integers(0, 6))):
            lo = draw(st.integers(0, 255))
            table[s, lo:draw(st.integers(lo, 255)) + 1] = draw(values)
    return table


@settings(max_examples=150, deadline=None)
@given(tables(), st.data())
def test_row_min_and_targets_agree_with_numpy(table: np.ndarray, data: st.DataObject) -> None:
    state = data.draw(st.integers(0, table.shape[0] - 1))
    us = data.draw(st.integers(0, len(UTF8_MOVES) - 1))
    for cols, nexts in ((ASCII_TEXT, np.zeros(len(ASCII_TEXT), np.intp)), UTF8_MOVES[us]):
        vals = table[state, cols]
        event("negative" if vals.min() < 0 else f"{len(np.unique(vals))} distinct")
        assert k.row_min(table, state, cols) == vals.min()
        out = np.full(256, -7, np.int64)
        n = k.row_targets(table, state, cols, nexts, out)
        if vals.min() < 0:
            assert n == vals.min()
        else:
            want = np.unique(vals.astype(np.int64) * 16 + nexts)
            assert n == len(want)
            assert out[:n].tolist() == want.tolist()


def test_decoder_states_fit_the_packing() -> None:
    """``row_targets`` packs a UTF-8 decoder state in the low 4 bits of a pair."""
    assert all(nx < 16 for nexts in (n for _, n in UTF8_MOVES) for nx in nexts.tolist())
    assert len(UTF8_MOVES) <= 16


@st.composite
def filled_tables(draw: st.DrawFn) -> np.ndarray:
    """Complete tables (no UNKNOWN) whose states mostly loop on text bytes."""
    n = draw(st.integers(1, 5))
    table = np.full((n, 256), DEAD, np.int32)
    for s in range(n):
        table[s, :] = draw(st.sampled_from([DEAD, *range(n)]))
        for _ in range(draw(st.integers(0, 3))):
            lo = draw(st.integers(0, 255))
            hi = draw(st.integers(lo, min(255, lo + 40)))
            table[s, lo:hi + 1] = draw(st.sampled_from([DEAD, *range(n)]))
    return table


def reference_depth(table: np.ndarray, state: int, limit: int) -> int:
    """The plain search: levels of (lexer state, UTF-8 state) pairs until a text byte
    kills the lexeme."""
    if (table[state, ASCII_TEXT] < 0).any():
        return 0
    frontier, seen, depth = {(state, UTF8_BETWEEN)}, {(state, UTF8_BETWEEN)}, 0
    while frontier:
        if depth >= limit:
            return limit
        nxt = set()
        for ls, us in frontier:
            bs, ns = UTF8_MOVES[us]
            vals = table[ls, bs]
            if vals.min() < 0:
                return depth
            nxt |= {(int(v), int(u)) for v, u in zip(vals, ns, strict=True)} - seen
        seen |= nxt
        frontier, depth = nxt, depth + 1
    return INF


@settings(max_examples=150, deadline=None)
@given(filled_tables(), st.data())
def test_containment_depth_matches_a_plain_search(table: np.ndarray, data: st.DataObject) -> None:
    state = data.draw(st.integers(0, table.shape[0] - 1))
    limit = data.draw(st.integers(1, 40))

    def no_fill(_s: int, _need: int) -> None:
        raise AssertionError("a complete table needs no fill")

    closed: list[int] = []
    got = containment_depth(lambda: table, no_fill, state, limit, budget=10_000, closed=closed)
    assert got == reference_depth(table, state, limit)
    # a search that ran out of pairs proves each state it met between characters INF
    assert (state in closed) if got >= INF else not closed
    for s in closed:
        assert reference_depth(table, s, 10_000) == INF
