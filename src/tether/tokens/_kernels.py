"""The numba kernels of the tokens layer (the only module here that imports numba).

Kernels take fixed-dtype arrays and ints, write into caller-owned arrays, allocate
nothing and return an int status. Their meaning as plain Python is in the docstrings
of the typed wrappers in ``tether.tokens.walk`` (and ``tests/property/reference.py``).
``NUMBA_DISABLE_JIT=1`` runs the same source as Python.
"""

from __future__ import annotations

import numba as nb
import numpy as np

DEAD = -1  # the lexer table value of a dead state
UNKNOWN = -2  # a table row that has not been computed yet


@nb.njit(cache=True, nogil=True, inline="always")
def set_tokens(mask, token, dup_next, p):  # type: ignore[no-untyped-def]
    """Set in ``mask`` the bit of trie node ``p``'s token and of each token with the same
    bytes (``token[p]``, then ``dup_next`` down to -1); the trie walk of this layer calls
    it for every node it reaches (inlined by numba: a call per node measured ~2% slower;
    the engine's walk does the same from its packed trie words)."""
    t = token[p]
    while t >= 0:
        mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
        t = dup_next[t]


@nb.njit(cache=True, nogil=True)
def walk_trie(byte, depth, token, dup_next, end, table, stack, mask, start):  # type: ignore[no-untyped-def]
    """Set the bit of every token whose bytes keep the DFA alive from ``stack[0]``.

    Walks nodes ``start, start+1, ...`` in preorder; a dead byte skips the whole subtree.
    Return -1 when done, or the node whose parent state has no table row yet (the
    caller fills the row of ``stack[depth[node] - 1]`` and resumes at that node).
    """
    p = start
    n = byte.shape[0]
    while p < n:
        s = table[stack[depth[p] - 1], byte[p]]
        if s == UNKNOWN:
            return p
        if s == DEAD:
            p = end[p]
            continue
        stack[depth[p]] = s
        set_tokens(mask, token, dup_next, p)
        p += 1
    return -1
