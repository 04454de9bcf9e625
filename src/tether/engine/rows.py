"""Filling lexer-DFA transitions for the engine's slow path, one byte class at a time.

The regex layer's ``LexerDfa.fill_row`` computes a whole row: one derivative per byte
class of the state's live terminals. A trie walk needs only the classes of the bytes
that some token continues with — for a state deep inside a lexeme usually one or two —
so ``fill(dfa, state, need)`` computes just the classes that meet ``need`` (a 256-bit
int of bytes; None for all) and writes each class into the row through a cached boolean
byte mask. Entries of the other classes stay UNKNOWN (-2), which the kernels treat as a
miss, so a partly filled row is always safe to read.

The engine's DFA belongs to its own ``Lexer`` instance and is only filled through here.
If the DFA object does not expose the parts this needs (another implementation of the
regex layer's contract), ``fill`` falls back to ``dfa.fill_row`` (whole rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

DEAD = -1
UNKNOWN = -2
ALL = (1 << 256) - 1

_CLASS_BITS: dict[int, NDArray[np.bool_]] = {}


def class_mask(cls: int) -> NDArray[np.bool_]:
    """The 256-bit int ``cls`` as a boolean array over bytes (cached)."""
    a = _CLASS_BITS.get(cls)
    if a is None:
        raw = np.frombuffer(cls.to_bytes(32, "little"), np.uint8)
        a = np.unpackbits(raw, bitorder="little").astype(np.bool_)
        if len(_CLASS_BITS) < 50_000:
            _CLASS_BITS[cls] = a
    return a


def bytes_mask(bs: Any) -> int:
    """A 256-bit int with the bits of the bytes ``bs`` set."""
    m = 0
    for b in bs:
        m |= 1 << int(b)
    return m


class RowFiller:
    """Fills transitions of one LexerDfa by byte class (see the module docstring)."""

    def __init__(self, dfa: Any) -> None:
        self.dfa = dfa
        self._classes: dict[int, list[int]] = {}
        try:
            from tether.regex.ast import byte_classes, derivative, lowest_byte

            self._byte_classes, self._derivative, self._lowest = (
                byte_classes, derivative, lowest_byte)
            self._pairs, self._prune, self._state_id = dfa._states, dfa._prune, dfa._state_id
            self.fast = True
        except (AttributeError, ImportError):
            self.fast = False

    def fill(self, state: int, need: int | None = None) -> None:
        """Compute the transitions of ``state`` for every byte class meeting ``need``."""
        dfa = self.dfa
        if not self.fast:
            dfa.fill_row(state)
            return
        pairs = self._pairs[state]
        if not pairs:
            dfa.table[state] = DEAD
            return
        classes = self._classes.get(state)
        if classes is None:
            classes = self._classes[state] = list(self._byte_classes(n for _, n in pairs))
        want = ALL if need is None else need
        for cls in classes:
            if not cls & want:
                continue
            b = self._lowest(cls)
            if dfa.table[state, b] != UNKNOWN:
                continue
            d = self._derivative
            nxt = self._prune((t, d(n, b)) for t, n in pairs)
            target = self._state_id(nxt) if nxt else DEAD
            dfa.table[state, class_mask(cls)] = target  # re-read: state_id may grow it
