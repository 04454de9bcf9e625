"""Fill a token mask for one (lexer state, parser node): the trie walk driver.

Meaning, as a plain loop (``tests/unit/engine/engine_reference.py`` keeps it runnable): a
token is allowed iff feeding its bytes one by one from the state succeeds, where one
byte from ``(ls, node)`` is

* ``table[ls, b]`` if that is not DEAD (the lexeme goes on: longest match), else
* if ``ls`` accepts the terminal set ``a``: ``node' = trans[node, a]`` (the parser
  scans the lexeme), then ``table[nstart[node'], b]`` (a new lexeme starts with ``b``);
* otherwise the token is rejected.

The numba kernel (``_kernels.walk_lexemes``) does this over a range of the flat trie,
skipping a dead subtree in one step, and returns to Python whenever an entry is
UNKNOWN; Python fills it (``StepTables.step``, with a parser taken from the node's
representative, ``StepTables.parser_at``) and resumes at the same trie node, its path
still on the kernel's stacks.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine.slices import (
    ASCII_TEXT,
    ASCII_TEXT_BYTES,
    INF,
    TEXT_CHAR,
    UTF8_BETWEEN,
    UTF8_MOVES,
    UTF8_NEED,
    VocabIndex,
)
from tether.engine.tables import UNKNOWN, StepTables
from tether.regex import interning, is_subset
from tether.regex.ast import (
    EMPTY,
    K_ALT,
    K_AND,
    K_BYTES,
    K_CONCAT,
    K_EMPTY,
    K_EPS,
    K_NOT,
    K_REPEAT,
    Node,
    first_bytes,
    intersect,
)
from tether.regex.ast import INF as REPEAT_INF
from tether.tokens.trie import TokenTrie

_kernels: ModuleType | None = None
_NOT_YET = -3  # _kernels.NOT_YET (that module loads numba: not imported here)


def kernels() -> ModuleType:
    """The module of numba kernels (``engine._kernels``), imported at the first call, so
    numba loads when a mask is first needed; callers on a hot path read the global
    ``_kernels`` first (``_kernels or kernels()``: no import statement per call)."""
    global _kernels
    if _kernels is None:
        from tether.engine import _kernels as k

        _kernels = k
    return _kernels


Stacks = NDArray[np.int32]


def new_stacks(max_depth: int) -> Stacks:
    """A walk's stacks (``int32[4, max_depth + 1]``: lexer state, node, and the next
    lexeme's start and node, by trie depth; see ``_kernels.walk_lexemes``) for tries up
    to ``max_depth``."""
    return np.empty((4, max_depth + 1), np.int32)


class Walk:
    """One trie walk in progress: the kernel's stacks and where it stopped.

    ``advance()`` runs the kernel over the tables as they are (no Python, no table
    written: safe on several threads at once, as long as no thread fills a table
    meanwhile), ``fill()`` fills the entry it stopped at (the Python slow path, one
    thread at a time), ``run()`` alternates the two on the calling thread."""

    __slots__ = ("trie", "nodes", "hi", "dup_next", "steps", "stacks", "mask", "p", "misses")

    def __init__(self, trie: TokenTrie, nodes: NDArray[np.int64], lo: int, hi: int,
                 dup_next: NDArray[np.int32], steps: StepTables, ls: int, node: int,
                 mask: NDArray[np.uint32], stacks: Stacks | None = None) -> None:
        self.trie, self.hi, self.dup_next, self.steps, self.mask = trie, hi, dup_next, steps, mask
        self.nodes = nodes  # the trie as the kernel reads it (VocabIndex.packed)
        if stacks is None or stacks.shape[1] <= trie.max_depth:
            stacks = new_stacks(trie.max_depth)
        self.stacks = stacks
        stacks[0, 0], stacks[1, 0], stacks[2, 0] = ls, node, _NOT_YET
        self.p = lo  # the next trie node; -1 when done
        self.misses = 0  # table entries filled by Python

    def advance(self) -> bool:
        """Run the kernel from ``p`` (the tables must be ``sync``-ed); True when done."""
        t, st = self.trie, self.steps
        self.p = (_kernels or kernels()).walk_lexemes(
            self.nodes, t.token, self.dup_next, st.table, st.accid,
            st.lazyf if st.lazy else None, st.trans, st.nstart, self.stacks, self.mask,
            self.p, self.hi)
        return self.p < 0

    def fill(self) -> None:
        """Fill the table entry the kernel stopped at (then ``sync`` and ``advance`` again)."""
        p = self.p
        d = int(self.trie.depth[p])
        self.misses += 1
        stacks = self.stacks
        self.steps.step(int(stacks[0, d - 1]), int(stacks[1, d - 1]), int(self.trie.byte[p]))

    def run(self) -> int:
        """Walk to the end on this thread; returns the entries Python filled.

        ``advance`` and ``fill`` in one loop over locals (a single-row mask not cached
        runs here: no attribute or import per round)."""
        walk_lexemes = (_kernels or kernels()).walk_lexemes
        t, st = self.trie, self.steps
        byte, depth, token, nodes, dup_next = t.byte, t.depth, t.token, self.nodes, self.dup_next
        stacks, mask, hi = self.stacks, self.mask, self.hi
        p = self.p
        while True:
            st.sync()  # a step may have grown the tables: read them again each round
            p = walk_lexemes(nodes, token, dup_next, st.table, st.accid,
                             st.lazyf if st.lazy else None, st.trans, st.nstart, stacks,
                             mask, p, hi)
            self.p = p
            if p < 0:
                return self.misses
            self.misses += 1
            d = int(depth[p])
            st.step(int(stacks[0, d - 1]), int(stacks[1, d - 1]), int(byte[p]))


def containment_depth(table_of: Callable[[], NDArray[np.int32]],
                      fill_row: Callable[[int, int], None], state: int, limit: int,
                      ends: Callable[[int], bool] | None = None, budget: int = 96,
                      closed: list[int] | None = None) -> int:
    """Largest ``k <= limit`` such that every text string of ``<= k`` bytes keeps the
    lexer alive from ``state`` (``INF`` if no text string ever kills it): the slices of
    tokens no longer than ``k`` are then allowed whole (``VocabIndex.parts_to_walk``).

    ``table_of()`` returns the current lexer table (re-read: filling may reallocate);
    ``fill_row(s, need)`` fills the classes of row ``s`` meeting the 256-bit int ``need``;
    ``ends(s)`` (optional) is True for states where the lexeme ends at once (lazy
    terminals), which count as leaving the lexeme.
    Breadth-first over (lexer state, UTF-8 state); after ``budget`` pairs it stops and
    returns the depth verified so far (a counted string, ``{0,N}``, has N levels). When
    the search ends because no new pair is left (``INF``: every text string keeps every
    pair it reaches alive), the lexer states it reached between two characters go to
    ``closed`` (when given): each of them is ``INF`` too. A row's
    entries over a decoder state's bytes are read by the kernels ``row_min`` /
    ``row_targets`` (one call instead of a few numpy operations of a microsecond each).
    """
    k = _kernels or kernels()
    row_min, row_targets = k.row_min, k.row_targets
    # quick reject: an ASCII text byte that kills the lexeme (most states outside strings)
    m = row_min(table_of(), state, ASCII_TEXT)
    if m == UNKNOWN:
        fill_row(state, ASCII_TEXT_BYTES)
        m = row_min(table_of(), state, ASCII_TEXT)
    if m < 0:
        return 0
    seen = {(state, UTF8_BETWEEN)}
    frontier = [(state, UTF8_BETWEEN)]
    out = np.empty(256, np.int64)
    depth = 0
    while frontier:
        if depth >= limit:
            return limit
        if len(seen) > budget:
            return depth
        nxt = []
        for ls, us in frontier:
            bs, ns = UTF8_MOVES[us]
            n = row_targets(table_of(), ls, bs, ns, out)
            if n == UNKNOWN:
                fill_row(ls, UTF8_NEED[us])
                n = row_targets(table_of(), ls, bs, ns, out)
            if n < 0:
                return depth
            keys = out[:n].tolist()
            if ends is not None and any(ends(key >> 4) for key in keys):
                return depth
            for key in keys:
                pair = (key >> 4, key & 15)  # (``row_targets``' packing)
                if pair not in seen:
                    seen.add(pair)
                    nxt.append(pair)
        frontier = nxt
        depth += 1
    if closed is not None:  # (a state met only inside a character proves nothing there)
        closed.extend({ls for ls, us in seen if us == UTF8_BETWEEN})
    return INF


def lexeme_depth(steps: StepTables, ls: int, limit: int, cache: dict[Any, int]) -> int:
    """A ``k`` such that every text string of at most ``k`` bytes keeps the lexeme of
    lexer state ``ls`` alive (``containment_depth``'s question), found terminal by
    terminal: the lexeme is alive while any of its terminals is, so the best single
    terminal's depth is a sound answer (the union can only be deeper; a smaller ``k``
    only means a longer walk, never another mask).

    One terminal's depth depends only on its remaining regex, so it is cached by regex
    node in ``cache`` (``node_depths(limit)``, shared by every constraint of the
    process): the body of a JSON string, met again in every state and schema that holds
    it, is searched once. A terminal that cannot start with every ASCII text byte has
    depth 0 (no search). Grammars with lazy terminals use the search on the whole state.
    """
    if steps.lazy:
        return containment_depth(lambda: steps.table, steps.fill_row, ls, limit,
                                 steps.is_lazy_accept)
    row_min = (_kernels or kernels()).row_min
    m = row_min(steps.table, ls, ASCII_TEXT)
    if m == UNKNOWN:
        steps.fill_row(ls, ASCII_TEXT_BYTES)
        m = row_min(steps.table, ls, ASCII_TEXT)
    if m < 0:  # an ASCII text byte ends the lexeme: most states
        return 0
    best = 0
    for t, n in steps.dfa.pairs(ls):
        k = cache.get(n)
        if k is None:
            k = cache[n] = _node_depth(steps, t, n, limit, cache)
        if k > best:
            best = k
            if best >= limit:
                break
    return best


_NODE_DEPTHS: dict[int, dict[Any, int]] = {}
interning.memo(_NODE_DEPTHS.clear)
_NODE_DEPTHS_LIMIT = 1 << 17  # entries per limit (a full memo is emptied)


def node_depths(limit: int) -> dict[Any, int]:
    """The process's memo of ``lexeme_depth``'s per-terminal depths at ``limit``: regex
    node -> depth. A terminal's depth is a function of its remaining regex alone (and the
    limit), not of the grammar or the lexer state holding it, so the memo is shared by
    every compiled constraint: the string bodies of one schema recur in the next.
    Interned nodes live as long as the process, so keeping them as keys holds nothing
    more alive."""
    memo = _NODE_DEPTHS.get(limit)
    if memo is None:
        memo = _NODE_DEPTHS.setdefault(limit, {})
    elif len(memo) > _NODE_DEPTHS_LIMIT:
        memo.clear()
    return memo


# pairs one terminal's depth search may visit (``containment_depth``'s budget): a deeper
# answer takes more of the slices whole and leaves fewer tokens to the walk. A JSON string
# with a word-count pattern (a product of the string body and ``(\S+\s+){0,19}``, counted
# below the horizon's bound) stopped at depth 8 with 96 pairs, so each of its masks walked
# every token longer than 8 bytes, about 550,000 trie nodes (o21135 of the dev schemas);
# with 1024 it reaches depth 18 to 38 (that schema's run 250 -> 170 ms, the 300 schemas'
# other runs unchanged, the search at most about 6 ms once per regex node)
CLOSURE_BUDGET = 1024


def _node_depth(steps: StepTables, t: int, n: Any, limit: int, cache: dict[Any, int]) -> int:
    """``lexeme_depth`` of one terminal ``t`` whose remaining regex is ``n``.

    Two shortcuts before the search, both sound lower bounds:

    * ``X·Y`` (``Y`` not empty) is alive after any text that keeps ``X`` alive, so when
      ``X`` keeps alive under every text string (depth ``INF``), so does ``X·Y`` (an
      unanchored pattern ``.*P.*`` in a string: its head ``.*`` decides, searched once);
    * ``A & ~F1 & ... `` with every ``Fi`` a finite language: if every text string keeps
      ``A`` alive, each can be extended (by more text) past the longest string of the
      ``Fi``, into ``A`` minus them, so the whole is ``INF`` too. This is the key of an
      object with named and additional properties: any string but the named ones. The
      same holds when some ASCII text byte ``c`` occurs in no string of any ``Fi``
      (``_spares_text_byte``): ``s·c`` keeps ``A`` alive, and every string through it
      avoids the ``Fi`` (keys besides pattern properties: ``name_[a-z]{2}(-[A-Z]{2})?``).

    Else the breadth-first search (``containment_depth``, ``CLOSURE_BUDGET`` pairs); when
    it proves ``INF``, each state it met between characters is ``INF`` as well, and the
    nodes of those of one terminal go into ``cache`` (the derivatives of ``n``: later
    positions in the same string find their depth there).
    """
    if first_bytes(n) & ASCII_TEXT_BYTES != ASCII_TEXT_BYTES:
        return 0
    head = n.args[0] if n.kind == K_CONCAT else n
    if head.kind == K_REPEAT and head.args[2] != REPEAT_INF and _takes_any_text_char(head.args[0]):
        # C{lo,hi}·Y with C matching every text character: a text string of at most hi
        # bytes is at most hi characters (the last maybe cut off), so C{lo,hi} keeps it
        # alive. A bounded string body (maxLength) has this form; the search below would
        # stop at its budget, a few levels deep, as the count makes every level new states
        return min(int(head.args[2]), limit)
    if n.kind == K_CONCAT and n.args[1] is not EMPTY:
        head = n.args[0]
        k = cache.get(head)
        if k is None:
            k = cache[head] = _node_depth(steps, t, head, limit, cache)
        if k >= INF:
            return k
    elif n.kind == K_AND:
        pos = [c for c in n.args if c.kind != K_NOT]
        neg = [c.args[0] for c in n.args if c.kind == K_NOT]
        if pos and neg and (all(_finite(f) for f in neg) or _spares_text_byte(neg)):
            a = pos[0] if len(pos) == 1 else intersect(*pos)
            k = cache.get(a)
            if k is None:
                k = cache[a] = _node_depth(steps, t, a, limit, cache)
            if k >= INF:
                return k
    one = steps.dfa.state_of(((t, n),))
    steps.sync(one + 1)
    closed: list[int] = []
    k = containment_depth(lambda: steps.table, steps.fill_row, one, limit,
                          budget=CLOSURE_BUDGET, closed=closed)
    if k >= INF:  # every state the search reached is INF too: its node's depth is known
        pairs = steps.dfa.pairs
        for ls in closed:
            got = pairs(ls)
            if len(got) == 1:
                cache[got[0][1]] = INF
    return k


_TAKES_TEXT: dict[Any, bool] = {}
interning.memo(_TAKES_TEXT.clear)


def _takes_any_text_char(c: Any) -> bool:
    """Every single text character matches ``c`` (decided once per interned node)."""
    r = _TAKES_TEXT.get(c)
    if r is None:
        r = _TAKES_TEXT[c] = is_subset(TEXT_CHAR, c, limit=2_000)
    return r


_BYTES_USED: dict[Any, int] = {}
interning.memo(_BYTES_USED.clear)


def _spares_text_byte(nodes: list[Any]) -> bool:
    """Some ASCII text byte is in no byte set of any of ``nodes`` (so in no string of
    their languages; the nodes hold no complement)."""
    used = 0
    for n in nodes:
        u = _bytes_used(n)
        if u < 0:
            return False
        used |= u
    return ASCII_TEXT_BYTES & ~used != 0


def _bytes_used(n: Any) -> int:
    """The union of the byte sets in ``n`` (a mask over-approximating the bytes its
    strings contain), or -1 if ``n`` holds a complement; memoized per interned node,
    walked without recursion (a long literal is a deep chain)."""
    got = _BYTES_USED.get(n)
    if got is not None:
        return got
    used = 0
    seen = {n}
    todo = [n]
    while todo:
        m = todo.pop()
        k = m.kind
        if k == K_NOT:
            used = -1
            break
        if k == K_BYTES:
            used |= m.args[0]
            continue
        hit = _BYTES_USED.get(m)
        if hit is not None:
            if hit < 0:
                used = -1
                break
            used |= hit
            continue
        for c in m.args:
            if isinstance(c, Node) and c not in seen:
                seen.add(c)
                todo.append(c)
    if len(_BYTES_USED) > 1 << 16:
        _BYTES_USED.clear()
    _BYTES_USED[n] = used
    return used


def _finite(n: Any) -> bool:
    """The regex ``n`` matches finitely many strings (no star, no unbounded repeat, no
    complement); conservative: False when unsure."""
    k = n.kind
    if k in (K_EMPTY, K_EPS, K_BYTES):
        return True
    if k in (K_CONCAT, K_ALT):
        return all(_finite(c) for c in n.args)
    if k == K_REPEAT:
        return n.args[2] != REPEAT_INF and _finite(n.args[0])
    return False


def start_walk(vindex: VocabIndex, steps: StepTables, ls: int, node: int,
               mask: NDArray[np.uint32], *, slices: bool = True,
               depth_cache: dict[int, int] | None = None, stacks: Stacks | None = None) -> Walk:
    """Set ``mask`` to what needs no walk (the slices taken whole, else nothing) and
    return the walk of the rest, not started (``fill_mask`` runs it at once). ``stacks``:
    the walk's stacks, when the caller has a pair no other walk uses meanwhile (else new)."""
    if not slices:
        mask.fill(0)
        t = vindex.trie
        return Walk(t, vindex.packed(t), 1, t.n_nodes, vindex.dup_next, steps, ls, node, mask,
                    stacks)
    k = depth_cache.get(ls) if depth_cache is not None else None
    if k is None:
        k = lexeme_depth(steps, ls, vindex.max_slice_len, node_depths(vindex.max_slice_len))
        if depth_cache is not None:
            depth_cache[ls] = k
    trie, nodes, lo, hi, union = vindex.parts_to_walk(k)
    if union is None:
        mask.fill(0)
    else:
        np.copyto(mask, union)
    return Walk(trie, nodes, lo, hi, vindex.dup_next, steps, ls, node, mask, stacks)


def fill_mask(vindex: VocabIndex, steps: StepTables, ls: int, node: int,
              mask: NDArray[np.uint32], *, slices: bool = True,
              depth_cache: dict[int, int] | None = None) -> int:
    """Overwrite ``mask`` with the tokens allowed from ``(ls, node)`` (EOS not included).

    Returns the number of slow-path steps taken (table entries filled by Python)."""
    return start_walk(vindex, steps, ls, node, mask, slices=slices, depth_cache=depth_cache).run()
