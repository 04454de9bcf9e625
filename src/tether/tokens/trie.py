"""TokenTrie: every token's bytes laid out as a flat preorder trie (llguidance's toktrie).

1. Sort the non-special tokens by their bytes (ties by id) with numpy, and compute the
   longest common prefix (LCP) of each with its predecessor (a kernel).
2. Token ``i`` in sorted order adds one node per byte past its LCP; emitting those
   nodes in sorted order is exactly the preorder of the trie.
3. A node's subtree ends where the first later token has an LCP shorter than the
   node's depth. Steps 2 and 3 are one pass of a kernel (``_kernels.lay_out_trie``)
   that keeps the node open at each depth.

``SortedTokens`` keeps the sorted tokens, so that the tries of any subsets of a
vocabulary (the engine's slices) come from one sort.

The walk kernel (``tether.tokens.walk``) reads these arrays: a dead node skips its whole
subtree with ``p = end[p]``. Sorting the Gemma 3 vocabulary (262,144 tokens, about 590k
nodes) takes about 60 ms of CPU (numba started), laying out its trie a few milliseconds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from tether.tokens.vocabulary import Vocabulary

_CACHE: OrderedDict[str, TokenTrie] = OrderedDict()

_CACHE_SIZE = 4


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """Flat preorder arrays of the byte trie of a vocabulary. Node 0 is the root.

    Attributes:
        byte: ``uint8[n_nodes]``, the byte on the edge into each node (0 for the root).
        token: ``int32[n_nodes]``, the lowest token id whose bytes end at this node, or -1.
        dup_next: ``int32[vocab_size]``, for a token id, the next id (ascending) with the
            very same bytes, or -1; follow it from ``token[node]`` to get them all.
        end: ``int32[n_nodes]``, one past the last node of the node's subtree.
        depth: ``int32[n_nodes]``, bytes from the root (root 0).
        max_depth: the longest token, in bytes.
        n_nodes: number of nodes, root included.
        vocab_size: number of token ids (mask width in bits is ``ceil(vocab_size/32)*32``).
        fingerprint: the vocabulary's fingerprint.

    Special tokens and tokens with no bytes are not in the trie: a walk never allows them.
    """

    byte: NDArray[np.uint8]
    token: NDArray[np.int32]
    dup_next: NDArray[np.int32]
    end: NDArray[np.int32]
    depth: NDArray[np.int32]
    max_depth: int
    n_nodes: int
    vocab_size: int
    fingerprint: str

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary) -> TokenTrie:
        """Build (or fetch from a small cache keyed by fingerprint) the trie of ``vocab``."""
        key = vocab.fingerprint
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
        trie = SortedTokens.from_vocabulary(vocab).trie(key)
        _CACHE[key] = trie
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return trie

    @property
    def n_tokens(self) -> int:
        """Alias of ``vocab_size``."""
        return self.vocab_size

    def find(self, data: bytes) -> int:
        """The node reached by ``data`` from the root, or -1 if no token starts with it.

        Cost: O(len(data) * fan-out), plain Python; for tests and debugging.
        """
        node = 0
        for b in data:
            child = node + 1
            stop = int(self.end[node])
            while child < stop and self.byte[child] != b:
                child = int(self.end[child])
            if child >= stop:
                return -1
            node = child
        return node

    def tokens_at(self, node: int) -> list[int]:
        """All token ids whose bytes end exactly at ``node`` (duplicates included)."""
        out = []
        t = int(self.token[node])
        while t >= 0:
            out.append(t)
            t = int(self.dup_next[t])
        return out


def _sort_rows(words: NDArray[np.uint64], lens: NDArray[np.int64]) -> NDArray[np.int64]:
    """The stable order of zero-padded rows (``words``: big-endian 64-bit columns, rows in
    ascending id order) by their bytes, then ``lens``. One fast unstable sort on the first
    column, then the rows that tie on it (tokens sharing their first 8 bytes: a minority)
    sorted again among themselves, stably, on every column: the ties of the first sort
    are contiguous runs in ascending order of that column, so the second order, ascending
    by it too, fills exactly their positions."""
    head = words[:, 0].astype(np.uint64)  # native byte order
    order = np.argsort(head)
    first = head[order]
    same = first[1:] == first[:-1]
    tied = np.zeros(len(order), np.bool_)
    tied[1:] = same
    tied[:-1] |= same
    at = np.flatnonzero(tied)
    if len(at):
        sub = np.sort(order[at])  # ascending rows: ascending ids, kept by the stable sort
        cols = words[sub]
        order[at] = sub[np.lexsort((lens[sub], *(cols[:, k] for k in
                                                 range(cols.shape[1] - 1, -1, -1))))]
    return order


def build_trie(
    tokens: list[bytes], special_ids: frozenset[int] | set[int] = frozenset(), *,
    fingerprint: str = "",
) -> TokenTrie:
    """Build a TokenTrie from token bytes; empty and special tokens are left out.

    Cost: a numpy sort and kernel passes over the tokens' bytes; no Python loop over tokens.
    """
    return SortedTokens.from_tokens(tokens, special_ids).trie(fingerprint)


@dataclass(frozen=True, eq=False)
class SortedTokens:
    """The non-empty, non-special tokens of a vocabulary in byte order (ties by id).

    One sort serves many tries: ``select`` keeps a subset in the same order (its common
    prefixes come from range minima of ``lcp``, no second sort), ``trie`` lays it out.

    Attributes:
        ids: ``int64[n]``, the token id of each row.
        lens: ``int64[n]``, the byte length of each row.
        rows: ``uint8[n, width]``, the bytes, zero-padded (``width >= lens.max()``).
        lcp: ``int64[n]``, the longest common prefix of each row with the previous one
            (0 for the first).
        size: the vocabulary size (width of ``dup_next``).
    """

    ids: NDArray[np.int64]
    lens: NDArray[np.int64]
    rows: NDArray[np.uint8]
    lcp: NDArray[np.int64]
    size: int

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary) -> SortedTokens:
        """The tokens of ``vocab`` but its special ones, sorted."""
        return cls.from_tokens(vocab.tokens, vocab.special_ids, vocab.token_lengths)

    @classmethod
    def from_tokens(
        cls, tokens: list[bytes], special_ids: frozenset[int] | set[int] = frozenset(),
        lengths: NDArray[np.int64] | None = None,
    ) -> SortedTokens:
        """Sort ``tokens`` (special and empty ones left out) with numpy; one list scan.
        ``lengths``, if given, are the tokens' byte lengths.

        Raises:
            ValueError: ``lengths`` that are not those of ``tokens``.
        """
        from tether.tokens import _kernels

        size = len(tokens)
        lens_all = (np.fromiter(map(len, tokens), np.int64, size) if lengths is None
                    else lengths)
        data = np.frombuffer(b"".join(tokens), np.uint8)
        lens_all = np.ascontiguousarray(lens_all, np.int64)
        if (lens_all.shape != (size,) or (size and int(lens_all.min()) < 0)
                or int(lens_all.sum()) != len(data)):
            raise ValueError("token lengths do not match the tokens")
        keep = lens_all > 0
        if special_ids:
            keep[np.fromiter(special_ids, np.int64, len(special_ids))] = False
        ids = np.flatnonzero(keep)
        if not len(ids):
            return cls(ids, ids.copy(), np.zeros((0, 0), np.uint8), ids.copy(), size)
        lens = lens_all[ids]
        max_len = int(lens.max())
        width = (max_len + 7) // 8 * 8
        # Zero-padded fixed-width rows, sorted as big-endian 64-bit columns (much faster
        # than sorting byte strings). Padding hides trailing NUL bytes, so the true length
        # breaks ties; the sort is stable, so equal tokens stay in ascending id order. The
        # result is the plain lexicographic order of the byte strings.
        starts = np.zeros(size, np.int64)
        np.cumsum(lens_all[:-1], out=starts[1:])
        padded = np.zeros((len(ids), width), np.uint8)
        _kernels.pad_rows(data, starts, lens_all, ids, padded)
        words = padded.view(">u8")
        order = _sort_rows(words, lens)
        ids, lens = ids[order], lens[order]
        rows = np.zeros_like(padded)  # again, in order (a gather of rows is slower)
        _kernels.pad_rows(data, starts, lens_all, ids, rows)
        lcp = np.empty(len(ids), np.int64)
        _kernels.common_prefixes(rows, lens, lcp)
        return cls(ids, lens, rows, lcp, size)

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, keep: NDArray[np.bool_]) -> SortedTokens:
        """The rows where ``keep`` (a ``bool[n]`` over rows) holds, in the same order."""
        from tether.tokens import _kernels

        pos = np.flatnonzero(keep)
        # LCP of two sorted strings = minimum of the LCPs of the rows between them
        lcp = np.empty(len(pos), np.int64)
        _kernels.range_minima(self.lcp, pos, lcp)
        return SortedTokens(self.ids[pos], self.lens[pos], self.rows[pos], lcp, self.size)

    def final_states(self, table: NDArray[np.int32], start: int = 0) -> NDArray[np.int32]:
        """The state a DFA ``table`` (``int32[states, 256]``, every entry a state; make
        rejection an absorbing state) reaches reading each row's bytes from ``start``.

        Cost: one kernel pass over the tokens' bytes.

        Raises:
            ValueError: ``table`` is not ``[states, 256]`` of states, or ``start`` is not one.
        """
        from tether.tokens import _kernels

        table = np.ascontiguousarray(table, np.int32)
        states = table.shape[0] if table.ndim == 2 else 0
        if (table.ndim != 2 or table.shape[1] != 256 or not 0 <= start < states
                or int(table.min()) < 0 or int(table.max()) >= states):
            raise ValueError("final_states needs an int32[states, 256] table of states "
                             "and a start state")
        out = np.empty(len(self.ids), np.int32)
        _kernels.run_rows(self.rows, self.lens, table, start, out)
        return out

    @property
    def width(self) -> int:
        """Columns of ``rows``."""
        return int(self.rows.shape[1])

    def trie(self, fingerprint: str = "") -> TokenTrie:
        """Lay these tokens out as a TokenTrie (see the module docstring)."""
        from tether.tokens import _kernels

        size = self.size
        dup_next = np.full(size, -1, np.int32)
        n = len(self.ids)
        if not n:
            root = np.zeros(1, np.int32)
            return TokenTrie(np.zeros(1, np.uint8), np.full(1, -1, np.int32), dup_next,
                             np.ones(1, np.int32), root, 0, 1, size, fingerprint)
        ids, lens, lcp = self.ids, self.lens, self.lcp
        max_len = int(lens.max())
        total = int((lens - lcp).sum()) + 1
        byte = np.empty(total, np.uint8)
        token = np.empty(total, np.int32)
        depth = np.empty(total, np.int32)
        end = np.empty(total, np.int32)
        _kernels.lay_out_trie(ids, lens, self.rows, lcp, byte, token, depth, end, dup_next,
                              np.empty(max_len + 1, np.int64))
        return TokenTrie(byte, token, dup_next, end, depth, max_len, total, size, fingerprint)
