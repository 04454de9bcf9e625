"""A bound on the process-wide table of interned regex nodes.

Nodes are interned (``ast._table``: one node per structure) and each caches its
derivatives, so the table holds every node any grammar of the process ever built, and
through the derivative caches every lexer state explored. A process that compiles
distinct grammars for as long as it runs (a server: a schema per request) would grow
without end, about half a kilobyte per node (the dev schemas of JSONSchemaBench make
some 200 nodes each).

``trim_if_over``, called where a constraint is compiled, keeps the table bounded: past
``TABLE_LIMIT`` nodes (or, if more, what the last trim kept and half the limit) it empties the memos
that hold nodes (the regex layer's own, and those the layers above registered with
``memo``), then keeps only the nodes something else still holds: the live constraints'
lexers and grammars, and what their nodes reach. Interning stays exact for those (a node
built again is the one kept). A node built by another thread while the table is being
refilled may duplicate one kept: the same language under two identities, which costs a
state or a walk more and changes no answer (threads may already race to intern a node).
"""

from __future__ import annotations

import gc
import threading
import weakref
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
    nodes kept. Cost: a full garbage collection (derivative caches make cycles) and a
    pass over the table: 0.14 s for 61,000 nodes in a process of 380,000 objects (after
    the 300 dev schemas of JSONSchemaBench), 0.3 s at the limit
    (``bench/bench_node_table.py``), most of it the collection."""
    with _LOCK:
        return _trim()


def _trim() -> int:
    global _trim_at
    table = ast._table
    enabled = gc.isenabled()
    gc.disable()  # one collection, below: the weak references would start several
    try:
        nodes = list(table.values())  # one C call: no other thread changes the table meanwhile
        refs = [weakref.ref(n) for n in nodes]
        del nodes
        table.clear()
        for clear in _MEMOS:
            clear()
        gc.collect()
        for r in refs:
            n = r()
            if n is not None:
                table.setdefault((n.kind, n.args), n)
    finally:
        if enabled:
            gc.enable()
    _trim_at = len(table) + TABLE_LIMIT // 2
    return len(table)
