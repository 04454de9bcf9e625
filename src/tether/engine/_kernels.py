"""The engine's numba kernels (the only numba module of the engine layer).

Kernels take fixed-dtype arrays and ints, write into caller-owned arrays, allocate
nothing and return an int. Their meaning is stated as plain Python in
``tether.engine.walk`` (the driver) and kept runnable in the tests
(``tests/unit/engine/engine_reference.py``). The kernel returns to Python on an UNKNOWN
entry and is resumed at the same trie node once Python filled it.

Table conventions (all ``int32``): a value ``>= 0`` is a state or node id,
``DEAD = -1`` means "no transition", ``UNKNOWN = -2`` means "not computed yet".
"""

from __future__ import annotations

import numba as nb
import numpy as np

DEAD = -1
UNKNOWN = -2


@nb.njit(cache=True, nogil=True)
def walk_lexemes(byte, depth, token, end, dup_next, table, accid, trans, nstart,
                 lstack, pstack, mask, start, stop):  # fmt: skip
    """Set the bit of every token of the trie nodes ``start..stop-1`` (whole subtrees of
    the root, or the rest of a walk resumed at ``start``) that the state at
    ``lstack[0], pstack[0]`` can consume. Inside a lexeme follow ``table``; when a byte
    kills the lexeme and its state accepts (``accid[state] >= 0``), follow the parser edge
    ``trans[node, accid]`` and restart the lexer at ``nstart[node']``. Return -1 when
    done, or the trie node whose step needs an UNKNOWN entry (the stacks then hold its
    path: fill the entry and call again with ``start`` = that node)."""
    p = start
    while p < stop:
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
                      lstack, pstack, mask, start, stop):  # fmt: skip
    """``walk_lexemes`` for grammars with lazy terminals: after each byte, a state that
    accepts a lazy terminal (``lazyf[state] == 1``) ends its lexeme at once (the state
    becomes ``nstart[trans[node, accid[state]]]``)."""
    p = start
    while p < stop:
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
        z = lazyf[s]
        if z != 0:
            if z == UNKNOWN:
                return p
            c = trans[pn, accid[s]]
            if c < 0:
                if c == UNKNOWN:
                    return p
                p = end[p]
                continue
            s = nstart[c]
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
def nonzero_words(mask, idx, words):
    """Write the indices and values of the non-zero words of ``mask`` into ``idx`` and
    ``words`` (as long as ``mask``); return their number."""
    k = 0
    for i in range(mask.shape[0]):
        w = mask[i]
        if w != 0:
            idx[k] = i
            words[k] = w
            k += 1
    return k
