"""Engine API arguments from Python are checked before any numba kernel sees them.

Each hostile argument named in the fail-closed issue has its own test: a mask buffer of
the wrong rank, order, layout, dtype, length or writability; token ids that are not
integers, are bools or out of range; rollback depths; batched masks of mixed
vocabularies or past ``Limits.max_batch``. Every refusal is a tether error (a
``ValueError`` subclass) or, for decode-time ``consume``, ``False`` with ``.error``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_reference import list_grammar  # noqa: E402

from tether.engine import compile, compute_masks  # noqa: E402
from tether.errors import ConstraintError, LimitError, TetherError, VocabularyError  # noqa: E402
from tether.limits import limits  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402

TOKS = [b"", b"", b"1", b"12", b"a", b"ab", b",", b"1,", b",a", b"a1", b"1a", b" ", b"2,3"] * 7


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_bytes(TOKS, eos_ids=[0], special_ids=[1])


@pytest.fixture
def matcher(vocab):  # type: ignore[no-untyped-def]
    return compile(list_grammar(), vocab).matcher()


def _reference(m) -> set[int]:  # type: ignore[no-untyped-def]
    out = allocate_mask(m.cc.vocabulary.size)
    m.compute_mask(out)
    return set(mask_to_ids(out).tolist())


# --- compute_mask buffers -----------------------------------------------------------------


def test_compute_mask_refuses_a_2d_buffer(matcher) -> None:
    out = np.zeros((1, matcher.cc.n_words), np.uint32)
    with pytest.raises(ConstraintError, match=r"shape \(3,\).*got C-contiguous uint32 of shape \(1, 3\)"):
        matcher.compute_mask(out)
    assert not out.any()


def test_compute_mask_refuses_a_non_contiguous_buffer(matcher) -> None:
    out = np.zeros(matcher.cc.n_words * 2, np.uint32)[::2]
    with pytest.raises(ConstraintError, match="non-contiguous"):
        matcher.compute_mask(out)


def test_compute_mask_refuses_a_fortran_ordered_2d_buffer(matcher) -> None:
    out = np.asfortranarray(np.zeros((2, matcher.cc.n_words), np.uint32))
    with pytest.raises(ConstraintError):
        matcher.compute_mask(out)
    with pytest.raises(ConstraintError, match="non-contiguous"):
        matcher.compute_mask(out[0])  # a row of a Fortran array is strided


def test_compute_mask_accepts_a_contiguous_column_of_a_fortran_array(matcher) -> None:
    col = np.asfortranarray(np.zeros((matcher.cc.n_words, 2), np.uint32))[:, 0]
    assert col.flags.c_contiguous
    matcher.compute_mask(col)
    assert set(mask_to_ids(col).tolist()) == _reference(matcher)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64, np.float32, np.uint8, np.bool_])
def test_compute_mask_refuses_a_wrong_dtype(matcher, dtype) -> None:
    with pytest.raises(ConstraintError, match="uint32"):
        matcher.compute_mask(np.zeros(matcher.cc.n_words, dtype))


def test_compute_mask_refuses_a_big_endian_uint32(matcher) -> None:
    with pytest.raises(ConstraintError):
        matcher.compute_mask(np.zeros(matcher.cc.n_words, ">u4"))


@pytest.mark.parametrize("delta", [-1, 1, -3])
def test_compute_mask_refuses_a_too_short_or_too_long_buffer(matcher, delta) -> None:
    n = matcher.cc.n_words + delta
    if n < 0:
        n = 0
    with pytest.raises(ConstraintError, match=r"shape \(3,\)"):
        matcher.compute_mask(np.zeros(n, np.uint32))


def test_compute_mask_refuses_a_read_only_buffer(matcher) -> None:
    out = np.zeros(matcher.cc.n_words, np.uint32)
    out.flags.writeable = False
    with pytest.raises(ConstraintError, match="read-only"):
        matcher.compute_mask(out)


def test_compute_mask_refuses_an_unaligned_buffer(matcher) -> None:
    raw = np.zeros(matcher.cc.n_words * 4 + 1, np.uint8)
    out = raw[1:].view(np.uint32)
    assert not out.flags.aligned
    with pytest.raises(ConstraintError, match="unaligned"):
        matcher.compute_mask(out)


@pytest.mark.parametrize("value", [None, [0, 0, 0], b"\x00" * 12, 3, "mask"])
def test_compute_mask_refuses_what_is_not_an_array(matcher, value) -> None:
    with pytest.raises(ConstraintError):
        matcher.compute_mask(value)


def test_compute_mask_after_a_refusal_still_works(matcher) -> None:
    with pytest.raises(ConstraintError):
        matcher.compute_mask(np.zeros((1, matcher.cc.n_words), np.uint32))
    assert matcher.consume(3)
    assert 6 in _reference(matcher)


# --- token ids ------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [True, False, np.bool_(True)])
def test_consume_refuses_bools(matcher, token) -> None:
    assert not matcher.consume(token)
    assert "integer id" in matcher.error and matcher.n_tokens == 0


@pytest.mark.parametrize("token", [2.0, 2.7, float("nan"), float("inf"), "2", b"2", None, [2], 2 + 0j])
def test_consume_refuses_non_integers(matcher, token) -> None:
    assert not matcher.consume(token)
    assert "integer id" in matcher.error and matcher.n_tokens == 0


@pytest.mark.parametrize("token", [-1, -(2**70), len(TOKS), 2**31, 2**64, 10**100,
                                   pytest.param(10**5000, id="10**5000"),
                                   pytest.param(-(10**5000), id="-10**5000")])
def test_consume_refuses_out_of_range_ids(matcher, token) -> None:
    assert not matcher.consume(token)
    assert matcher.n_tokens == 0 and matcher.error


@pytest.mark.parametrize("kind", [np.int8, np.int32, np.int64, np.uint16, np.uint64])
def test_consume_accepts_numpy_integers(matcher, kind) -> None:
    assert matcher.consume(kind(3)), matcher.error
    assert matcher.n_tokens == 1


def test_consume_bytes_refuses_non_bytes(matcher) -> None:
    for data in ("12", [49], 49, None):
        assert not matcher.consume_bytes(data)
        assert "bytes" in matcher.error
    assert matcher.consume_bytes(bytearray(b"12")) and matcher.consume_bytes(memoryview(b","))


def test_rollback_more_than_consumed_is_a_tether_error(matcher) -> None:
    assert matcher.consume(3)
    with pytest.raises(ConstraintError, match="cannot roll back 2 tokens: 1 consumed"):
        matcher.rollback(2)
    assert matcher.n_tokens == 1


@pytest.mark.parametrize("depth", [-1, True, 1.0, "1", None, 2**80,
                                   pytest.param(10**5000, id="10**5000")])
def test_rollback_refuses_bad_depths(matcher, depth) -> None:
    assert matcher.consume(3)
    with pytest.raises(ConstraintError):
        matcher.rollback(depth)
    assert matcher.n_tokens == 1


def test_rollback_accepts_a_numpy_integer(matcher) -> None:
    assert matcher.consume(3) and matcher.consume(6)
    matcher.rollback(np.int64(2))
    assert matcher.n_tokens == 0


# --- compute_masks --------------------------------------------------------------------------


def test_compute_masks_batch_over_max_batch_is_a_limit_error(vocab) -> None:
    cc = compile(list_grammar(), vocab)
    ms = [cc.matcher() for _ in range(5)]
    out = np.zeros((5, cc.n_words), np.uint32)
    with limits(max_batch=4), pytest.raises(LimitError, match="max_batch"):
        compute_masks(ms, out)
    with limits(max_batch=5):
        compute_masks(ms, out)
    assert all(set(mask_to_ids(out[i]).tolist()) == _reference(ms[i]) for i in range(5))


@pytest.mark.parametrize(
    "make",
    [
        lambda n, w: np.zeros((n, w), np.int32),
        lambda n, w: np.zeros((n - 1, w), np.uint32),
        lambda n, w: np.zeros((n, w + 1), np.uint32),
        lambda n, w: np.zeros(n * w, np.uint32),
        lambda n, w: np.zeros((n, w, 1), np.uint32),
        lambda n, w: np.asfortranarray(np.zeros((n, w), np.uint32)),
        lambda n, w: np.zeros((n, 2 * w), np.uint32)[:, ::2],
        lambda n, w: [[0] * w] * n,
    ],
    ids=["dtype", "rows", "words", "1d", "3d", "fortran", "strided", "list"],
)
def test_compute_masks_refuses_bad_out2d(vocab, make) -> None:
    cc = compile(list_grammar(), vocab)
    ms = [cc.matcher(), cc.matcher()]
    with pytest.raises(ConstraintError, match="out2d"):
        compute_masks(ms, make(2, cc.n_words))


def test_compute_masks_refuses_matchers_of_different_vocabularies(vocab) -> None:
    other = Vocabulary.from_bytes(TOKS + [b"x"], eos_ids=[0], special_ids=[1])
    a = compile(list_grammar(), vocab).matcher()
    b = compile(list_grammar(), other).matcher()
    out = np.zeros((2, a.cc.n_words), np.uint32)
    with pytest.raises(ConstraintError, match="another vocabulary"):
        compute_masks([a, b], out)


@pytest.mark.parametrize("matchers", [None, 3, "ab", [None], [1, 2]])
def test_compute_masks_refuses_non_matchers(vocab, matchers) -> None:
    cc = compile(list_grammar(), vocab)
    with pytest.raises(ConstraintError):
        compute_masks(matchers, np.zeros((2, cc.n_words), np.uint32))


def test_compute_masks_of_no_matchers_writes_nothing(vocab) -> None:
    out = np.full((1, 3), 7, np.uint32)
    compute_masks([], out)
    assert (out == 7).all()


def test_every_refusal_is_a_value_error_and_a_tether_error(matcher) -> None:
    for bad in (np.zeros(2, np.uint32), np.zeros((1, 3), np.uint32)):
        with pytest.raises(ValueError) as e:
            matcher.compute_mask(bad)
        assert isinstance(e.value, TetherError)


# --- vocabulary arguments (tether.tokens) ------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: Vocabulary.from_bytes([b"a", 5]),
        lambda: Vocabulary.from_bytes([b"a", "b"]),
        lambda: Vocabulary.from_bytes(b"ab"),
        lambda: Vocabulary.from_bytes([b"a", b"b"], eos_ids=[True]),
        lambda: Vocabulary.from_bytes([b"a", b"b"], eos_ids=[1.5]),
        lambda: Vocabulary.from_bytes([b"a", b"b"], special_ids=["0"]),
        lambda: Vocabulary.from_bytes([b"a", b"b"], eos_ids=[-1]),
        lambda: Vocabulary.from_bytes([b"a", b"b"], n_logits=2.5),
    ],
    ids=["int-token", "str-token", "bytes-not-list", "bool-eos", "float-eos", "str-special",
         "negative-eos", "float-n-logits"],
)
def test_vocabulary_refuses_bad_arguments(make) -> None:
    with pytest.raises(VocabularyError):
        make()


def test_vocabulary_token_bytes_and_decode_check_ids(vocab) -> None:
    assert vocab.token_bytes(np.int64(3)) == b"12" and vocab.decode([2, np.int32(3)]) == b"112"
    for bad in (-1, len(TOKS), True, 2.0, "2", 10**30):
        with pytest.raises(VocabularyError):
            vocab.token_bytes(bad)
        with pytest.raises(VocabularyError):
            vocab.decode([2, bad])


@pytest.mark.parametrize("how", ["consume", "consume_bytes"])
def test_a_limit_reached_inside_a_token_keeps_nothing_of_it(vocab, how, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a limit may be reached at any byte of a token (a new DFA row, an Earley push): the
    # matcher reports it and stays where it was, as for a refused token
    m = compile(list_grammar(), vocab).matcher()
    token = next(t for t in range(vocab.size) if len(vocab.tokens[t]) >= 2 and m.copy().consume(t))
    data = vocab.tokens[token]
    before = (m._save(), m.n_tokens, m.allowed_bytes())
    real = type(m)._step
    calls = []

    def failing_step(self, b):  # type: ignore[no-untyped-def]
        calls.append(b)
        if len(calls) == 2:
            raise LimitError("max_earley_items", 2, 1, "test")
        return real(self, b)

    monkeypatch.setattr(type(m), "_step", failing_step)
    m._info = [0] * vocab.size  # every token takes the per-byte path (no fast-path move)
    ok = m.consume(token) if how == "consume" else m.consume_bytes(data)
    assert not ok and "max_earley_items" in (m.error or "")
    assert len(calls) == 2  # the first byte was stepped, then the limit
    monkeypatch.undo()
    assert (m._save(), m.n_tokens, m.allowed_bytes()) == before
    assert m.consume(token)
