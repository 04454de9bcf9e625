"""A bound on the process-wide table of interned regex nodes.

Nodes are interned (``ast._table``: one node per structure) and each caches its
derivatives, so the table holds every node any grammar of the process ever built, and
through the derivative caches every lexer state explored. A process that compiles
distinct grammars for as long as it runs (a server: a schema per request) would grow
without end, about half a kilobyte per node (the dev schemas of JSONSchemaBench make
some 200 nodes each).

``trim_if_over``, called where a constraint is compiled, keeps the table bounded: past
``TABLE_LIMIT`` nodes (or, if more, what the last trim kept and half the limit) it
empties the memos that hold nodes (the regex layer's own, and those the layers above
registered with ``memo``), then removes from the table the nodes nothing else holds,
directly or through the nodes it holds (a mark and sweep by reference counts: the live
constraints' lexers and grammars, and any node a thread has in hand, are kept with what
they reach). A node in use never leaves the table, so interning stays exact for all of
them, constants included. A thread that takes a node from the table between its count
and its removal (it is building that very structure then) holds one the table no longer
has: a second may be built later, the same language under two identities, which costs
a state and changes no answer (threads racing to intern one node could already do so).
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Callable

from . import ast, dfa, lowering
from .compile import _COMPILED

TABLE_LIMIT = 200_000  # nodes; the threshold is at least what a trim kept and half this

_trim_at = 0  # what the last trim kept, and half the limit
_LOCK = threading.Lock()  # one trim at a time
_MEMOS: list[Callable[[], object]] = [
    ast._MIN_LENGTH.clear,
    _COMPILED.clear,
    dfa._EMPTY_MEMO.clear,
    lowering.charset_node.cache_clear,
]


def memo(clear: Callable[[], object]) -> None:
    """Register ``clear``, which empties a cache holding regex nodes, to run at a trim."""
    _MEMOS.append(clear)


def table_size() -> int:
    """Nodes in the intern table."""
    return len(ast._table)


def trim_if_over() -> int | None:
    """``trim()`` if the table is past its threshold (``TABLE_LIMIT``, or what the last
    trim kept and half of it if more); the nodes kept, or None when nothing was done.
    Cost: one size test."""
    if len(ast._table) <= max(_trim_at, TABLE_LIMIT) or not _LOCK.acquire(blocking=False):
        return None  # under the threshold, or another thread is trimming
    try:
        return _trim()
    finally:
        _LOCK.release()


def trim() -> int:
    """Empty the registered memos and drop every node only the table holds; return the
    nodes kept. Cost: two passes over the table, and the freeing of the nodes removed
    (no collection: their caches are emptied, which breaks their cycles): 0.15 s for
    61,000 nodes (after the 300 dev schemas of JSONSchemaBench), 0.5-0.65 s at the limit
    (``bench/bench_node_table.py``)."""
    with _LOCK:
        return _trim()


def _trim() -> int:
    """Mark and sweep over the table: a node is kept if something outside the table and
    the other nodes holds it (its reference count exceeds what the table, the nodes'
    children and derivative caches, and this function account for), or if a kept node
    reaches it. Only the others are removed, so no node in use ever leaves the table: a
    thread interning meanwhile finds every node it could be holding."""
    global _trim_at
    table = ast._table
    for clear in _MEMOS:
        clear()
    enabled = gc.isenabled()
    gc.disable()  # no collection while references are counted
    try:
        nodes = list(table.values())  # one C call: no other thread changes the table meanwhile
        inner = _inner_references(nodes)
        getrefcount = sys.getrefcount
        roots = [n for n in nodes if getrefcount(n) - _OWN_REFS > inner.get(id(n), 0)]
        del inner
        keep = {id(n) for n in roots}
        while roots:
            for c in _children(roots.pop()):
                if id(c) not in keep:
                    keep.add(id(c))
                    roots.append(c)
        _sweep(table, nodes, keep)
        del nodes
    finally:
        if enabled:
            gc.enable()
    _trim_at = len(table) + TABLE_LIMIT // 2
    return len(table)


_OWN_REFS = 4  # a node's references in _trim: the table's value, ``nodes``, the loop's name, getrefcount's argument


def _inner_references(nodes: list[ast.Node]) -> dict[int, int]:
    """id -> the references to it from the other nodes (a function of its own: no name
    of it is left holding a node when it returns)."""
    inner: dict[int, int] = {}
    for n in nodes:
        for c in _children(n):
            inner[id(c)] = inner.get(id(c), 0) + 1
    return inner


def _sweep(table: dict[tuple[int, tuple[object, ...]], ast.Node], nodes: list[ast.Node],
           keep: set[int]) -> None:
    """Remove the nodes not kept, and empty their derivative caches and buckets: only
    other removed nodes hold them, and those caches are what makes cycles among nodes
    (a star's derivative holds the star), so they are freed as soon as ``nodes`` goes,
    without a collection."""
    for n in nodes:
        if id(n) not in keep:
            key = (n.kind, n.args)
            if table.get(key) is n:
                del table[key]
            n._deriv = ast._NO_DERIVATIVES
            n._buckets = None


def _children(n: ast.Node) -> list[ast.Node]:
    """The nodes ``n`` holds: its arguments, its cached derivatives, its buckets."""
    out = [a for a in n.args if a.__class__ is ast.Node]
    out += n._deriv.values()
    if n._buckets is not None:
        for _, members in n._buckets:
            out += members
    return out
