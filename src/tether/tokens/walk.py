"""Typed wrapper of the trie-walk kernel: the allowed tokens under a lexer DFA.

1. Check the mask, clear it (unless asked not to) and seed the state stack.
2. Run the numba kernel ``walk_trie`` (``tether.tokens._kernels``; releases the GIL).
3. When the kernel meets a table row not yet computed, fill it in Python and resume.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.errors import ConstraintError
from tether.tokens.bitmask import check_mask
from tether.tokens.trie import TokenTrie

DEAD = -1
UNKNOWN = -2

FillRow = Callable[[int], Any]


def fill_mask(
    trie: TokenTrie,
    table: NDArray[np.int32] | Any,
    start_state: int,
    mask: NDArray[np.uint32],
    fill_row: FillRow | None = None,
    *,
    clear: bool = True,
) -> None:
    """Allow every token whose bytes the DFA ``table`` can read from ``start_state``.

    ``table`` is a dense ``int32[states, 256]`` transition table (next state ``>= 0``,
    ``DEAD = -1``, ``UNKNOWN = -2`` for rows not computed yet), or an object with a
    ``.table`` attribute and a ``.fill_row(state)`` method (such as ``LexerDfa``), whose
    ``.table`` is re-read after each fill. ``fill_row(state)`` computes a row; it may
    reallocate the table and return the new array (if it returns an ndarray, that array
    is used from then on). Meaning, as a plain Python loop::

        for t, data in enumerate(vocab.tokens):
            if t is special or not data: continue
            s = start_state
            for b in data:
                if table[s, b] == UNKNOWN: fill_row(s)
                s = table[s, b]
                if s == DEAD: break
            else:
                allow(t)

    Args:
        mask: ``uint32[ceil(V/32)]``, C-contiguous; zeroed first unless ``clear=False``
            (then bits are OR-ed in, to union several walks).

    Raises:
        ConstraintError: bad mask (shape, dtype, layout) or table.
        ValueError: an UNKNOWN row with no ``fill_row``.

    Cost: one visit per live trie node (a dead byte skips its subtree); the GIL is
    released while the kernel runs.
    """
    from tether.tokens import _kernels

    check_mask(mask, trie.vocab_size, ndim=1)
    if clear:
        mask.fill(0)
    if start_state < 0:
        return
    holder = None
    if not isinstance(table, np.ndarray):
        holder = table
        if fill_row is None:
            fill_row = holder.fill_row
        table = holder.table
    _check_table(table, start_state)
    stack = np.empty(trie.max_depth + 1, np.int32)
    stack[0] = start_state
    node = 1
    while True:
        node = _kernels.walk_trie(trie.byte, trie.depth, trie.token, trie.dup_next, trie.end,
                                  table, stack, mask, node)
        if node < 0:
            return
        if fill_row is None:
            raise ValueError(
                f"table row of state {int(stack[trie.depth[node] - 1])} is UNKNOWN and no "
                "fill_row was given"
            )
        new = fill_row(int(stack[trie.depth[node] - 1]))
        if isinstance(new, np.ndarray):
            table = new
        elif holder is not None:
            table = holder.table
        _check_table(table, 0)


def _check_table(table: Any, start_state: int) -> None:
    """Raise ConstraintError unless ``table`` is a C-contiguous ``int32[states, 256]``
    holding ``start_state`` (what the kernel indexes without bounds checks)."""
    if not (isinstance(table, np.ndarray) and table.dtype == np.int32 and table.ndim == 2
            and table.shape[1] == 256 and table.flags.c_contiguous):
        got = (f"{table.dtype} of shape {table.shape}" if isinstance(table, np.ndarray)
               else type(table).__name__)
        raise ConstraintError(f"DFA table must be a C-contiguous int32[states, 256]; got {got}")
    if not 0 <= start_state < table.shape[0]:
        raise ConstraintError(f"start state {start_state} is not a row of the table "
                              f"({table.shape[0]} rows)")


def warmup() -> None:
    """Compile (or load from numba's cache) the walk kernel; about 1 s the first time."""
    from tether.tokens.vocabulary import Vocabulary

    vocab = Vocabulary.from_bytes([b"a", b"ab"])
    trie = TokenTrie.from_vocabulary(vocab)
    table = np.full((1, 256), DEAD, np.int32)
    mask = np.zeros(1, np.uint32)
    fill_mask(trie, table, 0, mask)
