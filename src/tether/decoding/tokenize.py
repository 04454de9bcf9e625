"""Token sequences for given bytes (forced text, closing a structure within a budget).

`tokens_for_bytes` prefers the model's own (canonical) tokenizer and checks that the
tokens detokenize to exactly the bytes asked for; if not (a tokenizer that adds a space
prefix, or bytes that are not UTF-8), it falls back to greedy longest-match over the
vocabulary, which always reproduces the bytes when every byte has a token.
"""

from __future__ import annotations

from typing import Any

from tether.errors import VocabularyError

_INDEX: dict[str, tuple[dict[bytes, int], int]] = {}


def _index(vocab: Any) -> tuple[dict[bytes, int], int]:
    hit = _INDEX.get(vocab.fingerprint)
    if hit is None:
        special = set(getattr(vocab, "special_ids", ())) | set(vocab.eos_ids)
        table: dict[bytes, int] = {}
        for i, t in enumerate(vocab.tokens):
            if t and i not in special and t not in table:
                table[t] = i
        hit = (table, max((len(t) for t in table), default=1))
        _INDEX[vocab.fingerprint] = hit
    return hit


def greedy_tokens(vocab: Any, data: bytes) -> list[int]:
    """Longest-match tokenization of ``data``; raises VocabularyError (a ValueError) if
    some byte has no token."""
    table, longest = _index(vocab)
    out, i = [], 0
    while i < len(data):
        for k in range(min(longest, len(data) - i), 0, -1):
            t = table.get(data[i : i + k])
            if t is not None:
                out.append(t)
                i += k
                break
        else:
            raise VocabularyError(f"no token covers byte {data[i]:#04x} at offset {i} of {data[:40]!r}")
    return out


def tokens_for_bytes(model: Any, data: bytes) -> list[int]:
    """Canonical tokens for ``data`` (model tokenizer when it round-trips, else greedy)."""
    if not data:
        return []
    try:
        toks = list(model.tokenize(data.decode("utf-8"), add_bos=False))
        if b"".join(model.vocabulary.tokens[t] for t in toks) == data:
            return toks
    except MemoryError:
        raise
    except Exception:  # noqa: BLE001 -- the model's tokenizer cannot take it: greedy tokens below
        pass
    return greedy_tokens(model.vocabulary, data)
