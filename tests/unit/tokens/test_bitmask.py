"""Bitmask helpers: layout, round trips, messages, apply to numpy and torch logits."""

from __future__ import annotations

import numpy as np
import pytest

from tether.tokens import (
    allocate_mask,
    apply_mask,
    check_mask,
    count_bits,
    ids_to_mask,
    mask_to_ids,
    set_bit,
    test_bit,
)
from tether.tokens.bitmask import clear_bit


def test_layout_and_round_trip() -> None:
    m = allocate_mask(70)
    assert m.shape == (3,) and m.dtype == np.uint32 and not m.any()
    for t in (0, 31, 32, 69):
        set_bit(m, t)
    assert m[0] == 0x80000001 and m[1] == 1 and m[2] == 1 << 5
    assert test_bit(m, 31) and not test_bit(m, 30)
    assert count_bits(m) == 4
    assert mask_to_ids(m).tolist() == [0, 31, 32, 69]
    assert np.array_equal(ids_to_mask([0, 31, 32, 69], 70), m)
    clear_bit(m, 31)
    assert mask_to_ids(m).tolist() == [0, 32, 69]


def test_ids_to_mask_range() -> None:
    with pytest.raises(IndexError, match=r"token ids must lie in \[0, 10\)"):
        ids_to_mask([3, 10], 10)


@pytest.mark.parametrize(
    "bad, got",
    [
        (np.zeros(8192, np.int32), "C-contiguous int32 of shape (8192,)"),
        (np.zeros(8191, np.uint32), "C-contiguous uint32 of shape (8191,)"),
        (np.zeros(16384, np.uint32)[::2], "non-contiguous uint32 of shape (8192,)"),
        ([0] * 8192, "list"),
    ],
)
def test_check_mask_message(bad, got) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError) as exc:
        check_mask(bad, 262_144)
    assert str(exc.value) == (
        f"mask must be a C-contiguous uint32 array of shape (8192,) for 262,144 tokens; got {got}"
    )


def test_apply_numpy_with_padding_rows() -> None:
    logits = np.arange(40, dtype=np.float32)  # 33 tokens + 7 padding rows
    mask = ids_to_mask([1, 32], 33)
    out = apply_mask(logits, mask)
    assert out is logits
    assert np.isfinite(logits).sum() == 2 and logits[1] == 1 and logits[32] == 32
    assert np.isneginf(logits[33:]).all()


def test_apply_numpy_batch() -> None:
    logits = np.zeros((2, 5), np.float32)
    mask = np.stack([ids_to_mask([0], 5), ids_to_mask([3, 4], 5)])
    apply_mask(logits, mask)
    assert np.isfinite(logits).tolist() == [[1, 0, 0, 0, 0], [0, 0, 0, 1, 1]]


def test_apply_torch() -> None:
    torch = pytest.importorskip("torch")
    logits = torch.zeros(2, 40)
    mask = np.stack([ids_to_mask([0, 31, 32], 33), ids_to_mask([5], 33)])
    apply_mask(logits, mask)
    finite = torch.isfinite(logits)
    assert finite[0].nonzero().flatten().tolist() == [0, 31, 32]
    assert finite[1].nonzero().flatten().tolist() == [5]
