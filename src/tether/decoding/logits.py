"""Fetching next-token scores from a model for the allowed tokens only.

``scores(model, tokens, ids)`` returns the logits of the tokens ``ids`` (ascending) after
``tokens``. A backend with *selective logits* (``logits_rows(tokens, ids)`` and a
``selective_threshold``) computes only those rows of the unembedding when ``ids`` is
short enough (seed 001); otherwise the full logits are computed and gathered. Both
paths give the same numbers up to float rounding of the same dot products.
``ids=None`` means free text: full logits with special (non-EOS) tokens at -inf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

_BLOCKED_CACHE: dict[str, NDArray[np.int64]] = {}


def blocked_ids(vocab: Any) -> NDArray[np.int64]:
    """Special non-EOS token ids and empty (control) tokens: never allowed in free text."""
    key = vocab.fingerprint
    hit = _BLOCKED_CACHE.get(key)
    if hit is None:
        eos = set(vocab.eos_ids)
        special = set(getattr(vocab, "special_ids", ())) | {
            i for i, t in enumerate(vocab.tokens) if not t
        }
        hit = np.asarray(sorted(special - eos), dtype=np.int64)
        _BLOCKED_CACHE[key] = hit
    return hit


def full_free_logits(model: Any, raw: NDArray[np.float32]) -> NDArray[np.float32]:
    """Copy of ``raw`` restricted to the vocabulary, special tokens and padding at -inf."""
    vocab = model.vocabulary
    out = np.array(raw[: vocab.size], dtype=np.float32, copy=True)
    out[blocked_ids(vocab)] = -np.inf
    return out


def uses_selective(model: Any, ids: NDArray[np.int64] | None, selective: bool) -> bool:
    return (
        selective
        and ids is not None
        and hasattr(model, "logits_rows")
        and len(ids) <= int(getattr(model, "selective_threshold", 0))
    )


def scores(
    model: Any, tokens: Sequence[int], ids: NDArray[np.int64] | None, *, selective: bool = True
) -> NDArray[np.float32]:
    """Logits of ``ids`` after ``tokens`` (or masked full logits when ``ids`` is None)."""
    if uses_selective(model, ids, selective):
        return np.asarray(model.logits_rows(tokens, ids), dtype=np.float32)
    raw = model.logits(tokens)
    if ids is None:
        return full_free_logits(model, raw)
    return np.array(raw[ids], dtype=np.float32)


def batch_scores(
    model: Any,
    seqs: Sequence[Sequence[int]],
    ids_list: Sequence[NDArray[np.int64] | None],
    *,
    selective: bool = True,
) -> list[NDArray[np.float32]]:
    """`scores` for several sequences; one batched forward pass when the model has
    ``logits_batch`` and no sequence takes the selective path."""
    if len(seqs) > 1 and hasattr(model, "logits_batch") and not any(
        uses_selective(model, ids, selective) for ids in ids_list
    ):
        raw2d = model.logits_batch(seqs)
        out = []
        for row, ids in zip(raw2d, ids_list, strict=True):
            out.append(full_free_logits(model, row) if ids is None else np.array(row[ids], dtype=np.float32))
        return out
    return [scores(model, s, ids, selective=selective) for s, ids in zip(seqs, ids_list, strict=True)]
