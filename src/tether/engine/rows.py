"""Filling lexer-DFA rows for the engine's slow path.

``fill_row(dfa, state)`` has the meaning of ``LexerDfa.fill_row`` (one derivative per
byte class of the state's live terminals) but writes each class into the row through a
cached boolean byte mask instead of listing its bytes one by one, which was most of the
cost of a new row. If the DFA object does not expose the parts this needs (another
implementation of the regex layer's contract), it falls back to ``dfa.fill_row``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

DEAD = -1
UNKNOWN = -2

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


def fill_row(dfa: Any, state: int) -> None:
    """Make row ``state`` of ``dfa.table`` known (no-op if it is)."""
    if dfa.table[state, 0] != UNKNOWN:
        return
    try:
        from tether.regex.ast import byte_classes, derivative, lowest_byte

        pairs = dfa._states[state]
        prune, state_id = dfa._prune, dfa._state_id
    except (AttributeError, ImportError):  # another LexerDfa: use its own method
        dfa.fill_row(state)
        return
    values = np.empty(256, dtype=np.int32)
    if not pairs:
        values.fill(DEAD)
    else:
        for cls in byte_classes(n for _, n in pairs):
            b = lowest_byte(cls)
            nxt = prune((t, derivative(n, b)) for t, n in pairs)
            values[class_mask(cls)] = state_id(nxt) if nxt else DEAD
    dfa.table[state] = values  # re-read: state_id may have grown the table
