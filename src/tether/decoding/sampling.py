"""Choosing one token from the logits of the allowed tokens (argmax / filtered sampling).

All functions take ``values``: the logits of the allowed tokens in ascending token-id
order (float array), and return an index into ``values``. Cost O(k) for k allowed
tokens, plus O(k log k) when ``top_p < 1``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from tether.decoding.decoders import Sample


def log_softmax(values: NDArray[np.floating]) -> NDArray[np.float64]:
    """Log-probabilities of ``values`` (-inf entries stay -inf)."""
    v = np.asarray(values, dtype=np.float64)
    m = np.max(v)
    if not np.isfinite(m):
        return np.full_like(v, -np.inf) if m == -np.inf else v - m
    z = v - m
    return z - float(np.log(np.exp(z).sum()))


def argmax(values: NDArray[np.floating]) -> int:
    """Index of the largest value; ties go to the lowest index (lowest token id)."""
    return int(np.argmax(values))


def filtered_probabilities(values: NDArray[np.floating], s: Sample) -> NDArray[np.float64]:
    """The distribution `Sample` draws from: temperature, then top-k, min-p, top-p."""
    v = np.asarray(values, dtype=np.float64) / s.temperature
    keep = np.isfinite(v)
    if s.top_k and s.top_k < int(keep.sum()):
        kth = np.partition(v[keep], -s.top_k)[-s.top_k]
        keep &= v >= kth
    p = np.where(keep, np.exp(v - np.max(v[keep])), 0.0)
    p /= p.sum()
    if s.min_p > 0:
        p = np.where(p >= s.min_p * p.max(), p, 0.0)
        p /= p.sum()
    if s.top_p < 1:
        order = np.argsort(-p, kind="stable")
        cum = np.cumsum(p[order])
        cut = int(np.searchsorted(cum, s.top_p * cum[-1] - 1e-12)) + 1  # smallest prefix reaching top_p
        drop = order[cut:]
        p[drop] = 0.0
        p /= p.sum()
    return p


def sample(values: NDArray[np.floating], s: Sample, rng: np.random.Generator) -> int:
    """Draw an index from `filtered_probabilities`; one uniform draw per call."""
    if s.temperature == 0:
        return argmax(values)
    p = filtered_probabilities(values, s)
    u = rng.random()
    idx = int(np.searchsorted(np.cumsum(p), u * p.sum(), side="right"))
    idx = min(idx, len(p) - 1)
    while p[idx] == 0.0:  # rounding at the top end: step back to a kept token
        idx -= 1
    return idx
