"""Lazy masking: constraints whose exact mask is too costly to compute over the whole vocabulary.

A *lazy* matcher (`LazyMatcher`, e.g. a query-language hole whose ``where`` clause is
arbitrary Python) gives, per step, a *superset* of the allowed tokens (``candidates``,
what its exact parts allow) and an exact test of one candidate (``accepts``). The
decoders then test candidates in their own order of preference until they have what they
need: the first accepted token for argmax, a draw for sampling (rejection sampling: a
rejected draw is drawn again, which is the same distribution as masking first), the ``k``
best for a beam. A step costs a handful of tests instead of one per vocabulary entry.

``stop_outside`` (as in `tether.decoding.loop`): where the output may end (EOS is
accepted), the probability of the candidates found forbidden counts toward EOS. So
argmax ends where the model's first choice is forbidden, and sampling ends on a
forbidden draw (a model that wants to leave the language means the value has ended).

Every function takes ``values``: the scores of ``ids`` (ascending token ids), or of the
whole vocabulary when ``ids`` is None; indices returned are into ``values``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from tether.decoding.decoders import Sample
from tether.decoding.sampling import argmax, filtered_probabilities, log_softmax, sample

if TYPE_CHECKING:
    from tether.decoding.guide import Guide

# candidates tested per step at most before the decoder gives up (ends or reports a dead end)
MAX_TESTS = 20000


@runtime_checkable
class LazyMatcher(Protocol):
    """A matcher (consume, consume_bytes, is_accepting, is_finished, fast_forward,
    shortest_completion, copy) whose mask is given as a superset plus an exact test."""

    def candidates(self) -> NDArray[np.int64] | None:
        """A superset of the tokens allowed next (ascending; EOS where ending may be
        allowed); None: every ordinary token and EOS."""

    def accepts(self, token: int) -> bool:
        """The exact test of one candidate (EOS: whether the output may end here)."""

    def accepts_bytes(self, data: bytes) -> bool:
        """The exact test of a token whose text is ``data`` (the tail of a healing token)."""


def order(values: NDArray[np.floating]) -> Iterator[int]:
    """Indices of ``values``, largest first (ties: lowest index), by growing partial sorts."""
    size = len(values)
    neg = -np.asarray(values, dtype=np.float64)
    seen = 0
    for k in (16, 256, 4096, size):
        k = min(k, size)
        if k == size:
            idx = np.argsort(neg, kind="stable")
        else:
            part = np.argpartition(neg, k - 1)[:k]
            idx = part[np.lexsort((part, neg[part]))]
        for j in idx[seen:]:
            if np.isfinite(values[j]):
                yield int(j)
            else:
                return
        seen = k
        if k == size:
            return


def _eos_index(vocab: Any, ids: NDArray[np.int64] | None, values: NDArray[np.floating]) -> int:
    """Index in ``values`` of the first EOS that has a finite score; -1 if none."""
    for e in vocab.eos_ids:
        if ids is None:
            k = int(e)
            if k < len(values) and np.isfinite(values[k]):
                return k
            continue
        k = int(np.searchsorted(ids, e))
        if k < len(ids) and int(ids[k]) == e and np.isfinite(values[k]):
            return k
    return -1


def choose(guide: Guide, ids: NDArray[np.int64] | None, values: NDArray[np.floating], sampler: Sample | None,
           rng: np.random.Generator | None, *, stop_outside: bool) -> int:
    """The decoder's choice (argmax, or a draw of ``sampler``) among the tokens ``guide``
    accepts; -1 when it accepts none. A guide that is not lazy: `argmax` / `sample`."""
    if not guide.lazy:
        return argmax(values) if sampler is None else sample(values, sampler, rng)  # type: ignore[arg-type]
    vocab = guide.vocab
    eos = _eos_index(vocab, ids, values)
    end_ok = eos >= 0 and guide.accepts(int(ids[eos]) if ids is not None else eos)
    token = (lambda j: int(ids[j])) if ids is not None else int  # noqa: E731
    if sampler is not None and sampler.temperature > 0:
        return _draw(guide, values, sampler, rng, eos, end_ok, token, stop_outside)
    p = np.exp(log_softmax(values))
    ending = float(p[eos]) if end_ok else 0.0  # EOS plus what was found forbidden
    for tests, j in enumerate(order(values)):
        if j == eos:
            if end_ok:
                return j
            continue
        if end_ok and ending > p[j]:
            return eos
        if guide.accepts(token(j)):
            return j
        if stop_outside:
            ending += float(p[j])
        if tests >= MAX_TESTS:
            break
    return eos if end_ok else -1


def _draw(guide: Guide, values: NDArray[np.floating], sampler: Sample, rng: Any, eos: int, end_ok: bool,
          token: Any, stop_outside: bool) -> int:
    p = filtered_probabilities(values, sampler)
    for _ in range(MAX_TESTS):
        total = float(p.sum())
        if total <= 0:
            break
        j = min(int(np.searchsorted(np.cumsum(p), rng.random() * total, side="right")), len(p) - 1)
        while p[j] == 0.0:  # rounding at the top end: step back to a kept token
            j -= 1
        if j == eos:
            if end_ok:
                return j
        elif guide.accepts(token(j)):
            return j
        elif end_ok and stop_outside:  # a forbidden draw: the model means to end here
            return eos
        p[j] = 0.0
    return eos if end_ok else -1


def best_accepted(guide: Guide, ids: NDArray[np.int64] | None, lp: NDArray[np.floating], k: int, *,
                  stop_outside: bool) -> list[tuple[int, float]]:
    """The ``k`` best (index, log-probability) pairs among the tokens ``guide`` accepts,
    best first (beam search). With ``stop_outside``, EOS scores its own probability plus
    that of the forbidden candidates better than the ``k``-th accepted one."""
    vocab = guide.vocab
    eos = _eos_index(vocab, ids, lp)
    end_ok = eos >= 0 and guide.accepts(int(ids[eos]) if ids is not None else eos)
    out: list[tuple[int, float]] = []
    ending = float(np.exp(lp[eos])) if end_ok else 0.0
    for tests, j in enumerate(order(lp)):
        if len(out) >= k or tests >= MAX_TESTS:
            break
        if j == eos:
            continue
        if guide.accepts(int(ids[j]) if ids is not None else j):
            out.append((j, float(lp[j])))
        elif stop_outside:
            ending += float(np.exp(lp[j]))
    if end_ok:
        out.append((eos, float(np.log(ending)) if ending > 0 else -np.inf))
        out.sort(key=lambda c: -c[1])
    return out[:k]
