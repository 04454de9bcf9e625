"""Readable renderings of regex nodes (``to_string``, for messages and reprs) and their
size in distinct sub-nodes."""

from __future__ import annotations

from .ast import (
    ALL_BYTES_MASK,
    INF,
    K_ALT,
    K_AND,
    K_BYTES,
    K_CONCAT,
    K_EMPTY,
    K_EPS,
    K_HIDE,
    K_NOT,
    K_STAR,
    Node,
    mask_bytes,
    set_renderer,
)


def size(node: Node) -> int:
    """Number of distinct sub-nodes (a measure of expression size)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if n.uid in seen:
            continue
        seen.add(n.uid)
        stack.extend(a for a in n.args if isinstance(a, Node))
    return len(seen)


def _fmt_byte(b: int) -> str:
    c = chr(b)
    if 0x21 <= b < 0x7F and c not in "\\[]^-":
        return c
    return f"\\x{b:02x}"


def _fmt_mask(m: int) -> str:
    if m == ALL_BYTES_MASK:
        return "\\C"
    bs = mask_bytes(m)
    if len(bs) == 1:
        c = chr(bs[0])
        if 0x21 <= bs[0] < 0x7F and c not in "\\.[]()|*+?{}^$":
            return c
        return f"\\x{bs[0]:02x}"
    parts, i = [], 0
    while i < len(bs):
        j = i
        while j + 1 < len(bs) and bs[j + 1] == bs[j] + 1:
            j += 1
        parts.append(_fmt_byte(bs[i]) if i == j else f"{_fmt_byte(bs[i])}-{_fmt_byte(bs[j])}")
        i = j + 1
    return "[" + "".join(parts) + "]"


def to_string(node: Node, limit: int = 400) -> str:
    """A readable regex-like rendering (bytes as ``\\xNN``; ``&`` and ``~`` for and/not),
    cut to ``limit`` characters (deep or long nodes are elided, never walked whole)."""
    s = _show(node, 0, [limit + 1], 0)
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _show(n: Node, prec: int, budget: list[int], depth: int) -> str:
    """``n`` rendered while ``budget[0]`` (characters left, shared) is positive."""
    if budget[0] <= 0 or depth > 60:
        budget[0] = 0
        return "..."
    k = n.kind
    if k == K_EMPTY:
        s = "∅"
    elif k == K_EPS:
        s = "ε"
    elif k == K_BYTES:
        s = _fmt_mask(n.args[0])
    elif k == K_CONCAT:
        parts = []
        m = n
        while True:
            head, last = (m.args[0], False) if m.kind == K_CONCAT else (m, True)
            parts.append(_show(head, 2, budget, depth + 1))
            if last or budget[0] <= 0:
                break
            m = m.args[1]
        s = "".join(parts)
        s = f"({s})" if prec > 2 else s
    elif k in (K_ALT, K_AND):
        parts = []
        for m in n.args:
            parts.append(_show(m, 1, budget, depth + 1))
            if budget[0] <= 0:
                break
        s = ("|" if k == K_ALT else "&").join(parts)
        s = f"({s})" if prec > 0 else s
    elif k == K_NOT:
        s = "~" + _show(n.args[0], 3, budget, depth + 1)
    elif k == K_STAR:
        s = _show(n.args[0], 3, budget, depth + 1) + "*"
    elif k == K_HIDE:
        s = f"hide[{_fmt_mask(n.args[1])}]({_show(n.args[0], 0, budget, depth + 1)})"
    else:
        inner, lo, hi = n.args
        s = _show(inner, 3, budget, depth + 1) + (f"{{{lo},}}" if hi == INF else f"{{{lo},{hi}}}")
    if k in (K_EMPTY, K_EPS, K_BYTES):
        budget[0] -= len(s)
    return s


set_renderer(to_string)
