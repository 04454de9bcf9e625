"""tether.integrations.vllm's model-runner-v2 bookkeeping (`SlotConstraints`, no vLLM
needed): request slots recycled, logits rows reordered every step, several tokens
committed at once, draft rows of speculative decoding — every row's mask equals a matcher
run alone on its request's committed tokens and the drafts before the row."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.engine import compile as compile_constraint
from tether.integrations.requests import request_output
from tether.integrations.vllm import SlotConstraints
from tether.program.outputs import output_spec
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask

TOKENS = [b"", b"", b"a", b"b", b"ab", b"0", b"1", b"{", b"}", b'"', b":", b",", b"x", b"yes", b"no", b"n", b"o"]
VOCAB = Vocabulary.from_bytes(TOKENS, eos_ids=[1], bos_id=0)
SPECS = [{"regex": "a+b"}, {"choice": ["yes", "no", "nob"]}, {"json": {"type": "integer"}},
         {"grammar": 'root ::= "x" root | "0"'}, {"grammar": 'start: "a" | "b" start', "syntax": "lark"}]


def compile_output(output):
    return compile_constraint(output_spec(output).grammar, VOCAB)


def reference(spec, tokens: list[int]) -> set[int]:
    m = compile_output(request_output(spec)).matcher()
    for t in tokens:
        if (t in VOCAB.eos_ids and m.is_accepting()) or not m.consume(t):
            return set(VOCAB.eos_ids)
    mask = allocate_mask(VOCAB.size)
    m.compute_mask(mask)
    return {t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1}


def reference_row(spec, committed: list[int], drafts: list[int]) -> set[int]:
    """A draft row: the drafts before it consumed; EOS only once one of them ends or is refused."""
    m = compile_output(request_output(spec)).matcher()
    for t in committed:
        if (t in VOCAB.eos_ids and m.is_accepting()) or not m.consume(t):
            return set(VOCAB.eos_ids)
    for t in drafts:
        if t in VOCAB.eos_ids or not m.consume(t):
            return set(VOCAB.eos_ids)
    mask = allocate_mask(VOCAB.size)
    m.compute_mask(mask)
    return {t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1}


def bits(mask) -> set[int]:
    return {t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1}


class Engine:
    """The model runner's side: slots, committed outputs, one step's rows."""

    def __init__(self) -> None:
        self.slots = SlotConstraints(VOCAB, compile_output)
        self.live: dict[int, tuple[dict | None, list[int]]] = {}
        self.reads = 0

    def read(self, slot: int, start: int, stop: int) -> list[int]:
        self.reads += 1
        return self.live[slot][1][start:stop]

    def step(self, order: list[int], drafts: dict[int, list[int]]):
        rows = []  # (slot, local pos, fed token, fed index, n_output)
        for s in order:
            out = self.live[s][1]
            rows.append((s, 0, out[-1] if out else 7, len(out) - 1, len(out)))
            for k, d in enumerate(drafts.get(s, []), start=1):
                rows.append((s, k, d, len(out) - 1 + k, len(out)))
        a = np.array(rows, dtype=np.int64).reshape(-1, 5).T
        got_rows, masks = self.slots.step(a[0], a[1], a[2], a[3], a[4], self.read)
        return rows, got_rows, masks


ops = st.lists(st.tuples(st.sampled_from(["add", "add", "step", "step", "step", "commit2"]),
                         st.integers(0, 3), st.integers(-1, len(SPECS) - 1), st.integers(0, 10 ** 6),
                         st.permutations(range(4)), st.lists(st.integers(0, VOCAB.size - 1), max_size=3)),
               max_size=25)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_each_row_gets_the_mask_of_its_request_alone(ops) -> None:
    eng = Engine()
    for op, slot, s, pick, perm, draft in ops:
        if op == "add":  # a slot recycled: the new request starts fresh
            spec = SPECS[s] if s >= 0 else None
            eng.live[slot] = (spec, [])
            assert eng.slots.add(slot, spec) == (spec is not None)
            continue
        for spec, out in eng.live.values():  # commit 1 (or 2) tokens, mostly allowed ones
            for _ in range(2 if op == "commit2" else 1):
                ok = sorted(reference(spec, out)) if spec else [pick % VOCAB.size]
                out.append(ok[pick % len(ok)] if pick % 5 else pick % VOCAB.size)
        order = [p for p in perm if p in eng.live]
        drafts = {sl: draft for sl in order[:1]}  # the first request speculates
        rows, got_rows, masks = eng.step(order, drafts)
        want = [i for i, r in enumerate(rows) if eng.live[r[0]][0] is not None]
        assert got_rows == want
        for i, mask in zip(got_rows, masks, strict=True):
            sl, k = rows[i][0], rows[i][1]
            spec, out = eng.live[sl]
            assert bits(mask) == reference_row(spec, out, drafts.get(sl, [])[:k]), (spec, out, k)
        assert eng.slots.any_in(np.array(order)) == bool(want)


def test_one_new_token_is_read_from_the_row_not_the_device() -> None:
    eng = Engine()
    eng.live[0] = (SPECS[0], [])
    eng.slots.add(0, SPECS[0])
    for t in (2, 2, 2):
        eng.live[0][1].append(t)
        eng.step([0], {})
    assert eng.reads == 0
    eng.live[0][1].extend([2, 2])  # two committed at once (accepted drafts): one read
    rows, got, masks = eng.step([0], {})
    assert eng.reads == 1 and bits(masks[0]) == reference(SPECS[0], eng.live[0][1])


def test_a_constraint_that_fails_to_compile_allows_eos_only() -> None:
    slots = SlotConstraints(VOCAB, compile_output)
    assert slots.add(3, {"regex": "a(b"})
    rows, masks = slots.step(np.array([3]), np.array([0]), np.array([7]), np.array([-1]),
                             np.array([0]), lambda *a: pytest.fail("no read expected"))
    assert rows == [0] and bits(masks[0]) == {1}
    assert "constraint refused" in (slots.slots[3].error or "")


def test_a_shorter_history_than_consumed_is_replayed() -> None:
    eng = Engine()
    eng.live[1] = (SPECS[3], [12, 12, 12])
    eng.slots.add(1, SPECS[3])
    eng.step([1], {})
    eng.live[1][1][:] = [12]  # the runner rewrote the slot's history without add_request
    rows, got, masks = eng.step([1], {})
    assert bits(masks[0]) == reference(SPECS[3], [12])


def test_the_constraint_may_travel_as_json_text() -> None:
    """Over HTTP vLLM's vllm_xargs carries only strings, numbers and lists."""
    from types import SimpleNamespace

    from tether.errors import ConstraintError, LimitError
    from tether.integrations.vllm import _spec
    from tether.limits import Limits, limits

    assert _spec(SimpleNamespace(extra_args={"tether": '{"regex": "a+b"}'})) == {"regex": "a+b"}
    assert _spec(SimpleNamespace(extra_args={"tether": {"regex": "a+b"}})) == {"regex": "a+b"}
    assert _spec(SimpleNamespace(extra_args=None)) is None
    with pytest.raises(ConstraintError):
        _spec(SimpleNamespace(extra_args={"tether": '{"regex": '}))
    with limits(Limits(max_text_chars=5)), pytest.raises(LimitError):
        _spec(SimpleNamespace(extra_args={"tether": '{"regex": "a+b"}'}))
