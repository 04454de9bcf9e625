"""Fill a token mask for one (lexer state, parser node): the trie walk driver.

Meaning, as a plain loop (``tests/unit/engine/engine_reference.py`` keeps it runnable): a
token is allowed iff feeding its bytes one by one from the state succeeds, where one
byte from ``(ls, node)`` is

* ``table[ls, b]`` if that is not DEAD (the lexeme goes on: longest match), else
* if ``ls`` accepts the terminal set ``a``: ``node' = trans[node, a]`` (the parser
  scans the lexeme), then ``table[nstart[node'], b]`` (a new lexeme starts with ``b``);
* otherwise the token is rejected.

The numba kernel (``_kernels.walk_lexemes``) does this over the flat trie, skipping a
dead subtree in one step, and returns to Python whenever an entry is UNKNOWN; Python
fills it (``StepTables.step``) and resumes at the same trie node. Parser transitions
met inside a token are computed on a parser pushed along the lexemes of the trie path
(read back from the kernel's stacks), then popped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine.slices import VocabIndex, containment_depth
from tether.engine.tables import StepTables
from tether.tokens.trie import TokenTrie


class _PathParser:
    """Gives a parser at the node of trie depth ``k`` of the current walk, lazily."""

    __slots__ = ("root", "steps", "lstack", "pstack", "astack", "k", "parser", "base")

    def __init__(self, root: Callable[[], Any], steps: StepTables, lstack: NDArray[np.int32],
                 pstack: NDArray[np.int32], astack: NDArray[np.int32] | None, k: int) -> None:
        self.root, self.steps, self.lstack, self.pstack, self.k = root, steps, lstack, pstack, k
        self.astack = astack
        self.parser: Any = None
        self.base = 0

    def __call__(self) -> Any:
        if self.parser is None:
            p = self.root()
            self.base = p.n_rows
            st, ls, ps, az = self.steps, self.lstack, self.pstack, self.astack
            for i in range(1, self.k + 1):
                if ps[i] == ps[i - 1]:
                    continue
                if az is None:
                    st.push_lexeme(p, int(st.accid[ls[i - 1]]))
                else:  # lazy grammars: the kernel recorded the lexemes of each byte
                    for j in (0, 1):
                        if az[i, j] >= 0:
                            st.push_lexeme(p, int(az[i, j]))
            self.parser = p
        return self.parser

    def release(self) -> None:
        if self.parser is not None:
            self.parser.truncate(self.base)
            self.parser = None


def walk_trie(trie: TokenTrie, dup_next: NDArray[np.int32], steps: StepTables, ls: int,
              node: int, root_parser: Callable[[], Any], mask: NDArray[np.uint32]) -> int:
    """OR into ``mask`` every token of ``trie`` allowed from ``(ls, node)``.

    Returns the number of slow-path (Python) steps taken.
    """
    from tether.engine._kernels import walk_lexemes, walk_lexemes_lazy

    lstack = np.empty(trie.max_depth + 1, np.int32)
    pstack = np.empty(trie.max_depth + 1, np.int32)
    astack = np.full((trie.max_depth + 1, 2), -1, np.int32) if steps.lazy else None
    lstack[0], pstack[0] = ls, node
    p, misses = 1, 0
    byte, depth, token, end = trie.byte, trie.depth, trie.token, trie.end
    while True:
        steps.sync()
        if astack is None:
            p = walk_lexemes(byte, depth, token, end, dup_next, steps.table, steps.accid,
                             steps.trans, steps.nstart, lstack, pstack, mask, p)
        else:
            p = walk_lexemes_lazy(byte, depth, token, end, dup_next, steps.table, steps.accid,
                                  steps.lazyf, steps.trans, steps.nstart, lstack, pstack,
                                  astack, mask, p)
        if p < 0:
            return misses
        misses += 1
        d = int(depth[p])
        pp = _PathParser(root_parser, steps, lstack, pstack, astack, d - 1)
        try:
            steps.step(int(lstack[d - 1]), int(pstack[d - 1]), int(byte[p]), pp)
        finally:
            pp.release()


def fill_mask(vindex: VocabIndex, steps: StepTables, ls: int, node: int,
              root_parser: Callable[[], Any], mask: NDArray[np.uint32], *,
              slices: bool = True, depth_cache: dict[int, int] | None = None) -> int:
    """Overwrite ``mask`` with the tokens allowed from ``(ls, node)`` (EOS not included).

    Returns the number of slow-path steps taken (table entries filled by Python)."""
    if not slices:
        mask.fill(0)
        return walk_trie(vindex.trie, vindex.dup_next, steps, ls, node, root_parser, mask)
    k = depth_cache.get(ls) if depth_cache is not None else None
    if k is None:
        ends = steps.is_lazy_accept if steps.lazy else None
        k = containment_depth(lambda: steps.table, steps.fill_row, ls, vindex.max_slice_len,
                              ends)
        if depth_cache is not None:
            depth_cache[ls] = k
    tries, union = vindex.parts_to_walk(k)
    if union is None:
        mask.fill(0)
    else:
        np.copyto(mask, union)
    misses = 0
    for t in tries:
        misses += walk_trie(t, vindex.dup_next, steps, ls, node, root_parser, mask)
    return misses
