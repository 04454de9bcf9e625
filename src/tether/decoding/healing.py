"""Token healing (seed 003): undo the prompt's last token(s) and let the output redo them.

A prompt that ends mid-word (``"The url is http"``) ends with a token the model would
rarely have produced there on its own, since training text tokenizes ``http://`` with
other boundaries. `plan_healing` removes the last token(s) of the prompt when some
vocabulary token extends their text; the decoder then allows, as first token(s), only
tokens that re-produce the removed text and may continue it (``"://"``). The removed
text is part of the prompt, not of the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _extended(vocab: Any, text: bytes) -> bool:
    """Some ordinary token strictly extends ``text``."""
    special = set(getattr(vocab, "special_ids", ())) | set(vocab.eos_ids)
    for i, t in enumerate(vocab.tokens):
        if len(t) > len(text) and t.startswith(text) and i not in special:
            return True
    return False


def plan_healing(vocab: Any, prompt_tokens: Sequence[int], max_tokens_back: int = 1) -> tuple[list[int], bytes]:
    """Return (kept prompt tokens, removed bytes).

    Removes up to ``max_tokens_back`` final tokens, stopping at special tokens (BOS,
    chat markers) and when no token extends the removed text. Cost: O(V) per token
    considered.
    """
    special = set(getattr(vocab, "special_ids", ())) | set(vocab.eos_ids)
    kept = list(prompt_tokens)
    removed = b""
    for _ in range(max_tokens_back):
        if len(kept) < 2 or kept[-1] in special:  # keep at least one token (BOS or a start)
            break
        candidate = vocab.tokens[kept[-1]] + removed
        if not candidate or not _extended(vocab, candidate):
            break
        kept.pop()
        removed = candidate
    return kept, removed
