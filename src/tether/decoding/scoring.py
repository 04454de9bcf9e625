"""`score_continuations`: full log-probabilities of given texts after a prompt (for `distribute`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.decoding.logits import scores
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
