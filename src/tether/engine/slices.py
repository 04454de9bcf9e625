"""Per-vocabulary token index: the trie split into *slices* (seed 004).

A slice is the set of tokens whose bytes are a UTF-8 prefix of a string of "text"
characters — every character but ``"``, ``\\``, the C0 controls and DEL (the
characters a JSON string must escape) and U+2028 / U+2029 (which an ECMA ``.``
refuses) — grouped by byte length (default buckets ``1-8``, ``9-16``, ``17+``). Every
other token is in the *rest*. Each part gets its own TokenTrie and each slice its
precomputed mask.

When the lexer sits in a state from which *every* string of text characters of up to
``k`` bytes (whole characters, or a cut-off last character) keeps the lexeme alive —
inside a JSON string body, say — every token of the slices no longer than ``k`` is
allowed without a walk: the mask ORs the slice masks and walks only the rest (a few
thousand tokens of Gemma's 262,144). ``walk.containment_depth`` finds ``k`` by a breadth-
first search over (lexer state, UTF-8 decoder state) pairs; it is cached per lexer
state. The test is exact (no token is added that the walk would reject) because the
checked set of strings contains every token of the slice. Buckets are fine-grained (one
per byte length up to 16) so that a bounded string (``maxLength``) that allows ``k`` more
bytes still takes every slice up to ``k`` from one precomputed union mask.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, replace
from itertools import accumulate

import numpy as np
from numpy.typing import NDArray

from tether.errors import ConstraintError
from tether.regex import ANY_CHAR
from tether.regex.ast import alt, byte_set, complement, intersect, literal
from tether.tokens import trie_cache
from tether.tokens.bitmask import allocate_mask
from tether.tokens.trie import SortedTokens, TokenTrie
from tether.tokens.vocabulary import Vocabulary

DEFAULT_BUCKETS: tuple[int, ...] = (*range(1, 17), 20, 24, 32, 40, 44)
_INDEX_FORMAT = "vocab-index-2"  # part of the on-disk cache key: bump when the parts change
INF = 1 << 30

# UTF-8 decoder states: 0 = between characters; others = inside a character.
# _UTF8[state] = (lo, hi, next) ranges of allowed bytes (RFC 3629, no surrogates).
# Text leaves out U+2028 and U+2029 as well (E2 80 A8, E2 80 A9: _E2, _E2_80): an ECMA
# regex's ``.`` refuses them (line terminators), and a JSON Schema ``pattern`` is ECMA, so
# with them in the alphabet a string such as ``"pattern": "^.+$"`` keeps no text of three
# bytes alive for sure, its slices are never taken whole and every mask in it walks the
# whole trie (about 5 ms). Tokens holding them (a handful) are in the rest, walked.
# (At most 16 states: ``_kernels.row_targets`` packs one in 4 bits.)
_B, _N1, _N2, _N3, _E0, _ED, _F0, _F4, _E2, _E2_80 = range(10)
UTF8_BETWEEN = _B  # the decoder state between characters (``walk.containment_depth``'s start)
_UTF8: list[list[tuple[int, int, int]]] = [
    [(0x20, 0x21, _B), (0x23, 0x5B, _B), (0x5D, 0x7E, _B), (0xC2, 0xDF, _N1), (0xE0, 0xE0, _E0),
     (0xE1, 0xE1, _N2), (0xE2, 0xE2, _E2), (0xE3, 0xEC, _N2), (0xED, 0xED, _ED),
     (0xEE, 0xEF, _N2), (0xF0, 0xF0, _F0), (0xF1, 0xF3, _N3), (0xF4, 0xF4, _F4)],
    [(0x80, 0xBF, _B)],
    [(0x80, 0xBF, _N1)],
    [(0x80, 0xBF, _N2)],
    [(0xA0, 0xBF, _N1)],
    [(0x80, 0x9F, _N1)],
    [(0x90, 0xBF, _N2)],
    [(0x80, 0x8F, _N2)],
    [(0x80, 0x80, _E2_80), (0x81, 0xBF, _N1)],
    [(0x80, 0xA7, _B), (0xAA, 0xBF, _B)],
]
# per decoder state: (bytes array, next-state array); UTF8_NEED: those bytes as a 256-bit int
UTF8_MOVES: list[tuple[NDArray[np.intp], NDArray[np.intp]]] = []
for _ranges in _UTF8:
    _bs = np.concatenate([np.arange(lo, hi + 1) for lo, hi, _ in _ranges])
    _ns = np.concatenate([np.full(hi - lo + 1, nx) for lo, hi, nx in _ranges])
    UTF8_MOVES.append((_bs.astype(np.intp), _ns.astype(np.intp)))


# the same decoder as a dense DFA table over bytes; _REJECT absorbs every wrong byte
_REJECT = len(_UTF8)
_UTF8_TABLE = np.full((_REJECT + 1, 256), _REJECT, np.int32)
for _st, _ranges in enumerate(_UTF8):
    for _lo, _hi, _nx in _ranges:
        _UTF8_TABLE[_st, _lo : _hi + 1] = _nx


UTF8_NEED = [sum(1 << int(b) for b in bs) for bs, _ in UTF8_MOVES]
ASCII_TEXT = np.asarray([b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C)], np.intp)
ASCII_TEXT_BYTES = sum(1 << int(b) for b in ASCII_TEXT)
# the same alphabet as a regex: one text character (what ``_UTF8`` reads from state 0)
TEXT_CHAR = intersect(ANY_CHAR, complement(byte_set(range(0x20), 0x22, 0x5C, 0x7F)),
                      complement(alt(literal("\u2028"), literal("\u2029"))))


def is_text_prefix(data: bytes) -> bool:
    """True if ``data`` is whole text characters, possibly ending in a cut-off one."""
    if not data:
        return False
    st = _B
    for b in data:
        for lo, hi, nx in _UTF8[st]:
            if lo <= b <= hi:
                st = nx
                break
        else:
            return False
    return True


@dataclass(frozen=True, eq=False)
class Slice:
    """Tokens of the text class with ``lo <= len <= hi`` bytes: their trie and mask."""

    lo: int
    hi: int
    trie: TokenTrie
    mask: NDArray[np.uint32]
    n_tokens: int


class VocabIndex:
    """Everything the engine precomputes once per vocabulary (cached by fingerprint).

    Attributes:
        vocab: the vocabulary.
        trie: the full trie (used when slices are off).
        rest: trie of the tokens in no slice.
        slices: the slices, shortest first.
        eos_ids: ``int64`` array of EOS ids.
        n_words: mask width in ``uint32`` words (``ceil(vocab.size / 32)``).
    """

    def __init__(self, vocab: Vocabulary, buckets: tuple[int, ...] = DEFAULT_BUCKETS) -> None:
        self.vocab = vocab
        size = vocab.size
        self.n_words = (size + 31) // 32
        self.eos_ids = np.asarray(sorted(vocab.eos_ids), np.int64)
        # (word, bit) of each EOS id in a mask, as Python ints (OR-ed in after a walk)
        self.eos_bits: tuple[tuple[int, int], ...] = tuple(
            (int(e) >> 5, 1 << (int(e) & 31)) for e in self.eos_ids)
        key = f"{_INDEX_FORMAT} {vocab.fingerprint} {tuple(buckets)}"
        cache = size >= trie_cache.MIN_TOKENS
        if not (cache and self._load(key)):
            self._build(vocab, buckets)
            if cache:
                self._save(key)
        self.max_slice_len = max((s.trie.max_depth for s in self.slices), default=0)
        # union[j] = OR of the masks of slices[:j + 1]
        self.union: list[NDArray[np.uint32]] = []
        acc = allocate_mask(size)
        for sl in self.slices:
            acc = acc | sl.mask
            self.union.append(acc)
        self.slice_tops = [min(sl.hi, sl.trie.max_depth) for sl in self.slices]
        # running maximum: the slices taken at a depth are those before the first top
        # above it (``_taken``, a bisection)
        self._tops_upto = list(accumulate(self.slice_tops, max))
        self._build_parts()
        self._walk_parts: dict[int, tuple[TokenTrie, NDArray[np.int64], int, int,
                                          NDArray[np.uint32] | None]] = {}
        self._packed: dict[int, tuple[TokenTrie, NDArray[np.int64]]] = {}
        self.packed(self.trie)  # (raises ConstraintError here, for a token too long)
        self.packed(self.parts)

    def _build(self, vocab: Vocabulary, buckets: tuple[int, ...]) -> None:
        """Sort the vocabulary once; classify, bucket and lay out every part from it."""
        size = vocab.size
        # one sort of the vocabulary serves the full trie and every part
        ordered = SortedTokens.from_vocabulary(vocab)
        self.trie = ordered.trie(vocab.fingerprint)
        self.dup_next = self.trie.dup_next
        state = ordered.final_states(_UTF8_TABLE)
        text = state != _REJECT
        kept = ~np.isin(ordered.ids, self.eos_ids)  # EOS tokens are in no part
        bounds = [*buckets, INF]
        bucket = np.full(len(ordered), len(bounds) - 1, np.int64)  # first k: len <= bounds[k]
        for k in range(len(bounds) - 2, -1, -1):
            bucket[ordered.lens <= bounds[k]] = k
        self.rest = ordered.select(~text & kept).trie()
        self._text_ids = np.zeros(size, np.bool_)  # whole text characters only
        self._text_ids[ordered.ids[(state == _B) & kept]] = True
        self.slices: list[Slice] = []
        lo = 1
        for k, hi in enumerate(bounds):
            part = ordered.select(text & kept & (bucket == k))
            mask = allocate_mask(size)
            ids = part.ids
            if len(ids):
                np.bitwise_or.at(mask, ids >> 5, (np.uint32(1) << (ids & 31).astype(np.uint32)))
            self.slices.append(Slice(lo, hi, part.trie(), mask, len(part)))
            lo = hi + 1
        self.slices = [s for s in self.slices if s.n_tokens]

    def _save(self, key: str) -> None:
        """Write the tries, slice bounds, masks and text ids to the on-disk cache."""
        tries = {"trie": self.trie, "rest": self.rest}
        tries.update({f"s{k}": sl.trie for k, sl in enumerate(self.slices)})
        meta = np.array([[sl.lo, sl.hi, sl.n_tokens] for sl in self.slices], np.int64)
        masks = np.array([sl.mask for sl in self.slices], np.uint32).reshape(-1, self.n_words)
        trie_cache.save(key, tries, {"slices": meta.reshape(-1, 3), "masks": masks,
                                     "text_ids": self._text_ids})

    def _load(self, key: str) -> bool:
        """Take the parts from the on-disk cache; False (nothing set) unless every array
        has the shape and dtype this vocabulary needs (the tries are checked by
        ``trie_cache.load``)."""
        size = self.vocab.size
        got = trie_cache.load(key, size)
        if got is None:
            return False
        tries, arrays = got
        meta, masks, text_ids = (arrays.get(n) for n in ("slices", "masks", "text_ids"))
        if meta is None or masks is None or text_ids is None:
            return False
        m = len(meta)
        if not (meta.dtype == np.int64 and meta.shape == (m, 3)
                and masks.dtype == np.uint32 and masks.shape == (m, self.n_words)
                and text_ids.dtype == np.bool_ and text_ids.shape == (size,)
                and set(tries) == {"trie", "rest", *(f"s{k}" for k in range(m))}):
            return False
        self.trie = replace(tries["trie"], fingerprint=self.vocab.fingerprint)
        self.dup_next = self.trie.dup_next
        self.rest = tries["rest"]
        self._text_ids = text_ids
        self.slices = [Slice(int(lo), int(hi), tries[f"s{k}"], masks[k].copy(), int(n))
                       for k, (lo, hi, n) in enumerate(meta.tolist())]
        return True

    @property
    def text_ids(self) -> NDArray[np.bool_]:
        """``bool[size]``: ``is_text_token`` of every token id (read only)."""
        return self._text_ids

    def is_text_token(self, token: int) -> bool:
        """The token is whole text characters (a slice token not cut inside a character)."""
        return bool(self._text_ids[token])

    def _taken(self, depth_ok: int) -> int:
        """How many slices, shortest first, are taken whole at containment depth ``depth_ok``
        (the slices before the first whose longest token is longer)."""
        return bisect_right(self._tops_upto, depth_ok)

    def parts_to_walk(self, depth_ok: int) -> tuple[TokenTrie, NDArray[np.int64], int, int,
                                                     NDArray[np.uint32] | None]:
        """``(trie, nodes, lo, hi, union)``: the nodes ``lo..hi-1`` of ``trie`` (whole
        subtrees of the root; ``nodes`` its ``packed`` words) hold every token to walk when
        every text string of up to ``depth_ok`` bytes is safe, and ``union`` is the mask of
        the slices taken whole (None: the full trie is walked)."""
        got = self._walk_parts.get(depth_ok)  # (a few depths recur: every mask asks)
        if got is None:
            j = self._taken(depth_ok)
            if j == 0 or depth_ok <= self._full_upto:
                t = self.trie
                got = (t, self.packed(t), 1, t.n_nodes, None)
            else:
                t = self.parts
                got = (t, self.packed(t), 1, self._parts_stop[j], self.union[j - 1])
            if len(self._walk_parts) < 1024:
                self._walk_parts[depth_ok] = got
        return got

    def packed(self, trie: TokenTrie) -> NDArray[np.int64]:
        """``trie`` (``self.trie`` or ``self.parts``) as the walk kernel reads it
        (``packed_trie``: one ``int64`` per node), made with the index for its two tries
        (about 5 MB and a few milliseconds each for Gemma 3)."""
        got = self._packed.get(id(trie))
        if got is None or got[0] is not trie:
            got = (trie, packed_trie(trie))
            self._packed[id(trie)] = got
        return got[1]

    def _build_parts(self) -> None:
        """One flat trie ``[rest, slices[-1], ..., slices[0]]`` (roots dropped, a common
        root 0): the tries to walk for any ``j`` are the prefix ``1.._parts_stop[j]``."""
        tries = [self.rest] + [sl.trie for sl in reversed(self.slices)]
        n = 1 + sum(t.n_nodes - 1 for t in tries)
        byte = np.zeros(n, np.uint8)
        depth = np.zeros(n, np.int32)
        token = np.full(n, -1, np.int32)
        end = np.empty(n, np.int32)
        end[0] = n
        stops = []
        at = 1
        for t in tries:
            m = t.n_nodes - 1
            byte[at : at + m] = t.byte[1:]
            depth[at : at + m] = t.depth[1:]
            token[at : at + m] = t.token[1:]
            end[at : at + m] = t.end[1:] + (at - 1)
            at += m
            stops.append(at)
        self.parts = TokenTrie(byte, token, self.dup_next, end, depth,
                               max(t.max_depth for t in tries), n, self.vocab.size,
                               self.vocab.fingerprint)
        # _parts_stop[j]: end of rest + slices[j:] (slices[j] is tries[len - j])
        self._parts_stop = [stops[len(self.slices) - j] for j in range(len(self.slices) + 1)]
        self._full_upto = self._full_walk_limit(tries)

    def _full_walk_limit(self, tries: list[TokenTrie]) -> int:
        """The largest ``k`` up to which walking the full trie is the shorter walk.

        With ``k`` small, the slices taken whole are few and short, and the parts left
        repeat every short prefix once per bucket: the walk of a state that keeps every
        text string of ``k`` bytes alive and kills at byte ``k + 1`` visits the nodes of
        depth ``<= k + 1`` of the tries walked. For Gemma 3 that is 227k nodes of the
        parts against 148k of the full trie at ``k = 4``; the parts win from ``k = 6``.
        Both walks give the same mask; this picks the one with fewer such nodes."""
        top = max(t.max_depth for t in (self.trie, *tries)) + 2
        full = np.cumsum(np.bincount(self.trie.depth[1:], minlength=top))
        walked = np.zeros(top, np.int64)  # rest + slices[j:], by depth
        per_j = []
        for t in tries:  # rest, slices[-1], ..., slices[0]
            walked = walked + np.bincount(t.depth[1:], minlength=top)
            per_j.append(np.cumsum(walked))
        per_j.reverse()  # per_j[j]: the parts walked when slices[:j] are taken whole
        upto = 0
        for k in range(1, top - 1):
            if full[k + 1] > per_j[self._taken(k)][k + 1]:
                break
            upto = k
        return upto


_CACHE: OrderedDict[tuple[str, tuple[int, ...]], VocabIndex] = OrderedDict()


MAX_TOKEN_BYTES = 0xFFFF  # the depth field of a packed trie word (packed_trie)
HAS_DUPS = 1 << 24  # a packed trie word: the node's token has duplicates (follow dup_next)


def packed_trie(trie: TokenTrie) -> NDArray[np.int64]:
    """The trie as the walk kernel (``_kernels.walk_lexemes``) reads it: per node the
    ``int64`` word ``end << 32 | depth << 8 | byte``, with ``HAS_DUPS`` where the node's
    token has others of the same bytes (``dup_next``). ``end`` fits (the trie's arrays
    are ``int32``); ``depth`` is checked.

    Raises:
        ConstraintError: a token longer than ``MAX_TOKEN_BYTES`` bytes.
    """
    from tether.tokens import _kernels

    if trie.max_depth > MAX_TOKEN_BYTES:
        raise ConstraintError(f"a token of {trie.max_depth} bytes: token masks take tokens "
                              f"of at most {MAX_TOKEN_BYTES} bytes")
    out: NDArray[np.int64] = np.empty(trie.n_nodes, np.int64)
    _kernels.pack_nodes(trie.end, trie.depth, trie.byte, trie.token, trie.dup_next,
                        np.int64(HAS_DUPS), out)
    return out


def vocab_index(vocab: Vocabulary, buckets: tuple[int, ...] = DEFAULT_BUCKETS) -> VocabIndex:
    """The (cached) VocabIndex of ``vocab``. Cost the first time, for 262k tokens: about
    0.2 s of CPU to build (numba started), or 0.05 s to read back from the on-disk cache
    (``tether.tokens.trie_cache``, vocabularies of 32768 tokens or more)."""
    key = (vocab.fingerprint, tuple(buckets))
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = VocabIndex(vocab, buckets)
        while len(_CACHE) > 4:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return hit
