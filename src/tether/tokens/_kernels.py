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


@nb.njit(cache=True, nogil=True)
def pad_rows(data, starts, lens, ids, rows):  # type: ignore[no-untyped-def]
    """Copy token ``ids[i]`` (``lens[ids[i]]`` bytes of ``data`` from ``starts[ids[i]]``)
    into row ``i`` of ``rows`` (``uint8[n, width]``, zeroed by the caller). Returns 0."""
    for i in range(ids.shape[0]):
        t = ids[i]
        a = starts[t]
        for k in range(lens[t]):
            rows[i, k] = data[a + k]
    return 0


@nb.njit(cache=True, nogil=True)
def common_prefixes(rows, lens, lcp):  # type: ignore[no-untyped-def]
    """``lcp[i]`` = the longest common prefix of byte rows ``i - 1`` and ``i`` (``rows``:
    ``uint8[n, width]``, row ``i`` of ``lens[i]`` bytes); ``lcp[0] = 0``. Returns 0."""
    n = rows.shape[0]
    if n:
        lcp[0] = 0
    for i in range(1, n):
        m = min(lens[i], lens[i - 1])
        k = 0
        while k < m and rows[i, k] == rows[i - 1, k]:
            k += 1
        lcp[i] = k
    return 0


@nb.njit(cache=True, nogil=True)
def range_minima(lcp, pos, out):  # type: ignore[no-untyped-def]
    """``out[j]`` = the least of ``lcp[pos[j - 1] + 1 .. pos[j]]`` (``pos`` ascending):
    the common prefix of sorted rows ``pos[j - 1]`` and ``pos[j]``; ``out[0] = 0``.
    Returns 0."""
    if pos.shape[0]:
        out[0] = 0
    for j in range(1, pos.shape[0]):
        m = lcp[pos[j]]
        for i in range(pos[j - 1] + 1, pos[j]):
            if lcp[i] < m:
                m = lcp[i]
        out[j] = m
    return 0


@nb.njit(cache=True, nogil=True)
def lay_out_trie(ids, lens, rows, lcp, byte, token, depth, end, dup_next, opened):  # type: ignore[no-untyped-def]
    """Write the preorder trie of sorted tokens (``SortedTokens``: ``ids``, ``lens``,
    ``rows``, ``lcp``) into ``byte``, ``token``, ``depth`` and ``end`` (node 0 the root,
    ``sum(lens - lcp) + 1`` nodes) and the chains of equal tokens into ``dup_next``.

    Token ``i`` adds a node per byte past ``lcp[i]`` (none: the bytes of token ``i - 1``,
    chained after it in ``dup_next``); before that, the nodes still open deeper than
    ``lcp[i]`` end where its nodes begin. ``opened``: ``int64[max_len + 1]`` scratch, the
    open node at each depth. Returns the number of nodes written."""
    p = 1
    top = 0  # the depth of the deepest open node
    byte[0] = 0
    token[0] = -1
    depth[0] = 0
    for i in range(ids.shape[0]):
        keep = lcp[i]
        while top > keep:
            end[opened[top]] = p
            top -= 1
        n = lens[i]
        if n == keep:
            dup_next[ids[i - 1]] = ids[i]
            continue
        for d in range(keep + 1, n + 1):
            byte[p] = rows[i, d - 1]
            token[p] = -1
            depth[p] = d
            opened[d] = p
            p += 1
        token[p - 1] = ids[i]
        top = n
    while top > 0:
        end[opened[top]] = p
        top -= 1
    end[0] = p
    return p


@nb.njit(cache=True, nogil=True)
def run_rows(rows, lens, table, start, out):  # type: ignore[no-untyped-def]
    """``out[i]`` = the state DFA ``table`` (``int32[states, 256]``, every entry a state)
    reaches reading row ``i``'s ``lens[i]`` bytes from ``start``. Returns 0."""
    for i in range(rows.shape[0]):
        s = start
        for k in range(lens[i]):
            s = table[s, rows[i, k]]
        out[i] = s
    return 0


@nb.njit(cache=True, nogil=True)
def pack_nodes(end, depth, byte, token, dup_next, has_dups, out):  # type: ignore[no-untyped-def]
    """``out[p]`` = ``end[p] << 32 | depth[p] << 8 | byte[p]``, or-ed with ``has_dups``
    where node ``p``'s token has others of the same bytes: a trie node as one ``int64``
    word (the engine's walk reads these: ``engine.slices.packed_trie``). Returns 0."""
    for p in range(end.shape[0]):
        w = (np.int64(end[p]) << 32) | (np.int64(depth[p]) << 8) | np.int64(byte[p])
        t = token[p]
        if t >= 0 and dup_next[t] >= 0:
            w |= has_dups
        out[p] = w
    return 0
