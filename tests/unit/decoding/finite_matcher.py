"""A tiny Matcher stand-in over a finite language (tests only).

It implements the engine's Matcher contract by brute force: a token is allowed when
the text so far plus its bytes is a prefix of some word of the language; EOS when the
text is a word. Used to test decoders independently of the engine.
"""

from __future__ import annotations

import numpy as np


class FiniteMatcher:
    def __init__(self, words, vocab, text: bytes = b"") -> None:
        self.words = [w.encode() if isinstance(w, str) else w for w in words]
        self.vocab = vocab
        self.text = text
        self.history: list[int] = []
        self.error: str | None = None
        self.eos = False

    def copy(self) -> FiniteMatcher:
        c = FiniteMatcher(self.words, self.vocab, self.text)
        c.history, c.eos = list(self.history), self.eos
        return c

    def _viable(self, text: bytes) -> bool:
        return any(w.startswith(text) for w in self.words)

    def is_accepting(self) -> bool:
        return self.text in self.words

    def is_finished(self) -> bool:
        return self.eos or (self.is_accepting() and not any(
            w.startswith(self.text) and w != self.text for w in self.words))

    def compute_mask(self, out) -> None:
        out.fill(0)
        if self.eos:
            return
        for i, t in enumerate(self.vocab.tokens):
            if t and i not in self.vocab.special_ids and self._viable(self.text + t):
                out[i // 32] |= np.uint32(1 << (i % 32))
        if self.is_accepting():
            for e in self.vocab.eos_ids:
                out[e // 32] |= np.uint32(1 << (e % 32))

    def consume(self, token: int) -> bool:
        if token in self.vocab.eos_ids:
            if not self.is_accepting():
                self.error = "eos not allowed"
                return False
            self.eos = True
            self.history.append(len(self.text))
            return True
        b = self.vocab.tokens[token]
        if not b or not self._viable(self.text + b):
            self.error = f"token {token} not allowed"
            return False
        self.history.append(len(self.text))
        self.text += b
        return True

    def allowed_bytes(self) -> list[int]:
        return sorted({w[len(self.text)] for w in self.words if w.startswith(self.text) and len(w) > len(self.text)})

    def consume_bytes(self, data: bytes) -> bool:
        if not self._viable(self.text + data):
            self.error = f"bytes {data!r} not allowed"
            return False
        self.text += data
        return True

    def rollback(self, n: int) -> None:
        for _ in range(n):
            self.text = self.text[: self.history.pop()]
            self.eos = False

    def forced_bytes(self) -> bytes:
        if self.is_accepting():
            return b""
        rest = [w[len(self.text):] for w in self.words if w.startswith(self.text)]
        out = b""
        for chars in zip(*rest, strict=False):
            if len(set(chars)) > 1:
                break
            out += bytes([chars[0]])
        return out

    def fast_forward(self) -> list[int]:
        from tether.decoding.tokenize import greedy_tokens

        return greedy_tokens(self.vocab, self.forced_bytes())

    def shortest_completion(self) -> bytes:
        rest = [w[len(self.text):] for w in self.words if w.startswith(self.text)]
        return min(rest, key=lambda r: (len(r), r)) if rest else b""
