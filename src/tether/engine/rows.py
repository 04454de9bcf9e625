"""Filling lexer-DFA transitions for the engine's slow path, one byte class at a time.

A trie walk needs only the transitions of the bytes that some token continues with —
for a state deep inside a lexeme usually one or two byte classes — so
``fill(state, need)`` asks the regex layer's ``LexerDfa.fill_classes`` for just the
classes of the state that meet ``need`` (a 256-bit int of bytes; None for all). Each
class is computed once (one derivative per terminal that can survive it) and written
into the row at once. Entries of the other classes stay UNKNOWN (-2), which the kernels
treat as a miss, so a partly filled row is always safe to read.

The engine's DFA belongs to its own ``Lexer`` instance and is only filled through here.
A DFA without ``fill_classes`` (another implementation of the regex layer's contract)
is filled by whole rows (``fill_row``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

DEAD = -1
UNKNOWN = -2
ALL = (1 << 256) - 1
# derivatives (candidate terminals over the state's other byte classes) also computed on a
# miss: each class filled ahead saves the walk a return to Python (a kernel restart)
EXTRA = 64
# new states whose cheap classes are filled right away (the walk reaches a new state just
# after the transition that created it). Off: on bench/bench_engine_hot.py, 8 states ahead
# cut kernel restarts from 21k to 7.8k but the derivatives of states never reached cost more
AHEAD = 0
EXTRA_AHEAD = 16

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
        fill_classes = getattr(dfa, "fill_classes", None)
        self.fast = fill_classes is not None
        self._fill = fill_classes if fill_classes is not None else None

    def fill(self, state: int, need: int | None = None) -> None:
        """Compute the transitions of ``state`` for every byte class meeting ``need``,
        then the cheap classes of the states this created (up to ``AHEAD`` of them)."""
        dfa = self.dfa
        if self._fill is None:
            dfa.fill_row(state)
            return
        n0 = dfa.n_states
        self._fill(state, need, extra=EXTRA)
        if dfa.n_states == n0 or dfa.n_states > dfa.max_states // 2:
            return
        nxt, todo = n0, AHEAD  # breadth first over the new states, in creation order
        while nxt < dfa.n_states and todo > 0 and dfa.n_states <= dfa.max_states // 2:
            self._fill(nxt, 0, extra=EXTRA_AHEAD)
            nxt += 1
            todo -= 1
