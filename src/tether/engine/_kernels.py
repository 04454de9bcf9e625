"""The engine's numba kernels (the only numba module of the engine layer).

Kernels take fixed-dtype arrays and ints, write into caller-owned arrays, allocate
nothing and return an int. Their meaning is stated as plain Python in
``tether.engine.walk`` (the driver) and kept runnable in the tests
(``tests/unit/engine/engine_reference.py``). The kernel returns to Python on an UNKNOWN
entry and is resumed at the same trie node once Python filled it. The kernels' parameters
carry no annotations (numba types them from the arrays passed), hence their narrow
``type: ignore[no-untyped-def]``.

Table conventions (all ``int32``): a value ``>= 0`` is a state or node id,
``DEAD = -1`` means "no transition", ``UNKNOWN = -2`` means "not computed yet".
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numba as nb
import numpy as np
from numba import types
from numba.extending import intrinsic
from numpy.typing import NDArray

from tether.engine.slices import HAS_DUPS

DEAD = -1
UNKNOWN = -2


NOT_YET = -3  # a walk stack's level: the lexeme's next start not looked up yet


@nb.njit(cache=True, nogil=True)
def walk_lexemes(nodes, token, dup_next, table, accid, lazyf, trans, nstart,  # type: ignore[no-untyped-def]
                 stacks, mask, start, stop):  # fmt: skip
    """Set the bit of every token of the trie nodes ``start..stop-1`` (whole subtrees of
    the root, or the rest of a walk resumed at ``start``) that the state at
    ``stacks[0, 0], stacks[1, 0]`` (lexer state, node) can consume. Inside a lexeme follow
    ``table``; when a byte kills the lexeme and its state accepts (``accid[state] >= 0``),
    follow the parser edge ``trans[node, accid]`` and restart the lexer at
    ``nstart[node']``. Return -1 when done, or the trie node whose step needs an UNKNOWN
    entry (the stacks then hold its path: fill the entry and call again with ``start`` =
    that node).

    ``stacks`` (``int32[4, depth + 1]``), per trie depth ``d`` of the path: the lexer
    state (row 0) and node (row 1) after the path's first ``d`` bytes, and the lexer
    state a byte that ends that lexeme restarts from with its node (rows 2 and 3:
    ``nstart[trans[node, accid[state]]]`` and that node, DEAD when the lexeme cannot end
    there, ``NOT_YET`` until a child first needs it). Looked up once per trie node
    instead of once per child: most children of a node whose lexeme may end are dead
    bytes, each of which would read ``accid``, ``trans`` and ``nstart`` again. Only
    known entries are kept (an UNKNOWN one returns first), and entries never change, so
    the rows stay valid across a resume; the caller sets ``stacks[2, 0] = NOT_YET``.

    ``nodes``: the trie as ``int64`` words ``end << 32 | HAS_DUPS? | depth << 8 | byte``
    (``slices.packed_trie``): a dead child is skipped on one read, one cache line, where three arrays
    cost three (kernel time on the miss-free walks of the dev schemas about 12 % lower);
    ``HAS_DUPS`` marks the nodes whose token has others of the same bytes (110 of
    Gemma 3's 256k), so a reached token costs no random read of ``dup_next`` (3 %).

    ``lazyf``: None for a grammar without lazy terminals (numba compiles that case
    apart, without the test below), else per lexer state: after each byte, a state that
    accepts a lazy terminal (``lazyf[state] == 1``) ends its lexeme at once (the state
    becomes ``nstart[trans[node, accid[state]]]``)."""
    p = start
    while p < stop:
        v = nodes[p]
        d = (v >> 8) & 0xFFFF
        ls = stacks[0, d - 1]
        b = v & 0xFF
        s = table[ls, b]
        if s >= 0:
            pn = stacks[1, d - 1]
        else:
            if s == UNKNOWN:
                return p
            s0 = stacks[2, d - 1]
            if s0 == NOT_YET:
                a = accid[ls]
                if a < 0:
                    if a == UNKNOWN:
                        return p
                    s0 = DEAD
                else:
                    c = trans[stacks[1, d - 1], a]
                    if c < 0:
                        if c == UNKNOWN:
                            return p
                        s0 = DEAD
                    else:
                        s0 = nstart[c]
                        stacks[3, d - 1] = c
                stacks[2, d - 1] = s0
            if s0 < 0:
                p = v >> 32
                continue
            s = table[s0, b]
            if s < 0:
                if s == UNKNOWN:
                    return p
                p = v >> 32
                continue
            pn = stacks[3, d - 1]
        if lazyf is not None:
            z = lazyf[s]
            if z != 0:
                if z == UNKNOWN:
                    return p
                c = trans[pn, accid[s]]
                if c < 0:
                    if c == UNKNOWN:
                        return p
                    p = v >> 32
                    continue
                s = nstart[c]
                pn = c
        stacks[0, d] = s
        stacks[1, d] = pn
        stacks[2, d] = NOT_YET
        t = token[p]  # set_tokens, with dup_next read only where the word says so
        if t >= 0:
            mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            if v & HAS_DUPS:
                t = dup_next[t]
                while t >= 0:
                    mask[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
                    t = dup_next[t]
        p += 1
    return -1


@nb.njit(cache=True)
def token_moves(table, accid, lazyf, trans, nstart, data, ls, node, out):  # type: ignore[no-untyped-def]
    """Follow the bytes ``data`` from lexer state ``ls`` and parser node ``node`` by the
    rules of ``StepTables.step_detail`` over filled entries only: inside a lexeme follow
    ``table``; where a byte kills the lexeme, scan it (``accid`` -> ``trans``) and start
    the next at ``nstart``; a state accepting a lazy terminal (``lazyf == 1``) ends its
    lexeme at once. The lexemes that change the node (those ``Matcher`` pushes on its
    parser) go to ``out`` (as long as twice ``data``), in order.

    Returns ``(ls, node, at lexeme start, lexemes in out, any lexeme ended, first lexeme,
    second lexeme)`` (the first two of ``out`` again, -1 where there are fewer: the
    caller reads them without slicing ``out``, about a microsecond of numpy on a fresh
    move), or ``ls`` = -1 as soon as anything is not known yet (an UNKNOWN entry,
    ``accid`` / ``lazyf`` not set for a state reached, a state or node outside the
    arrays) or a byte is refused: then the per-byte path decides (it fills and explains);
    -1 decides nothing.

    ``Matcher.consume``'s fast path, called under the constraint's lock (no entry is half
    written then). Holds the GIL: a call is shorter than its release would be."""
    n_states = table.shape[0]
    n_acc = min(accid.shape[0], lazyf.shape[0])
    n_nodes = min(trans.shape[0], nstart.shape[0])
    n_cols = trans.shape[1]
    k = 0
    ended = 0
    start = 0
    for i in range(len(data)):
        b = data[i]
        if ls < 0 or ls >= n_states or node < 0 or node >= n_nodes:
            return -1, node, 0, 0, 0, -1, -1
        s = table[ls, b]
        c = node
        if s < 0:  # the lexeme ends before b (DEAD), or UNKNOWN
            if s != DEAD or ls >= n_acc:
                return -1, node, 0, 0, 0, -1, -1
            a = accid[ls]
            if a < 0 or a >= n_cols:
                return -1, node, 0, 0, 0, -1, -1
            c = trans[node, a]
            if c < 0 or c >= n_nodes:
                return -1, node, 0, 0, 0, -1, -1
            s0 = nstart[c]
            if s0 < 0 or s0 >= n_states:
                return -1, node, 0, 0, 0, -1, -1
            s = table[s0, b]
            if s < 0:
                return -1, node, 0, 0, 0, -1, -1
            if c != node:
                out[k] = a
                k += 1
            ended = 1
        if s >= n_acc or accid[s] == UNKNOWN:
            return -1, node, 0, 0, 0, -1, -1
        z = lazyf[s]
        start = 0
        if z != 0:
            if z != 1:
                return -1, node, 0, 0, 0, -1, -1
            a = accid[s]  # a lazy terminal ends its lexeme right after b
            if a < 0 or a >= n_cols:
                return -1, node, 0, 0, 0, -1, -1
            c2 = trans[c, a]
            if c2 < 0 or c2 >= n_nodes:
                return -1, node, 0, 0, 0, -1, -1
            s = nstart[c2]
            if s < 0 or s >= n_states or s >= n_acc or accid[s] == UNKNOWN or lazyf[s] == UNKNOWN:
                return -1, node, 0, 0, 0, -1, -1
            if c2 != c:
                out[k] = a
                k += 1
            c = c2
            ended = 1
            start = 1
        ls = s
        node = c
    return ls, node, start, k, ended, out[0] if k > 0 else -1, out[1] if k > 1 else -1


@nb.njit(cache=True, nogil=True)
def nonzero_words(mask, idx, words):  # type: ignore[no-untyped-def]
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


@nb.njit(cache=True, nogil=True)
def row_min(table, state, cols):  # type: ignore[no-untyped-def]
    """The least entry of row ``state`` of ``table`` over the columns ``cols``: UNKNOWN
    if one is not filled, else DEAD if one is dead, else the least next state."""
    m = table[state, cols[0]]
    for i in range(1, cols.shape[0]):
        v = table[state, cols[i]]
        if v < m:
            m = v
    return m


@nb.njit(cache=True, nogil=True)
def row_targets(table, state, cols, nexts, out):  # type: ignore[no-untyped-def]
    """``row_min`` of ``cols`` if it is UNKNOWN or DEAD; else the distinct values of
    ``table[state, cols[i]] * 16 + nexts[i]`` (a next lexer state and a UTF-8 decoder
    state, below 16: ``walk.containment_depth``'s pairs) written to ``out`` (as long as
    ``cols``) in increasing order, and their number."""
    m = row_min(table, state, cols)
    if m < 0:
        return m
    k = 0
    for i in range(cols.shape[0]):
        key = np.int64(table[state, cols[i]]) * 16 + nexts[i]
        j = k
        while j > 0 and out[j - 1] > key:
            j -= 1
        if j > 0 and out[j - 1] == key:
            continue
        for q in range(k, j, -1):
            out[q] = out[q - 1]
        out[j] = key
        k += 1
    return k


# ---- batch rows (compute_masks) ------------------------------------------------------------
# How fill_rows writes one row of the batch.
ROW_ZERO = 0  # nothing allowed (after EOS)
ROW_DENSE = 1  # copy a stored mask of out2d's width
ROW_SPARSE = 2  # zero the row, then set the stored non-zero words


# ``_u32_view(addr, n)`` / ``_i32_view(addr, n)``: the ``n`` words at address ``addr`` as
# an array (the engine's own cached arrays, which ``write_stored``'s caller keeps alive)
if TYPE_CHECKING:  # what mypy sees: numba intrinsics carry no Python types

    def _u32_view(addr: int, n: int) -> NDArray[np.uint32]: ...

    def _i32_view(addr: int, n: int) -> NDArray[np.int32]: ...

elif nb.config.DISABLE_JIT:  # plain Python: ctypes pointers, which carray takes there too

    def _u32_view(addr, n):
        return nb.carray(ctypes.cast(int(addr), ctypes.POINTER(ctypes.c_uint32)), n)

    def _i32_view(addr, n):
        return nb.carray(ctypes.cast(int(addr), ctypes.POINTER(ctypes.c_int32)), n)

else:

    @intrinsic
    def _u32_at(typingctx, addr):
        """The address ``addr`` (an int64) as a pointer to uint32."""
        sig = types.CPointer(types.uint32)(types.int64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.uint32)))

        return sig, codegen

    @intrinsic
    def _i32_at(typingctx, addr):
        """The address ``addr`` (an int64) as a pointer to int32."""
        sig = types.CPointer(types.int32)(types.int64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int32)))

        return sig, codegen

    @nb.njit(cache=True, nogil=True, inline="always")
    def _u32_view(addr, n):
        return nb.carray(_u32_at(addr), n)

    @nb.njit(cache=True, nogil=True, inline="always")
    def _i32_view(addr, n):
        return nb.carray(_i32_at(addr), n)


@nb.njit(cache=True, nogil=True)
def copy_words(out, words):  # type: ignore[no-untyped-def]
    """A dense stored mask into ``out``: ``out[i] = words[i]`` for every word of ``out``
    (``words`` is as long). Returns the number of words copied."""
    w = out.shape[0]
    for i in range(w):
        out[i] = words[i]
    return w


@nb.njit(cache=True, nogil=True)
def scatter_words(out, idx, words):  # type: ignore[no-untyped-def]
    """A sparse stored mask into ``out``: zero ``out``, then ``out[idx[i]] = words[i]``
    (an index outside ``out`` is skipped). Returns the number of pairs."""
    w = out.shape[0]
    for i in range(w):
        out[i] = 0
    for i in range(idx.shape[0]):
        x = idx[i]
        if 0 <= x < w:
            out[x] = words[i]
    return idx.shape[0]


@nb.njit(cache=True, nogil=True)
def address_of(a):  # type: ignore[no-untyped-def]
    """The address of ``a``'s first element (what ``write_stored`` reads back)."""
    return a.ctypes.data


@nb.njit(cache=True, nogil=True)
def write_stored(out, kind, count, idx_at, words_at):  # type: ignore[no-untyped-def]
    """Write one stored mask into ``out`` (``uint32[w]``) from its addresses: ``kind`` is
    ``ROW_ZERO`` (zero ``out``), ``ROW_DENSE`` (``copy_words`` of the ``w`` words at
    ``words_at``) or ``ROW_SPARSE`` (``scatter_words`` of the ``count`` pairs at
    ``idx_at`` / ``words_at``).

    The addresses are those of the engine's own cached arrays (``CompiledConstraint``'s
    mask cache, ``StoredMask.spec()``), which the caller keeps referenced for the duration
    of the call. Returns the number of words copied or set."""
    w = out.shape[0]
    if kind == ROW_DENSE:
        return copy_words(out, _u32_view(words_at, w))
    if kind != ROW_SPARSE:
        for i in range(w):
            out[i] = 0
        return 0
    return scatter_words(out, _i32_view(idx_at, count), _u32_view(words_at, count))


@nb.njit(cache=True, nogil=True)
def fill_rows(out2d, spec, lo, hi):  # type: ignore[no-untyped-def]
    """``write_stored`` for the lines ``lo..hi-1`` of ``spec`` (``int64[k, 5]``: row of
    ``out2d``, kind, count, idx address, words address); a row outside ``out2d`` is
    skipped. Returns the number of rows written."""
    h = out2d.shape[0]
    done = 0
    for j in range(lo, hi):
        r = spec[j, 0]
        if 0 <= r < h:
            write_stored(out2d[r], spec[j, 1], spec[j, 2], spec[j, 3], spec[j, 4])
            done += 1
    return done

