"""Fetching next-token scores from a model for the allowed tokens only.

``scores(model, tokens, ids)`` returns the logits of the tokens ``ids`` (ascending) after
``tokens``. A backend with *selective logits* (``logits_rows(tokens, ids)`` and a
``selective_threshold``) computes only those rows of the unembedding when ``ids`` is
short enough (seed 001); otherwise the full logits are computed and gathered. Both
paths give the same numbers up to float rounding of the same dot products.
``ids=None`` means free text: full logits with special (non-EOS) tokens at -inf.

Every model call goes through `model_call`: a backend's own exception (anything but a
`TetherError`) comes out as `ModelError` naming the model, with the original chained.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from tether.errors import ContextLengthError, ModelError, TetherError
from tether.models.base import BatchLogits

_BLOCKED_CACHE: dict[str, NDArray[np.int64]] = {}
T = TypeVar("T")


def model_call(model: Any, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, with a backend's foreign exception turned into `ModelError`."""
    try:
        return fn(*args)
    except (TetherError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 -- the backend's own error, reported as ModelError
        name = getattr(model, "name", type(model).__name__)
        raise ModelError(f"model {name!r} failed in {getattr(fn, '__name__', 'a call')}: "
                         f"{type(exc).__name__}: {exc}") from exc


def context_size(model: Any) -> int | None:
    """The model's context window in tokens (``Model.n_ctx``), None when unknown."""
    n = getattr(model, "n_ctx", None)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def check_prompt_fits(model: Any, prompt_tokens: Sequence[int]) -> None:
    """Raise ContextLengthError when the prompt alone exceeds the context window."""
    n_ctx = context_size(model)
    if n_ctx is not None and len(prompt_tokens) > n_ctx:
        raise ContextLengthError(n_ctx, len(prompt_tokens))


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
        return np.asarray(model_call(model, model.logits_rows, tokens, ids), dtype=np.float32)
    raw = model_call(model, model.logits, tokens)
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
    if len(seqs) > 1 and isinstance(model, BatchLogits) and not any(
        uses_selective(model, ids, selective) for ids in ids_list
    ):
        raw2d = model_call(model, model.logits_batch, seqs)
        out = []
        for row, ids in zip(raw2d, ids_list, strict=True):
            out.append(full_free_logits(model, row) if ids is None else np.array(row[ids], dtype=np.float32))
        return out
    return [scores(model, s, ids, selective=selective) for s, ids in zip(seqs, ids_list, strict=True)]
