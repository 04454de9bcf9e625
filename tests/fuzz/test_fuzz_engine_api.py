"""Fuzzing the matcher API with hostile arguments.

Random sequences of ``compute_mask`` (buffers of random shapes, dtypes, orders, strides,
writability), ``consume`` (token ids of every type: negatives, huge, floats, bools,
numpy scalars, strings), ``consume_bytes``, ``rollback`` (random depths) and
``compute_masks`` (random batch buffers, mixed vocabularies). Each call either behaves
correctly (the mask equals a fresh matcher's after the same accepted tokens) or raises a
``TetherError`` (``consume`` returns False instead); never another exception, never a
crash of the process. Quick in CI; the ``slow`` variant runs many more sequences and
prints the outcomes by class.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from engine_reference import list_grammar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.engine import compile, compute_masks
from tether.errors import TetherError
from tether.tokens.vocabulary import Vocabulary

TOKS = [b"", b"", b"1", b"12", b"a", b"ab", b",", b"1,", b",a", b"a1", b"1a", b" ", b"2,3"] * 6
VOCAB = Vocabulary.from_bytes(TOKS, eos_ids=[0], special_ids=[1])
OTHER = Vocabulary.from_bytes(TOKS + [b"zz"], eos_ids=[0], special_ids=[1])
CC = compile(list_grammar(), VOCAB)
WORDS = CC.n_words

OUTCOMES: Counter[str] = Counter()

_DTYPES = [np.uint32, np.int32, np.uint64, np.int64, np.float32, np.uint8, np.bool_, ">u4"]


@st.composite
def buffers(draw: st.DrawFn, rows: int | None = None) -> object:
    """A mask buffer: mostly plausible (right length, uint32), often subtly wrong."""
    kind = draw(st.sampled_from(["good", "good", "shape", "dtype", "fortran", "strided",
                                 "readonly", "unaligned", "not-array", "2d"]))
    words = WORDS + (draw(st.sampled_from([-1, 1, -WORDS, 7])) if kind == "shape" else 0)
    shape: tuple[int, ...] = (max(words, 0),) if rows is None else (rows, max(words, 0))
    dtype = draw(st.sampled_from(_DTYPES)) if kind == "dtype" else np.uint32
    if kind == "not-array":
        return draw(st.sampled_from([None, [0] * WORDS, b"\0" * (4 * WORDS), 3, "mask"]))
    if kind == "2d":
        shape = (1, *shape) if rows is None else (*shape, 1)
    a = np.zeros(shape, dtype)
    if kind == "fortran":
        a = np.asfortranarray(np.zeros((*shape, 2), dtype))[..., 0]
    elif kind == "strided":
        a = np.zeros((*shape[:-1], shape[-1] * 2), dtype)[..., ::2]
    elif kind == "readonly":
        a.flags.writeable = False
    elif kind == "unaligned":
        raw = np.zeros(a.nbytes + 1, np.uint8)
        a = raw[1:].view(np.uint32).reshape(shape)
    return a


token_ids = (
    st.integers(-5, len(TOKS) + 5)
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([True, False, np.bool_(True), 2.0, 2.5, float("nan"), float("inf"),
                       "3", b"3", None, [3], 3 + 0j])
    | st.integers(0, len(TOKS) - 1).map(np.int64)
    | st.integers(0, 255).map(np.uint8)
    | st.sampled_from([10**5000, -(10**5000)])
)
depths = st.integers(-3, 8) | st.sampled_from([True, 1.0, "1", None, 2**80, 10**5000, np.int32(1)])

ops = st.one_of(
    st.tuples(st.just("mask"), buffers()),
    st.tuples(st.just("consume"), token_ids),
    st.tuples(st.just("bytes"), st.binary(max_size=4) | st.sampled_from(["12", [49], None])),
    st.tuples(st.just("rollback"), depths),
    st.tuples(st.just("batch"), st.integers(0, 3), st.booleans(), buffers(rows=3)),
)


def _reference_mask(accepted: list[object]) -> np.ndarray:
    m = CC.matcher()
    for step in accepted:
        ok = m.consume_bytes(step) if isinstance(step, bytes) else m.consume(step)  # type: ignore[arg-type]
        assert ok, m.error
    out = np.zeros(WORDS, np.uint32)
    m.compute_mask(out)
    return out


def _good(buf: object, shape: tuple[int, ...]) -> bool:
    return (isinstance(buf, np.ndarray) and buf.shape == shape and buf.dtype == np.uint32
            and buf.flags.carray)


def run_sequence(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    m = CC.matcher()
    accepted: list[object] = []  # what the matcher consumed, as replayable steps
    for op in steps:
        name = op[0]
        if name == "mask":
            buf = op[1]
            try:
                m.compute_mask(buf)  # type: ignore[arg-type]
            except TetherError as e:
                assert isinstance(e, ValueError)
                assert not _good(buf, (WORDS,)), "a good buffer was refused"
                OUTCOMES[f"mask refused: {type(e).__name__}"] += 1
                continue
            assert _good(buf, (WORDS,)), "a bad buffer was accepted"
            assert np.array_equal(buf, _reference_mask(accepted))
            OUTCOMES["mask ok"] += 1
        elif name == "consume":
            before = m.n_tokens
            ok = m.consume(op[1])
            assert isinstance(ok, bool)
            if ok:
                accepted.append(int(op[1]))
                OUTCOMES["consume ok"] += 1
            else:
                assert m.n_tokens == before and m.error
                OUTCOMES["consume refused"] += 1
        elif name == "bytes":
            ok = m.consume_bytes(op[1])  # type: ignore[arg-type]
            if ok:
                accepted.append(bytes(op[1]))
                OUTCOMES["bytes ok"] += 1
            else:
                OUTCOMES["bytes refused"] += 1
        elif name == "rollback":
            depth = op[1]
            try:
                m.rollback(depth)  # type: ignore[arg-type]
            except TetherError as e:
                assert isinstance(e, ValueError)
                OUTCOMES["rollback refused"] += 1
                continue
            n = int(depth)  # type: ignore[call-overload]
            assert not isinstance(depth, bool) and 0 <= n
            del accepted[len(accepted) - n :]
            OUTCOMES["rollback ok"] += 1
        else:
            _, n, mixed, buf = op
            ms = [m.copy() for _ in range(n)]
            if mixed and n:
                ms.append(compile(list_grammar(), OTHER).matcher())
            try:
                compute_masks(ms, buf)  # type: ignore[arg-type]
            except TetherError as e:
                assert isinstance(e, ValueError)
                OUTCOMES[f"batch refused: {type(e).__name__}"] += 1
                continue
            assert not (mixed and n), "matchers of two vocabularies were accepted"
            if n:
                assert _good(buf, (3, WORDS))
                ref = _reference_mask(accepted)
                for i in range(n):
                    assert np.array_equal(buf[i], ref)  # type: ignore[index]
            OUTCOMES["batch ok"] += 1
        assert m.n_tokens == len(accepted)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(ops, max_size=12))
def test_matcher_api_under_hostile_arguments(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    run_sequence(steps)


@pytest.mark.slow
def test_matcher_api_under_hostile_arguments_long() -> None:
    OUTCOMES.clear()
    runs = 0

    @settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.lists(ops, max_size=25))
    def run(steps: list[tuple]) -> None:  # type: ignore[type-arg]
        nonlocal runs
        runs += 1
        run_sequence(steps)

    run()
    print(f"\nengine API fuzz: {runs} sequences, {sum(OUTCOMES.values())} calls, outcomes {dict(OUTCOMES)}")
