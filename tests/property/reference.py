"""Plain-Python meaning of the tokens-layer kernels (the oracle for the numba walk)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

DEAD, UNKNOWN = -1, -2


def allowed_tokens(
    tokens: Sequence[bytes],
    special_ids: frozenset[int] | set[int],
    table_rows: Callable[[int], Sequence[int]],
    start: int,
) -> set[int]:
    """Tokens whose every byte keeps the DFA alive from ``start`` (``table_rows(s)[b]``)."""
    if start < 0:
        return set()
    out = set()
    for t, data in enumerate(tokens):
        if not data or t in special_ids:
            continue
        s = start
        for b in data:
            s = table_rows(s)[b]
            if s == DEAD:
                break
        else:
            out.add(t)
    return out
