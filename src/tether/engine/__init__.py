"""tether.engine: token masks for constrained decoding (see ``engine/README.md``).

``compile(grammar, vocabulary) -> CompiledConstraint`` (immutable, cached by content and
vocabulary fingerprint); ``CompiledConstraint.matcher() -> Matcher`` with
``compute_mask`` / ``consume`` / ``rollback`` / ``copy`` / ``fast_forward``;
``compute_masks(matchers, out2d)`` for a batch. numba is imported only when a mask is
first computed (``warmup()`` pays that cost up front).
"""

from __future__ import annotations

from tether.engine.batch import compute_masks
from tether.engine.compiled import CompiledConstraint, compile
from tether.engine.matcher import Matcher


def warmup() -> None:
    """Load (or JIT-compile) the numba kernels now rather than at the first mask."""
    import numpy as np

    from tether.engine._kernels import (
        address_of,
        copy_words,
        fill_rows,
        nonzero_words,
        row_min,
        row_targets,
        scatter_words,
        token_moves,
        walk_lexemes,
        write_stored,
    )

    i32 = np.int32
    one = np.zeros(1, i32)
    t = np.full((1, 256), -1, i32)
    trie = (np.array([2 << 32, 2 << 32 | 1 << 8]), np.full(2, -1, i32), np.full(1, -1, i32))
    rest = (np.zeros((4, 2), i32), np.zeros(1, np.uint32), 1, 2)
    walk_lexemes(*trie, t, one, None, t, one, *rest)  # no lazy terminals
    walk_lexemes(*trie, t, one, one, t, one, *rest)  # lazy terminals
    token_moves(t, one, one, t, one, b"", 0, 0, one)  # Matcher.consume's fast path
    nonzero_words(np.zeros(1, np.uint32), np.zeros(1, i32), np.zeros(1, np.uint32))
    cols = np.zeros(1, np.intp)
    row_min(t, 0, cols)  # walk.containment_depth and walk.lexeme_depth
    row_targets(t, 0, cols, cols, np.zeros(1, np.int64))
    fill_rows(np.zeros((1, 1), np.uint32), np.zeros((1, 5), np.int64), 0, 0)
    write_stored(np.zeros(1, np.uint32), 0, 0, 0, 0)
    u32 = np.zeros(1, np.uint32)
    copy_words(u32, u32)
    scatter_words(u32, one, u32)
    address_of(one)
    address_of(u32)


__all__ = ["CompiledConstraint", "Matcher", "compile", "compute_masks", "warmup"]
