"""tether.engine: token masks for constrained decoding (see ``engine/README.md``).

``compile(grammar, vocabulary) -> CompiledConstraint`` (immutable, cached by content and
vocabulary fingerprint); ``CompiledConstraint.matcher() -> Matcher`` with
``compute_mask`` / ``consume`` / ``rollback`` / ``copy`` / ``fast_forward``;
``compute_masks(matchers, out2d)`` for a batch. numba is imported only when a mask is
first computed (``warmup()`` pays that cost up front).
"""

from __future__ import annotations

from tether.engine.compiled import CompiledConstraint, compile, compute_masks
from tether.engine.matcher import Matcher


def warmup() -> None:
    """Load (or JIT-compile) the numba kernels now rather than at the first mask."""
    import numpy as np

    from tether.engine._kernels import walk_lexemes

    z = np.zeros(1, np.int32)
    t = np.full((1, 256), -1, np.int32)
    walk_lexemes(np.zeros(1, np.uint8), z, np.full(1, -1, np.int32), np.ones(1, np.int32),
                 np.full(1, -1, np.int32), t, z, t, z, z.copy(), z.copy(),
                 np.zeros(1, np.uint32), 1)


__all__ = ["CompiledConstraint", "Matcher", "compile", "compute_masks", "warmup"]
