"""Token bitmasks: ``uint32[ceil(V/32)]``, bit ``t & 31`` of word ``t >> 5`` = token t allowed.

1. ``allocate_mask`` / ``check_mask`` make and validate masks (one message shape:
   expected vs got; a ``ConstraintError``, which is a ``ValueError``).
2. ``set_bit`` / ``test_bit`` / ``count_bits`` / ``mask_to_ids`` / ``ids_to_mask`` read
   and write them.
3. ``apply_mask`` writes ``-inf`` into the disallowed rows of numpy or torch logits, in
   place; rows past the mask's bits (logits padding) are always disallowed.

Same layout as llguidance and xgrammar bitmasks (little-endian words).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.errors import ConstraintError


def mask_words(n_tokens: int) -> int:
    """Number of uint32 words for ``n_tokens`` bits."""
    return (n_tokens + 31) >> 5


def allocate_mask(n_tokens: int, *, batch: int | None = None) -> NDArray[np.uint32]:
    """A zeroed mask for ``n_tokens`` tokens (shape ``(batch, words)`` if ``batch``)."""
    shape: tuple[int, ...] = (mask_words(n_tokens),) if batch is None else (batch, mask_words(n_tokens))
    return np.zeros(shape, np.uint32)


def check_mask(mask: Any, n_tokens: int, *, ndim: int | None = None) -> None:
    """Raise ConstraintError (a ValueError) unless ``mask`` is a writeable, C-contiguous
    uint32 numpy array of the right width.

    The last axis must hold ``ceil(n_tokens/32)`` words; leading (batch) axes are allowed
    unless ``ndim`` fixes the number of axes (the kernels take ``ndim=1``).
    """
    words = mask_words(n_tokens)
    ok = (
        isinstance(mask, np.ndarray)
        and mask.dtype == np.uint32
        and mask.ndim >= 1
        and (ndim is None or mask.ndim == ndim)
        and mask.shape[-1] == words
        and mask.flags.c_contiguous
        and mask.flags.writeable
        and mask.flags.aligned
    )
    if not ok:
        if isinstance(mask, np.ndarray):
            layout = "C-contiguous" if mask.flags.c_contiguous else "non-contiguous"
            if not mask.flags.writeable:
                layout = "read-only " + layout
            if not mask.flags.aligned:
                layout = "unaligned " + layout
            got = f"{layout} {mask.dtype} of shape {mask.shape}"
        else:
            got = type(mask).__name__
        shape = f"({words},)" if ndim in (None, 1) else f"({', '.join(['n'] * (ndim - 1))}, {words})"
        raise ConstraintError(
            f"mask must be a C-contiguous uint32 array of shape {shape} for "
            f"{n_tokens:,} tokens; got {got}"
        )


def set_bit(mask: NDArray[np.uint32], token: int) -> None:
    """Allow ``token``."""
    mask[token >> 5] |= np.uint32(1 << (token & 31))


def clear_bit(mask: NDArray[np.uint32], token: int) -> None:
    """Forbid ``token``."""
    mask[token >> 5] &= np.uint32(~(1 << (token & 31)) & 0xFFFFFFFF)


def test_bit(mask: NDArray[np.uint32], token: int) -> bool:
    """Whether ``token`` is allowed."""
    return bool((int(mask[token >> 5]) >> (token & 31)) & 1)


test_bit.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def count_bits(mask: NDArray[np.uint32]) -> int:
    """Number of allowed tokens."""
    return int(np.unpackbits(np.ascontiguousarray(mask).view(np.uint8)).sum())


def mask_to_bool(mask: NDArray[np.uint32], n: int | None = None) -> NDArray[np.bool_]:
    """Boolean array ``allowed[t]`` for the first ``n`` tokens (all mask bits if None)."""
    bits = np.unpackbits(np.ascontiguousarray(mask).view(np.uint8), bitorder="little")
    return bits[: n if n is not None else len(bits)].astype(bool)


def mask_to_ids(mask: NDArray[np.uint32]) -> NDArray[np.int64]:
    """Sorted ids of the allowed tokens."""
    return np.flatnonzero(mask_to_bool(mask))


def ids_to_mask(ids: Iterable[int], n_tokens: int) -> NDArray[np.uint32]:
    """A new mask allowing exactly ``ids``. Raises IndexError for ids outside ``n_tokens``."""
    arr = np.fromiter(ids, np.int64)
    if len(arr) and (arr.min() < 0 or arr.max() >= n_tokens):
        raise IndexError(f"token ids must lie in [0, {n_tokens}); got {arr.min()}..{arr.max()}")
    bits = np.zeros(mask_words(n_tokens) * 32, np.uint8)
    bits[arr] = 1
    return np.packbits(bits, bitorder="little").view(np.uint32).copy()


def apply_mask(logits: Any, mask: Any) -> Any:
    """Set disallowed rows of ``logits`` to ``-inf`` in place and return ``logits``.

    ``logits`` is a numpy array or torch tensor of shape ``(..., n_logits)``; ``mask`` is
    ``uint32[..., words]`` (numpy, or a torch int32/uint32 tensor) with matching leading
    axes. Rows ``>= 32 * words`` (padding of the logits) are always set to ``-inf``.
    """
    if isinstance(logits, np.ndarray):
        mask_np = np.ascontiguousarray(mask, dtype=np.uint32)
        n = logits.shape[-1]
        bits = np.unpackbits(mask_np.view(np.uint8), axis=-1, bitorder="little")
        allowed = np.zeros(logits.shape, bool)
        width = min(n, bits.shape[-1])
        allowed[..., :width] = bits[..., :width].astype(bool)
        logits[~allowed] = -np.inf
        return logits
    return _apply_mask_torch(logits, mask)


def _apply_mask_torch(logits: Any, mask: Any) -> Any:
    import torch

    if isinstance(mask, np.ndarray):
        mask = torch.from_numpy(np.ascontiguousarray(mask, dtype=np.uint32).view(np.int32))
    mask = mask.to(device=logits.device)
    if mask.dtype != torch.int32:
        mask = mask.view(torch.int32) if mask.element_size() == 4 else mask.to(torch.int32)
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = ((mask.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
    n = logits.shape[-1]
    if bits.shape[-1] >= n:
        allowed = bits[..., :n]
    else:
        pad = torch.zeros((*bits.shape[:-1], n - bits.shape[-1]), dtype=torch.bool, device=logits.device)
        allowed = torch.cat([bits, pad], dim=-1)
    logits.masked_fill_(~allowed, float("-inf"))
    return logits
