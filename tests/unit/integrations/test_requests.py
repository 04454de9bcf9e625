"""Per-request constraints of a serving batch (tether.integrations.requests, the part of
the vLLM processor that needs no vLLM): request specs are validated into tether errors,
and the batch bookkeeping (add, remove, one-way move, swap, live output lists) keeps each
row's state equal to replaying that request's tokens on a fresh matcher."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.engine import compile as compile_constraint
from tether.errors import (
    ConstraintError,
    GrammarError,
    LimitError,
    RegexError,
    SchemaError,
    TetherError,
)
from tether.integrations.requests import BatchConstraints, request_output
from tether.limits import Limits, limits
from tether.program.outputs import output_spec
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask

TOKENS = [b"", b"", b"a", b"b", b"ab", b"0", b"1", b"{", b"}", b'"', b":", b",", b"x", b"yes", b"no", b"n", b"o"]
VOCAB = Vocabulary.from_bytes(TOKENS, eos_ids=[1], bos_id=0)
SPECS = [{"regex": "a+b"}, {"choice": ["yes", "no", "nob"]}, {"json": {"type": "integer"}},
         {"grammar": 'root ::= "x" root | "0"'}, {"grammar": 'start: "a" | "b" start', "syntax": "lark"}]


def compile_output(output):
    return compile_constraint(output_spec(output).grammar, VOCAB)


@pytest.mark.parametrize(("spec", "error"), [
    ("json", ConstraintError), ({}, ConstraintError), ({"json": {}, "regex": "a"}, ConstraintError),
    ({"jsn": {}}, ConstraintError), ({"regex": "a", "other": 1}, ConstraintError),
    ({"json": 3}, ConstraintError), ({"json": "{not json"}, ConstraintError),
    ({"json": {"type": "nope"}}, SchemaError), ({"regex": 5}, ConstraintError),
    ({"regex": "a(b"}, RegexError), ({"choice": []}, ConstraintError), ({"choice": [1]}, ConstraintError),
    ({"choice": "ab"}, ConstraintError), ({"grammar": 'root ::= "a'}, GrammarError),
    ({"grammar": 'root ::= "a"', "syntax": "ebnf"}, ConstraintError),
    ({"regex": "a", "syntax": "lark"}, ConstraintError),
])
def test_bad_specs_are_tether_value_errors(spec, error) -> None:
    with pytest.raises(error) as info:
        request_output(spec)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TetherError)


def test_limits_apply_to_request_specs() -> None:
    with limits(Limits(max_alternatives=2)), pytest.raises(LimitError):
        request_output({"choice": ["a", "b", "c"]})
    with limits(Limits(max_text_chars=10)), pytest.raises(LimitError):
        request_output({"json": '{"type": "string", "maxLength": 3}'})


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                 st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.integers(), st.text(max_size=8),
                                                              st.lists(st.text(max_size=3), max_size=3)),
                                 max_size=3)))
def test_any_spec_is_accepted_or_refused_with_a_tether_value_error(spec) -> None:
    try:
        request_output(spec)
    except TetherError as e:
        assert isinstance(e, ValueError)


def test_good_specs() -> None:
    for spec in SPECS:
        request_output(spec)
    assert request_output({"json": '{"type": "integer"}'}) == {"type": "integer"}


def reference(spec, tokens: list[int]):
    """(allowed-token set) for a request with ``spec`` that produced ``tokens``."""
    m = compile_output(request_output(spec)).matcher()
    for t in tokens:
        if t in VOCAB.eos_ids and m.is_accepting():
            return set(VOCAB.eos_ids)
        if not m.consume(t):
            return set(VOCAB.eos_ids)
    mask = allocate_mask(VOCAB.size)
    m.compute_mask(mask)
    return {t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1}


ops = st.lists(st.tuples(st.sampled_from(["add", "add", "remove", "move", "swap", "step", "step", "step",
                                          "prefetch", "prefetch", "token"]),
                         st.integers(0, 2), st.integers(0, 2), st.integers(-1, len(SPECS) - 1),
                         st.integers(0, VOCAB.size - 1)), max_size=30)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_bookkeeping_matches_replaying_each_request(ops) -> None:
    """Also with masks prefetched on the background thread, then edits or new tokens
    before they are taken (they must be recomputed), or nothing (they are used)."""
    batch = BatchConstraints(VOCAB, compile_output)
    live: dict[int, tuple[dict | None, list[int]]] = {}  # row -> (spec, the engine's output list)
    for op, i, j, s, tok in ops:
        if op == "add":
            spec = SPECS[s] if s >= 0 else None
            out: list[int] = []
            live[i] = (spec, out)
            batch.add(i, spec, out)
        elif op == "remove" and i in live:
            del live[i]
            batch.remove(i)
        elif op in ("move", "swap") and i != j and i in live:
            a, b = live.pop(i), live.pop(j, None)
            live[j] = a
            if op == "swap" and b is not None:
                live[i] = b
            batch.move(i, j, op == "swap")
        elif op == "step":  # every live request gets one token: mostly an allowed one
            rows, masks = batch.masks()
            for r, (_spec, out) in live.items():
                if r in rows:
                    mask = masks[rows.index(r)]
                    allowed = [t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1]
                    out.append(allowed[tok % len(allowed)] if allowed and tok % 5 else tok)
                else:
                    out.append(tok)
        elif op == "token":  # tokens arrive without a masks() call (after a prefetch)
            for _spec, out in live.values():
                out.append(tok)
        elif op == "prefetch":
            batch.prefetch()
            continue  # the next op runs before the masks are taken
        rows, masks = batch.masks()
        assert rows == sorted(r for r, (spec, _) in live.items() if spec is not None)
        for k, r in enumerate(rows):
            spec, out = live[r]
            got = {t for t in range(VOCAB.size) if masks[k][t >> 5] >> (t & 31) & 1}
            assert got == reference(spec, out), (r, spec, out)


def test_a_one_way_move_drops_the_target_state() -> None:
    """vLLM moves the last row onto a finished one without removing it first; an
    unconstrained request moved there must not inherit the old constraint."""
    batch = BatchConstraints(VOCAB, compile_output)
    batch.add(0, SPECS[0], [2])
    batch.add(1, None, [])
    batch.move(1, 0, swap=False)
    assert batch.masks()[0] == []
    batch.add(0, SPECS[1], [])
    batch.add(1, SPECS[0], [2, 2])
    batch.move(1, 0, swap=True)
    rows, masks = batch.masks()
    assert rows == [0, 1]
    assert batch.rows[0].tokens == [2, 2] and batch.rows[1].tokens == []
    batch.add(0, None, [])  # a new unconstrained request at a constrained row: cleared
    assert batch.masks()[0] == [1]


def test_prefetched_masks_are_used_only_when_nothing_changed() -> None:
    batch = BatchConstraints(VOCAB, compile_output)
    out: list[int] = []
    batch.add(0, SPECS[0], out)
    batch.prefetch()
    rows, masks = batch.masks()
    assert (batch.prefetched, batch.stale) == (1, 0)
    assert rows == [0] and {t for t in range(VOCAB.size) if masks[0][t >> 5] >> (t & 31) & 1} == reference(SPECS[0], [])
    batch.prefetch()
    out.append(2)  # "a": sampled after the prefetch started
    rows, masks = batch.masks()
    assert (batch.prefetched, batch.stale) == (1, 1)
    assert {t for t in range(VOCAB.size) if masks[0][t >> 5] >> (t & 31) & 1} == reference(SPECS[0], [2])
    batch.prefetch()
    batch.add(1, SPECS[1], [])  # an edit after the prefetch: the masks are computed again
    rows, _ = batch.masks()
    assert rows == [0, 1] and (batch.prefetched, batch.stale) == (1, 2)
    batch.prefetch()
    batch.prefetch()  # a second prefetch replaces the first
    batch.masks()
    assert (batch.prefetched, batch.stale) == (2, 3)
