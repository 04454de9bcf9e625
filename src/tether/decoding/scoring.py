"""`score_continuations`: full log-probabilities of given texts after a prompt (for `distribute`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.decoding.logits import batch_scores, scores
from tether.decoding.sampling import log_softmax
from tether.decoding.tokenize import tokens_for_bytes


def score_continuations(model: Any, prompt_tokens: Sequence[int], continuations: Sequence[str]) -> list[float]:
    """log P(continuation | prompt) for each text, unconstrained (sum over its tokens).

    Continuations are tokenized canonically on their own and appended to the prompt.
    Continuations sharing a prefix share the model calls for it (results memoised by
    token prefix); the backend's KV prefix reuse makes each call evaluate one token.
    """
    memo: dict[tuple[int, ...], Any] = {}
    out = []
    base = list(prompt_tokens)
    for text in continuations:
        toks = tokens_for_bytes(model, text.encode())
        total = 0.0
        for i, t in enumerate(toks):
            key = tuple(toks[:i])
            lp = memo.get(key)
            if lp is None:
                lp = log_softmax(scores(model, base + toks[:i], None))
                memo[key] = lp
            total += float(lp[t])
        out.append(total)
    return out


def score_tokens(model: Any, prompt_tokens: Sequence[int], continuations: Sequence[Sequence[int]], *,
                 batch: bool = True) -> list[float]:
    """log P(tokens | prompt) for each token continuation, unconstrained (summed over its
    tokens). Position by position: with ``batch`` and a backend with ``logits_batch``, one
    batched call per position for all continuations that long (they share the prompt's
    cached prefix); else one call per token."""
    base = list(prompt_tokens)
    out = [0.0] * len(continuations)
    if not batch or len(continuations) < 2:  # one continuation at a time (the prefix cache stays warm)
        for i, cont in enumerate(continuations):
            for k, t in enumerate(cont):
                out[i] += float(log_softmax(scores(model, base + list(cont[:k]), None))[t])
        return out
    for k in range(max(len(c) for c in continuations)):
        live = [i for i, c in enumerate(continuations) if len(c) > k]
        rows = batch_scores(model, [base + list(continuations[i][:k]) for i in live], [None] * len(live))
        for i, row in zip(live, rows, strict=True):
            out[i] += float(log_softmax(row)[continuations[i][k]])
    return out
