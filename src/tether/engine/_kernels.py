"""The engine's numba kernels (the only numba module of the engine layer).

Kernels take fixed-dtype arrays and ints, write into caller-owned arrays, allocate
nothing and return an int status. Their meaning is stated as plain Python in
``tether.engine.walk`` (the wrapper) and kept as a reference in the tests.

Table conventions (all ``int32``): a value ``>= 0`` is a state or node id,
``DEAD = -1`` means "no transition", ``UNKNOWN = -2`` means "not computed yet":
the kernel returns to Python, which fills the entry and resumes.
"""

from __future__ import annotations

import numba as nb
import numpy as np

DEAD = -1
UNKNOWN = -2


@nb.njit(cache=True, nogil=True)
def walk_lexemes(byte, depth, token, end, dup_next, table, accid, trans, nstart,
                 lstack, pstack, mask, start):  # fmt: skip
    """Set the bit of every token of the trie that the (lexer, parser) state at
    ``lstack[0], pstack[0]`` can consume. Inside a lexeme follow ``table``; when a
    byte kills the lexeme and its state accepts (``accid[state] >= 0``), follow the
    parser edge ``trans[node, accid]`` and restart the lexer at ``nstart[node']``.
    Return -1 when done, or the trie node whose step needs an UNKNOWN entry."""
    p = start
    n = byte.shape[0]
    while p < n:
        d = depth[p]
        ls = lstack[d - 1]
        pn = pstack[d - 1]
        b = byte[p]
        s = table[ls, b]
        if s < 0:
            if s == UNKNOWN:
                return p
            a = accid[ls]
            if a < 0:
                if a == UNKNOWN:
                    return p
                p = end[p]
                continue
            c = trans[pn, a]
            if c < 0:
                if c == UNKNOWN:
                    return p
                p = end[p]
                continue
            s = table[nstart[c], b]
            if s < 0:
                if s == UNKNOWN:
                    return p
                p = end[p]
                continue
            pn = c
        lstack[d] = s
        pstack[d] = pn
        t = token[p]
        while t >= 0:
            mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            t = dup_next[t]
        p += 1
    return -1


@nb.njit(cache=True, nogil=True)
def walk_lexemes_lazy(byte, depth, token, end, dup_next, table, accid, lazyf, trans, nstart,
                      lstack, pstack, astack, mask, start):  # fmt: skip
    """``walk_lexemes`` for grammars with lazy terminals: after each byte, a state that
    accepts a lazy terminal (``lazyf[state] == 1``) ends its lexeme at once. The lexemes
    scanned at depth d are recorded in ``astack[d, 0:2]`` (boundary, lazy end; -1 = none)
    so Python can rebuild the parser along the path."""
    p = start
    n = byte.shape[0]
    while p < n:
        d = depth[p]
        ls = lstack[d - 1]
        pn = pstack[d - 1]
        b = byte[p]
        s = table[ls, b]
        a0 = -1
        if s < 0:
            if s == UNKNOWN:
                return p
            a0 = accid[ls]
            if a0 < 0:
                if a0 == UNKNOWN:
                    return p
                p = end[p]
                continue
            c = trans[pn, a0]
            if c < 0:
                if c == UNKNOWN:
                    return p
                p = end[p]
                continue
            s = table[nstart[c], b]
            if s < 0:
                if s == UNKNOWN:
                    return p
                p = end[p]
                continue
            pn = c
        z = lazyf[s]
        a1 = -1
        if z != 0:
            if z == UNKNOWN:
                return p
            a1 = accid[s]
            c = trans[pn, a1]
            if c < 0:
                if c == UNKNOWN:
                    return p
                p = end[p]
                continue
            s = nstart[c]
            pn = c
        lstack[d] = s
        pstack[d] = pn
        astack[d, 0] = a0
        astack[d, 1] = a1
        t = token[p]
        while t >= 0:
            mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            t = dup_next[t]
        p += 1
    return -1
