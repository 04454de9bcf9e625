"""Whole-language questions on regex nodes, by derivatives: membership, emptiness (the
lexer DFA prunes states with it), inclusion and equivalence, a shortest member and a
random one."""

from __future__ import annotations

import random
from collections import deque

from ..limits import check_deadline
from .ast import (
    EMPTY,
    F_BOOLEAN,
    K_ALT,
    K_CONCAT,
    K_HIDE,
    K_REPEAT,
    Node,
    derivative,
    lowest_byte,
    mask_bytes,
    node_classes,
)


def matches(node: Node, data: bytes | str) -> bool:
    """Whether ``data`` (str is UTF-8 encoded) is in ``L(node)``. O(len) after warm-up."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    for b in data:
        node = derivative(node, b)
        if node is EMPTY:
            return False
    return node.nullable


def is_empty(node: Node, *, limit: int = 10_000, known: dict[Node, bool] | None = None) -> bool | None:
    """Whether ``L(node)`` is empty: True, False, or None if ``limit`` derivatives did not
    decide it. A concatenation is empty iff one of its parts is, an alternation iff all
    its members are, ``x{lo,hi}`` (``lo > 0``) and ``hide`` iff their inner node is: these
    are decided from their boolean parts (each decided once, and shared by the many
    derivatives that differ only around them: ``ws{0,k} " (string & ~keys) " :``).
    Intersections and complements explore derivatives (by byte class) breadth first;
    ``known`` (node → empty?) short-cuts nodes decided before and receives what this
    search decides: every node on the path to a nullable derivative is non-empty, and
    when nothing nullable is reachable every node seen is empty. (Derivatives of a
    counted intersection, such as a JSON string with both ``maxLength`` and a word-count
    ``pattern``, then find a known node within a few steps instead of searching again.)"""
    return _is_empty_at(node, [limit], known, 0)


def _is_empty_at(node: Node, budget: list[int], known: dict[Node, bool] | None, depth: int) -> bool | None:
    """``is_empty`` of ``node``, ``depth`` structural steps below the node asked about
    (past ``_SPLIT_DEPTH`` the node is searched whole). ``budget[0]``: the nodes the
    searches may still visit, shared by every part of one ``is_empty`` call (so
    splitting never searches more than ``limit`` nodes in all)."""
    if node is EMPTY:
        return True
    if node.nullable:
        return False
    if not node.flags & F_BOOLEAN:
        return False  # ∅ is the only empty node without intersection/complement
    if known is not None:
        k = known.get(node)
        if k is not None:
            return k
    kind = node.kind
    if kind in _SPLIT and depth < _SPLIT_DEPTH:
        if kind == K_CONCAT:  # empty iff a part is: walk the chain (no recursion along it)
            parts = []
            n = node
            while n.kind == K_CONCAT:
                parts.append(n.args[0])
                n = n.args[1]
            parts.append(n)
            r: bool | None = False
            for p in parts:
                if p.flags & F_BOOLEAN:
                    e = _is_empty_at(p, budget, known, depth + 1)
                    if e:
                        r = True
                        break
                    if e is None:
                        r = None
        elif kind == K_ALT:  # empty iff every member is
            r = True
            for m in node.args:
                e = _is_empty_at(m, budget, known, depth + 1)
                if e is False:
                    r = False
                    break
                if e is None:
                    r = None
        else:  # K_REPEAT with lo > 0 (else nullable), K_HIDE: as their inner node
            r = _is_empty_at(node.args[0], budget, known, depth + 1)
        if known is not None and r is not None:
            known[node] = r
        return r
    parent: dict[Node, Node | None] = {node: None}
    budget[0] -= 1
    todo = deque([node])  # breadth first: the shortest way to a nullable node is found first
    while todo:
        n = todo.popleft()
        if len(parent) & 255 == 0:
            check_deadline("deciding whether a regex is empty")
        for cls in node_classes(n):
            d = derivative(n, lowest_byte(cls))
            if d is EMPTY or d in parent:
                continue
            if known is not None:
                k = known.get(d)
                if k is True:
                    continue
                if k is False:
                    _mark_path(known, parent, n)
                    return False
            if d.nullable or not d.flags & F_BOOLEAN:
                if known is not None:
                    _mark_path(known, parent, n)
                return False
            if budget[0] <= 0:
                return None
            budget[0] -= 1
            parent[d] = n
            todo.append(d)
    if known is not None:
        for n in parent:
            known[n] = True
    return True


_SPLIT = frozenset((K_CONCAT, K_ALT, K_REPEAT, K_HIDE))  # decided from their parts
_SPLIT_DEPTH = 64  # nesting followed by is_empty's splitting (deeper: searched whole)


def _mark_path(known: dict[Node, bool], parent: dict[Node, Node | None], n: Node | None) -> None:
    """Record ``n`` and its ancestors in the search as non-empty."""
    while n is not None:
        known[n] = False
        n = parent[n]


def is_subset(a: Node, b: Node, *, limit: int = 10_000) -> bool:
    """Whether ``L(a) ⊆ L(b)`` (emptiness of ``a & ~b``). False when undecided within
    ``limit`` derivative states, so a True answer is always sound."""
    from .ast import complement, intersect

    return is_empty(intersect(a, complement(b)), limit=limit) is True


def is_equivalent(a: Node, b: Node, *, limit: int = 10_000) -> bool:
    return is_subset(a, b, limit=limit) and is_subset(b, a, limit=limit)


def example(node: Node, *, limit: int = 10_000) -> bytes | None:
    """A shortest byte string in ``L(node)``, or None if empty (or undecided)."""
    from collections import deque

    if node.nullable:
        return b""
    seen = {node}
    q = deque([(node, b"")])
    while q:
        n, s = q.popleft()
        if len(seen) & 255 == 0:
            check_deadline("searching a regex example")
        for cls in node_classes(n):
            b = lowest_byte(cls)
            d = derivative(n, b)
            if d is EMPTY or d in seen:
                continue
            if d.nullable:
                return s + bytes([b])
            if len(seen) >= limit:
                return None
            seen.add(d)
            q.append((d, s + bytes([b])))
    return None


def random_member(node: Node, rng: random.Random, *, max_len: int = 40, stop: float = 0.2) -> bytes | None:
    """A random byte string of ``L(node)`` (None if the language is empty), for tests.

    Walks derivatives choosing a random live byte class, then a random byte of it; stops at
    an accepting node with probability ``stop``; past ``max_len`` it completes with the
    shortest suffix (``example``). ``rng`` is a ``random.Random``.
    """
    out = bytearray()
    n = node
    while True:
        if n.nullable and (rng.random() < stop or len(out) >= max_len):
            return bytes(out)
        if len(out) >= max_len:
            tail = example(n)
            return None if tail is None else bytes(out) + tail
        options = []
        for cls in node_classes(n):
            d = derivative(n, lowest_byte(cls))
            if d is not EMPTY and (not d.flags & F_BOOLEAN or is_empty(d, limit=2000) is False):
                options.append(cls)
        if not options:
            return bytes(out) if n.nullable else None
        cls = rng.choice(options)
        b = rng.choice(mask_bytes(cls))
        out.append(b)
        n = derivative(n, b)
