"""A node that no string of at most ``horizon`` bytes tells apart from a given one, with
its large counted repeats made unbounded (``Horizon.form``).

A token mask looks at most ``horizon`` bytes ahead (the longest token): for every byte
string ``w`` with ``|w| <= horizon`` it asks whether ``node·w`` is alive (some string
completes it) and whether it is nullable. Two nodes that agree on both questions for all
such ``w`` have the same mask. A counted state (``x{0,470}``: the characters a
``maxLength`` string has left, ``(\\S+\\s+){0,46}``: a word count) makes a new lexer state
at every position, each with its own mask walk, although the positions far from their
bounds all answer alike. ``Horizon.form`` rewrites each such repeat ``r{lo,hi}`` to
``r{lo,}`` when that provably changes no answer, so those positions share one state.

Why it is exact. Let ``Z`` be ``N`` with some repeats ``r{lo,hi}`` made ``r{lo,}``, each
with ``r`` never empty and ``hi * minlen(r) >= T``, none of them under a complement or
a ``hide`` (so ``L(N) ⊆ L(Z)``). A string of at most ``T`` bytes holds at most ``T /
minlen(r) <= hi`` iterations of such a ``r`` (``min_length`` is a lower bound), so by
induction on the node, ``N`` and ``Z`` hold the same strings of at most ``T`` bytes. Let
``M`` be the longest of the shortest completions of ``Z``'s live derivatives
(``longest_shortest_completion``, explored up to a limit). With ``T = horizon + SLACK``
and ``M <= SLACK``: ``w`` (``|w| <= horizon``) is in ``N`` iff in ``Z``; ``N·w`` alive
implies ``Z·w`` alive (inclusion); ``Z·w`` alive gives a completion ``s``, ``|s| <= M``,
so ``ws`` has at most ``T`` bytes and is in ``N``: ``N·w`` is alive.

Only nodes flagged ``F_COUNTED`` (a repeat with ``hi * min_length >= COUNTED_MIN``, set
when the node is built) are looked at: the rest of the states cost one flag test.
"""

from __future__ import annotations

from collections import deque

from ..limits import check_deadline
from .ast import (
    EMPTY,
    F_COUNTED,
    INF,
    K_ALT,
    K_AND,
    K_CONCAT,
    K_REPEAT,
    K_STAR,
    Node,
    alt,
    concat,
    derivative,
    intersect,
    lowest_byte,
    min_length,
    node_classes,
    repeat,
    star,
)

SLACK = 16  # the shortest completions a relaxed node may need: ``T = horizon + SLACK``
EXPLORE_LIMIT = 2048  # derivatives explored to find ``M`` before giving up (no rewrite)
_MAX_NESTING = 200  # structure deeper than this is left as it is


class Horizon:
    """``horizon_form`` for one horizon, with its memos (a lexer DFA owns one).

    ``budget``: derivatives this object may explore in all (the searches of ``M``); once
    spent, every node is its own form (always exact, only less shared)."""

    def __init__(self, horizon: int, *, budget: int = 50_000) -> None:
        self.horizon = horizon
        self.threshold = horizon + SLACK
        self.budget = budget
        self._form: dict[Node, Node] = {}
        self._relaxed: dict[Node, Node] = {}
        self._safe: dict[Node, bool] = {}  # relaxed node -> its M is at most SLACK

    def form(self, node: Node) -> Node:
        """``node`` with every large repeat unbounded where no string of at most
        ``horizon`` bytes can tell (``node`` itself when there is none, or when the check
        of the shortest completions does not finish within the budget)."""
        if not node.flags & F_COUNTED:
            return node
        got = self._form.get(node)
        if got is None:
            relaxed = self._relax(node, 0)
            if relaxed is not node and not self._is_safe(relaxed):
                relaxed = node
            got = self._form[node] = relaxed
        return got

    # -- the rewrite ---------------------------------------------------------------------
    def _relax(self, n: Node, depth: int) -> Node:
        if not n.flags & F_COUNTED or depth > _MAX_NESTING:
            return n
        got = self._relaxed.get(n)
        if got is None:
            got = self._relaxed[n] = self._relax_new(n, depth)
        return got

    def _relax_new(self, n: Node, depth: int) -> Node:
        k = n.kind
        if k == K_CONCAT:  # the chain walked in a loop; the part without counts kept whole
            whole = n
            parts: list[Node] = []
            while n.kind == K_CONCAT and n.flags & F_COUNTED:
                parts.append(n.args[0])
                n = n.args[1]
            out = self._relax(n, depth + 1)
            new = [self._relax(p, depth + 1) for p in parts]
            if out is n and all(a is b for a, b in zip(new, parts, strict=True)):
                return whole
            for p in reversed(new):
                out = concat(p, out)
            return out
        if k == K_ALT:
            args = [self._relax(m, depth + 1) for m in n.args]
            return n if all(a is b for a, b in zip(args, n.args, strict=True)) else alt(*args)
        if k == K_AND:
            args = [self._relax(m, depth + 1) for m in n.args]
            return n if all(a is b for a, b in zip(args, n.args, strict=True)) else intersect(*args)
        if k == K_STAR:
            inner = self._relax(n.args[0], depth + 1)
            return n if inner is n.args[0] else star(inner)
        if k == K_REPEAT:
            inner0, lo, hi = n.args
            inner = self._relax(inner0, depth + 1)
            m = min_length(inner0)
            if hi != INF and m >= 1 and hi * m >= self.threshold:
                return repeat(inner, lo, INF)
            return n if inner is inner0 else repeat(inner, lo, hi)
        return n  # a complement or a hide: a larger inner language is not a larger one

    # -- the completions -----------------------------------------------------------------
    def _is_safe(self, z: Node) -> bool:
        got = self._safe.get(z)
        if got is None:
            m, seen = longest_shortest_completion(z, min(EXPLORE_LIMIT, self.budget))
            self.budget -= len(seen)
            got = m is not None and m <= SLACK
            if got:  # every derivative of z: its completions are among z's
                for s in seen:
                    self._safe[s] = True
            self._safe[z] = got
        return got


def longest_shortest_completion(node: Node, limit: int) -> tuple[int | None, list[Node]]:
    """``(M, explored)``: ``M`` is the largest, over the derivatives of ``node`` whose
    language is not empty, of the length of their shortest member; None when more than
    ``limit`` derivatives would have to be explored. ``explored``: the derivatives seen."""
    index = {node: 0}
    order = [node]
    preds: list[list[int]] = [[]]
    i = 0
    while i < len(order):
        n = order[i]
        if i & 255 == 255:
            check_deadline("bounding the completions of a counted regex")
        for cls in node_classes(n):
            d = derivative(n, lowest_byte(cls))
            if d is EMPTY:
                continue
            j = index.get(d)
            if j is None:
                if len(order) >= limit:
                    return None, order
                j = index[d] = len(order)
                order.append(d)
                preds.append([])
            preds[j].append(i)
        i += 1
    # shortest completion of each: a breadth-first search back from the nullable ones
    dist = [-1] * len(order)
    todo: deque[int] = deque()
    for j, n in enumerate(order):
        if n.nullable:
            dist[j] = 0
            todo.append(j)
    while todo:
        j = todo.popleft()
        for p in preds[j]:
            if dist[p] < 0:
                dist[p] = dist[j] + 1
                todo.append(p)
    return max(dist), order
