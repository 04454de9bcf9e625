"""`Guide`: the per-sequence view of a constraint that the decoders step through.

It wraps an engine ``Matcher`` (or nothing: free text) and adds token healing: while
``heal`` bytes (text removed from the end of the prompt) are pending, the only tokens
allowed are those that start with the pending text and continue in a way the matcher
accepts (or, when no token covers all of it, those that are a prefix of it). The healed bytes belong to the prompt: the
matcher never sees them.

``allowed()`` returns the allowed token ids (ascending, EOS included where allowed) or
``None`` for "every ordinary token and EOS" (free text: the caller masks only special
tokens). Decode time never raises: a refused token returns False and sets ``error``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.decoding.lazy import LazyMatcher


def allowed_ids(mask: NDArray[np.uint32], size: int) -> NDArray[np.int64]:
    """Token ids whose bit is set in ``mask`` (bit i of word j = token 32·j + i), below ``size``."""
    bits = np.unpackbits(mask.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits[:size])


_HEALING: dict[tuple[str, bytes], list[int]] = {}


def healing_candidates(tokens: list[bytes], special: frozenset[int], text: bytes) -> list[int]:
    """Ids of tokens that start with ``text`` (Guidance's rule: the healed text is redone
    by one token, so the model never sees an unnatural split such as ``" "`` +
    ``"https"``); if no token does, the tokens that are a non-empty prefix of it. O(V)."""
    extend = [i for i, t in enumerate(tokens) if t and i not in special and t.startswith(text)]
    if extend:
        return extend
    return [i for i, t in enumerate(tokens) if t and i not in special and text.startswith(t)]


def _walk_tails(matcher: Any, items: list[tuple[int, bytes]], depth: int) -> list[int]:
    """Tokens whose tail the matcher accepts, walking the tails as a trie: one matcher
    copy per live prefix, pruned by ``allowed_bytes()`` (so a candidate set of 100k
    tokens costs only as many steps as the constraint lets live)."""
    ok = [t for t, tail in items if len(tail) == depth]
    groups: dict[int, list[tuple[int, bytes]]] = {}
    for t, tail in items:
        if len(tail) > depth:
            groups.setdefault(tail[depth], []).append((t, tail))
    if not groups:
        return ok
    allowed = set(matcher.allowed_bytes())
    for b, group in groups.items():
        if b in allowed:
            m = matcher.copy()
            if m.consume_bytes(bytes([b])):
                ok += _walk_tails(m, group, depth + 1)
    return ok


class Guide:
    """Constraint state of one sequence: matcher (or free) plus pending healed bytes."""

    __slots__ = ("matcher", "vocab", "pending", "_candidates", "error", "eos_done", "_mask", "lazy")

    def __init__(self, matcher: Any | None, vocabulary: Any, heal: bytes = b"") -> None:
        self.matcher = matcher
        self.lazy = matcher is not None and isinstance(matcher, LazyMatcher)
        self.vocab = vocabulary
        self.pending = heal
        self._candidates: list[int] | None = None
        self.error: str | None = None
        self.eos_done = False
        self._mask: NDArray[np.uint32] | None = None

    # --- state -------------------------------------------------------------------------
    def copy(self) -> Guide:
        g = Guide.__new__(Guide)
        g.matcher = self.matcher.copy() if self.matcher is not None else None
        g.vocab, g.pending, g._candidates = self.vocab, self.pending, self._candidates
        g.error, g.eos_done, g._mask, g.lazy = self.error, self.eos_done, None, self.lazy
        return g

    @property
    def free(self) -> bool:
        """True when every ordinary token and EOS is allowed (no matcher, nothing pending)."""
        return self.matcher is None and not self.pending

    def is_finished(self) -> bool:
        """Nothing may follow (the matcher is finished, or EOS was consumed)."""
        if self.eos_done:
            return True
        return not self.pending and self.matcher is not None and bool(self.matcher.is_finished())

    def is_accepting(self) -> bool:
        return not self.pending and (self.matcher is None or bool(self.matcher.is_accepting()))

    # --- masks ---------------------------------------------------------------------------
    def allowed(self) -> NDArray[np.int64] | None:
        """Allowed token ids (ascending), or None for free text."""
        if self.pending:
            return self._healing_allowed()
        if self.matcher is None:
            return None
        if self.lazy:
            return self.matcher.candidates()  # type: ignore[no-any-return]
        if self._mask is None:
            self._mask = np.zeros((self.vocab.n_logits + 31) // 32, dtype=np.uint32)
        else:
            self._mask.fill(0)
        self.matcher.compute_mask(self._mask)
        return allowed_ids(self._mask, self.vocab.size)

    def _healing_allowed(self) -> NDArray[np.int64]:
        if self._candidates is None:
            key = (self.vocab.fingerprint, self.pending)
            hit = _HEALING.get(key)
            if hit is None:  # O(V): computed once per vocabulary and healed text
                hit = healing_candidates(self.vocab.tokens, self._special(), self.pending)
                if len(_HEALING) >= 64:
                    _HEALING.clear()
                _HEALING[key] = hit
            self._candidates = hit
        if self.lazy:  # the lazy matcher tests the tails of the candidates a decoder prefers
            return np.asarray(self._candidates, dtype=np.int64)
        ok = []
        tails: list[tuple[int, bytes]] = []
        for t in self._candidates:
            b = self.vocab.tokens[t]
            if self.pending.startswith(b) or self.matcher is None:
                ok.append(t)
            else:
                tails.append((t, b[len(self.pending) :]))
        m = self.matcher
        if tails and m is not None:
            if hasattr(m, "allowed_bytes"):
                ok += _walk_tails(m, tails, 0)
            else:  # a matcher without byte lookahead: check each tail
                ok += [t for t, tail in tails if m.copy().consume_bytes(tail)]
        return np.asarray(sorted(ok), dtype=np.int64)

    def _special(self) -> frozenset[int]:
        return frozenset(getattr(self.vocab, "special_ids", ())) | frozenset(self.vocab.eos_ids)

    def accepts(self, token: int) -> bool:
        """The exact test of a token from `allowed` (a lazy matcher's; True otherwise)."""
        m = self.matcher
        if not self.lazy or m is None:
            return True
        if token in self.vocab.eos_ids:
            return not self.pending and bool(m.is_accepting())
        b = self.vocab.tokens[token]
        if self.pending:
            if self.pending.startswith(b):  # redoes healed text only (still a token of the output)
                return bool(b) and bool(m.accepts_bytes(b""))
            return b.startswith(self.pending) and bool(m.accepts_bytes(b[len(self.pending):]))
        return bool(m.accepts(token))

    # --- advancing ------------------------------------------------------------------------
    def consume(self, token: int) -> bool:
        """Advance by ``token``; False (and ``error``) if it is not allowed here."""
        if token in self.vocab.eos_ids:
            if self.pending or not self.is_accepting():
                self.error = f"end of sequence (token {token}) where the output is not complete"
                return False
            if self.matcher is not None:
                self.matcher.consume(token)
            self.eos_done = True
            return True
        b = self.vocab.tokens[token]
        if self.pending:
            if self.pending.startswith(b) and b:
                if self.lazy and self.matcher is not None and not self.matcher.consume_bytes(b""):
                    # a lazy matcher sees the token (it counts toward its budget, not its value)
                    self.error = getattr(self.matcher, "error", None) or f"token {token} refused"
                    return False
                self.pending = self.pending[len(b) :]
                self._candidates = None
                return True
            if not b.startswith(self.pending):
                self.error = f"token {token} ({b!r}) does not continue the healed text {self.pending!r}"
                return False
            tail, self.pending, self._candidates = b[len(self.pending) :], b"", None
            if self.matcher is not None and tail and not self.matcher.consume_bytes(tail):
                self.error = getattr(self.matcher, "error", None) or f"bytes {tail!r} refused"
                return False
            return True
        if self.matcher is None:
            return True
        if not self.matcher.consume(token):
            self.error = getattr(self.matcher, "error", None) or f"token {token} refused"
            return False
        return True

    def fast_forward(self) -> list[int]:
        """Forced tokens from the matcher (none while healing is pending or when free)."""
        if self.pending or self.matcher is None or self.eos_done:
            return []
        return list(self.matcher.fast_forward())

    def shortest_completion(self) -> bytes:
        """Bytes that complete the output most briefly (healed text first)."""
        rest = self.matcher.shortest_completion() if self.matcher is not None else b""
        return self.pending + rest
