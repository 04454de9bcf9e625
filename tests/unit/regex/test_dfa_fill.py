"""LexerDfa.fill_classes: every fast path (one-terminal rows, node rows of small states,
row writers) gives the transitions of per-byte derivatives, and partial fills leave
exactly the classes the contract says."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.regex import DEAD, UNKNOWN, LexerDfa, byte_classes, derivative, is_empty, literal, parse
from tether.regex.dfa import _runs, _writer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "property"))
from regex_strategies import patterns  # noqa: E402


def _expected(dfa: LexerDfa, state: int, b: int) -> tuple[tuple[int, object], ...]:
    """The (terminal, node) pairs after byte ``b``, by plain per-byte derivatives."""
    out = []
    for t in dfa.live(state):
        d = derivative(dfa.derivative_of(state, t), b)
        if is_empty(d, limit=dfa.max_states) is not True:
            out.append((t, d))
    return tuple(out)


def _check_entries(dfa: LexerDfa, state: int, need_all: bool = True) -> None:
    row = dfa.table[state]
    for b in range(256):
        target = int(row[b])
        if target == UNKNOWN:
            assert not need_all, (state, b)
            continue
        exp = _expected(dfa, state, b)
        if not exp:
            assert target == DEAD, (state, b)
            continue
        assert target >= 0, (state, b)
        got = tuple((t, dfa.derivative_of(target, t)) for t in dfa.live(target))
        assert got == exp, (state, b)


def _check_reachable(dfa: LexerDfa, start: int, limit: int = 10_000) -> None:
    """Fill and check the rows of the states reachable from ``start`` (the first
    ``limit`` of them, depth first)."""
    seen, todo = {start}, [start]
    while todo and len(seen) <= limit:
        s = todo.pop()
        dfa.fill_row(s)
        _check_entries(dfa, s)
        for x in np.unique(dfa.table[s]).tolist():
            if x >= 0 and x not in seen:
                seen.add(x)
                todo.append(x)


words = st.text(alphabet="abc\"é_", min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(words, min_size=1, max_size=8, unique=True))
def test_literal_terminals_match_per_byte_derivatives(ws: list[str]) -> None:
    # one-terminal states (the literal fast path) and states of several literals
    dfa = LexerDfa([literal(w) for w in ws])
    _check_reachable(dfa, dfa.start())
    for t in range(len(ws)):
        _check_reachable(dfa, dfa.start([t]))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(patterns(anchors=False, flags=False), min_size=1, max_size=4))
def test_random_terminal_sets_match_per_byte_derivatives(pats: list[str]) -> None:
    dfa = LexerDfa([parse(p) for p in pats], max_states=3000)
    try:
        _check_reachable(dfa, dfa.start(), limit=40)
    except Exception as exc:  # a pattern may need more states than this test allows
        if type(exc).__name__ != "RegexLimitError":
            raise


def test_json_schema_like_terminals() -> None:
    ws = "[ \\t\\n\\r]{0,16}"
    key = '"(?:[^"\\\\]|\\\\.)*"'
    pats = [f'{ws}"name"{ws}:{ws}', f'{ws}"nickname"{ws}:{ws}', f"{ws},{ws}", f"{ws}\\}}", key]
    nodes = [parse(p) for p in pats]
    # "any key but the listed ones": intersection with a complement (boolean nodes)
    from tether.regex import complement, intersect
    other = intersect(parse(key), complement(parse('"name"|"nickname"')))
    dfa = LexerDfa([*nodes, other])
    _check_reachable(dfa, dfa.start([0, 1, 2, 3]))
    _check_reachable(dfa, dfa.start([0, 5]))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(words, min_size=1, max_size=5, unique=True), st.integers(0, 255),
       st.integers(0, 6), st.data())
def test_partial_fills_follow_the_contract(ws: list[str], seed: int, extra: int, data: st.DataObject) -> None:
    pats = [literal(w) for w in ws] + [parse("[a-c]{0,3}x"), parse('"[^"]*"')]
    dfa = LexerDfa(pats)
    allowed = data.draw(st.sets(st.integers(0, len(pats) - 1), min_size=1))
    s = dfa.start(allowed)
    rng = random.Random(seed)
    need = 0
    for _ in range(rng.randint(0, 3)):
        need |= 1 << rng.randrange(256)
    classes = byte_classes(dfa.derivative_of(s, t) for t in dfa.live(s))
    npairs = len(dfa.live(s))
    dfa.fill_classes(s, need, extra=extra)
    row = dfa.table[s]
    unneeded = [c for c in classes if not c & need]
    filled_unneeded = min(len(unneeded), extra // npairs) if npairs else 0
    for c in classes:
        b = (c & -c).bit_length() - 1
        bytes_of = [x for x in range(256) if c >> x & 1]
        known = {int(row[x]) != UNKNOWN for x in bytes_of}
        assert len(known) == 1  # a class is written at once
        if c & need:
            assert known == {True}
        else:
            assert known == {unneeded.index(c) < filled_unneeded}, (c, b)
    _check_entries(dfa, s, need_all=False)
    # completing the row later gives the transitions of a whole-row fill
    dfa.fill_classes(s, None)
    _check_entries(dfa, s)
    other = LexerDfa(pats)
    s2 = other.start(allowed)
    other.fill_row(s2)
    for b in range(256):
        t1, t2 = int(dfa.table[s, b]), int(other.table[s2, b])
        assert (t1 == DEAD) == (t2 == DEAD)
        if t1 >= 0:
            assert dfa.live(t1) == other.live(t2)
            assert all(dfa.derivative_of(t1, t) is other.derivative_of(t2, t) for t in dfa.live(t1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=256, max_size=256))
def test_row_writer_stores_each_class_target(labels: list[int]) -> None:
    masks: dict[int, int] = {}
    for b, lab in enumerate(labels):
        masks[lab] = masks.get(lab, 0) | 1 << b
    classes = tuple(masks.values())
    targets = [10 * i + 3 for i in range(len(classes))]
    table = np.full((3, 256), UNKNOWN, dtype=np.int32)
    _writer(classes)(table, 1, targets)
    for i, c in enumerate(classes):
        for b in range(256):
            if c >> b & 1:
                assert table[1, b] == targets[i]
    assert (table[0] == UNKNOWN).all() and (table[2] == UNKNOWN).all()


@given(st.integers(0, (1 << 256) - 1))
def test_runs_cover_the_mask(mask: int) -> None:
    rs = _runs(mask)
    back = 0
    for lo, hi in rs:
        assert lo < hi
        back |= ((1 << (hi - lo)) - 1) << lo
    assert back == mask
    assert all(rs[i][1] < rs[i + 1][0] for i in range(len(rs) - 1))  # maximal, increasing


def _check_run_inside(nodes: list[object], texts: list[bytes], fills: int) -> int:
    """``run_inside`` against the per-byte run of a table filled row by row; returns how
    many texts stayed alive."""
    inside, ref = LexerDfa(nodes), LexerDfa(nodes)
    s0, r0 = inside.start(), ref.start()
    rng = random.Random(fills)
    alive = 0
    for text in texts:
        for _ in range(fills):  # part of the table known: run_inside follows it first
            inside.fill_row(rng.randrange(inside.n_states))
        made = inside.n_states
        got = inside.run_inside(s0, text)
        want = ref.run(r0, text)
        assert (got == DEAD) == (want == DEAD), text
        if got != DEAD:
            alive += 1
            assert inside.pairs(got) == ref.pairs(want)
            assert inside.n_states <= made + 1  # only the state it ends in
    return alive


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(patterns(anchors=False, flags=False), min_size=1, max_size=4), st.data(),
       st.integers(0, 7))
def test_run_inside_ends_where_the_table_does(pats: list[str], data: st.DataObject, fills: int) -> None:
    """``run_inside`` (filled entries, then derivatives, no state between made) reaches
    the state of the same pairs as the per-byte run, and DEAD exactly where that run meets
    a dead byte; texts over the patterns' own characters (so that some stay alive)."""
    alphabet = sorted(set("".join(pats).encode()) | set(b"a0 \xc3\xa9"))
    texts = data.draw(st.lists(st.lists(st.sampled_from(alphabet), max_size=6).map(bytes),
                               min_size=1, max_size=6))
    _check_run_inside([parse(p) for p in pats], texts, fills)


def test_run_inside_through_keys_and_an_extra_key() -> None:
    """Keys beside "any key but these" (an intersection with a complement: boolean nodes,
    pruned by emptiness) and UTF-8 text: the lexeme stays alive through each prefix."""
    from tether.regex import complement, intersect

    key = '"(?:[^"\\\\]|\\\\.)*"'
    names = ['"name"', '"nickname"', '"né"']
    nodes = [parse(n.replace('"', '\\"')) for n in names]
    nodes.append(intersect(parse(key), complement(parse("|".join(names)))))
    texts = [t.encode() for t in ['"n', '"na', '"name', '"name"', '"ni', '"né', '"n\\"x', '"zz', '"namex"', "x"]]
    for fills in (0, 3):
        assert _check_run_inside(nodes, texts, fills) == 9
