"""Character-level facts about front-end AST grammars: nullable, FIRST and FOLLOW sets,
and the greedy-lexing safety test that decides which sub-expressions may become one
terminal (see ``tether.grammar.lower``).

FIRST and FOLLOW are sets of code points (``Ranges``). The safety test builds small
Thompson automata over code-point ranges from the AST (no regex engine needed) and
explores pairs of their subset states.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Generator, Iterable
from typing import Any

from tether.grammar.ast import (
    MAX_CP,
    Alt,
    Cls,
    Lit,
    Node,
    Ranges,
    Ref,
    Rep,
    Rx,
    Seq,
    SetOp,
    Term,
    normalize,
    overlaps,
    refs,
    union,
)

ANY: Ranges = ((0, MAX_CP),)


def _char_ranges(c: str, ignore_case: bool) -> Ranges:
    if not ignore_case:
        return ((ord(c), ord(c)),)
    cs = {c, c.lower(), c.upper()}
    return normalize([(ord(x), ord(x)) for x in cs if len(x) == 1])


def rx_nullable(rx: Rx) -> bool:
    """Whether an opaque regex matches ε (decided with Python's ``re``; the regex layer
    uses the same syntax for the Python flavor)."""
    try:
        return re.fullmatch(f"(?{rx.flags.replace('u', '')}:{rx.pattern})" if rx.flags.replace("u", "") else rx.pattern, "") is not None
    except re.error:
        return False


def _propagate(names: Iterable[str], users: dict[str, set[str]], step: Callable[[str], bool]) -> None:
    """Run ``step`` on every name, and again on the users of a name whose value it changed
    (``step`` returns True), until nothing changes: a worklist, no recursion."""
    todo = list(names)
    queued = set(todo)
    while todo:
        name = todo.pop()
        queued.discard(name)
        if step(name):
            for u in users.get(name, ()):
                if u not in queued:
                    queued.add(u)
                    todo.append(u)


class Facts:
    """nullable / FIRST / FOLLOW over ``rules`` (name → body), computed to a fixpoint."""

    def __init__(self, rules: dict[str, Node], resolve: Callable[[Ref], Node]) -> None:
        self.rules, self.resolve = rules, resolve
        # worklists over the rule references: a rule is looked at again only when a rule
        # it uses changed, so a long chain of rules costs linear time, not one sweep per link
        users: dict[str, set[str]] = {}
        for name, body in rules.items():
            for r in refs(body):
                if r.name in rules:
                    users.setdefault(r.name, set()).add(name)
        self._nullable: dict[str, bool] = dict.fromkeys(rules, False)

        def nullable_step(name: str) -> bool:
            if self._nullable[name] or not self.nullable(rules[name]):
                return False
            self._nullable[name] = True
            return True

        _propagate(rules, users, nullable_step)
        self._first: dict[str, Ranges] = dict.fromkeys(rules, ())

        def first_step(name: str) -> bool:
            f = union(self._first[name], self.first(rules[name]))
            if f == self._first[name]:
                return False
            self._first[name] = f
            return True

        _propagate(rules, users, first_step)
        self.follow_rule: dict[str, Ranges] = dict.fromkeys(rules, ())
        todo = list(rules)
        queued = set(todo)
        while todo:
            name = todo.pop()
            queued.discard(name)
            for ref, fol in self._walk_refs(rules[name], self.follow_rule[name]):
                if ref.name in self.follow_rule:
                    f = union(self.follow_rule[ref.name], fol)
                    if f != self.follow_rule[ref.name]:
                        self.follow_rule[ref.name] = f
                        if ref.name not in queued:
                            queued.add(ref.name)
                            todo.append(ref.name)

    def nullable(self, node: Node) -> bool:
        if isinstance(node, Lit):
            return node.text == ""
        if isinstance(node, Cls):
            return False
        if isinstance(node, Rx):
            return rx_nullable(node)
        if isinstance(node, Seq):
            return all(self.nullable(i) for i in node.items)
        if isinstance(node, Alt):
            return any(self.nullable(i) for i in node.items)
        if isinstance(node, Rep):
            return node.lo == 0 or self.nullable(node.item)
        if isinstance(node, Ref):
            if node.name in self._nullable:
                return self._nullable[node.name]
            return self.nullable(self.resolve(node))
        if isinstance(node, Term):
            return False  # an IR terminal is one lexeme (a nullable one is handled by the parser)
        if isinstance(node, SetOp):
            if node.op == "except":
                return True
            if node.op == "not":
                return not self.nullable(node.args[0])
            return all(self.nullable(a) for a in node.args)
        raise TypeError(node)

    def first(self, node: Node) -> Ranges:
        if isinstance(node, Lit):
            return _char_ranges(node.text[0], node.ignore_case) if node.text else ()
        if isinstance(node, Cls):
            return node.ranges
        if isinstance(node, Term):
            lit = getattr(node.terminal, "literal", None)
            ic = getattr(node.terminal, "ignore_case", False)
            return _char_ranges(lit[0], ic) if lit else ANY
        if isinstance(node, Rx | SetOp):
            return ANY  # opaque: assume anything
        if isinstance(node, Seq):
            out: Ranges = ()
            for it in node.items:
                out = union(out, self.first(it))
                if not self.nullable(it):
                    break
            return out
        if isinstance(node, Alt):
            out = ()
            for it in node.items:
                out = union(out, self.first(it))
            return out
        if isinstance(node, Rep):
            return self.first(node.item) if node.hi != 0 else ()
        if isinstance(node, Ref):
            if node.name in self._first:
                return self._first[node.name]
            return self.first(self.resolve(node))
        raise TypeError(node)

    def _walk_refs(self, node: Node, follow: Ranges) -> list[tuple[Ref, Ranges]]:
        out: list[tuple[Ref, Ranges]] = []
        self.walk(node, follow, lambda n, f: out.append((n, f)) if isinstance(n, Ref) else None)
        return out

    def walk(self, node: Node, follow: Ranges, visit: Callable[[Node, Ranges], object]) -> None:
        """Call ``visit(n, follow_of_n)`` for ``node`` and every sub-node (not into refs)."""
        visit(node, follow)
        if isinstance(node, Seq):
            items = node.items
            tails: list[Ranges] = [follow] * (len(items) + 1)
            for i in range(len(items) - 1, -1, -1):
                it = items[i]
                tails[i] = union(self.first(it), tails[i + 1]) if self.nullable(it) else self.first(it)
            for i, it in enumerate(items):
                self.walk(it, tails[i + 1], visit)
        elif isinstance(node, Alt):
            for it in node.items:
                self.walk(it, follow, visit)
        elif isinstance(node, Rep):
            f = union(follow, self.first(node.item)) if node.hi is None or node.hi > 1 else follow
            self.walk(node.item, f, visit)


# ---------------------------------------------------------------------------
# small Thompson automata over code-point ranges, for the greedy-lexing test


class _Nfa:
    def __init__(self) -> None:
        self.edges: list[list[tuple[Ranges, int]]] = []
        self.eps: list[list[int]] = []
        self._steps: dict[tuple[frozenset[int], int], frozenset[int]] = {}
        self._labels: dict[frozenset[int], list[Ranges]] = {}

    def state(self) -> int:
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node: Node, resolve: Callable[[Ref], Node]) -> tuple[int, int]:
        """(start, end) states of ``node``'s automaton; driven by ``bounds.run`` so that
        nesting (and inlined rule chains) cost no interpreter stack."""
        from tether.grammar.bounds import run

        ends: tuple[int, int] = run(self._build(node, resolve))
        return ends

    def _build(self, node: Node, resolve: Callable[[Ref], Node]) -> Generator[Any, Any, tuple[int, int]]:
        s = self.state()
        if isinstance(node, Lit):
            cur = s
            for c in node.text:
                nxt = self.state()
                self.edges[cur].append((_char_ranges(c, node.ignore_case), nxt))
                cur = nxt
            return s, cur
        if isinstance(node, Cls):
            e = self.state()
            self.edges[s].append((node.ranges, e))
            return s, e
        if isinstance(node, Seq):
            cur = s
            for it in node.items:
                a, b = yield self._build(it, resolve)
                self.eps[cur].append(a)
                cur = b
            return s, cur
        if isinstance(node, Alt):
            e = self.state()
            for it in node.items:
                a, b = yield self._build(it, resolve)
                self.eps[s].append(a)
                self.eps[b].append(e)
            return s, e
        if isinstance(node, Rep):
            cur = s
            for _ in range(node.lo):
                a, b = yield self._build(node.item, resolve)
                self.eps[cur].append(a)
                cur = b
            if node.hi is None:
                a, b = yield self._build(node.item, resolve)
                self.eps[cur].append(a)
                self.eps[b].append(cur)
                return s, cur
            e = self.state()
            self.eps[cur].append(e)
            for _ in range(node.hi - node.lo):
                a, b = yield self._build(node.item, resolve)
                self.eps[cur].append(a)
                self.eps[b].append(e)
                cur = b
            return s, e
        if isinstance(node, Ref):
            ends: tuple[int, int] = yield self._build(resolve(node), resolve)
            return ends
        raise TypeError(f"no automaton for {type(node).__name__}")

    def closure(self, states: set[int] | list[int]) -> frozenset[int]:
        seen = set(states)
        stack = list(states)
        while stack:
            for t in self.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)

    def step(self, states: frozenset[int], cp: int) -> frozenset[int]:
        key = (states, cp)
        got = self._steps.get(key)
        if got is None:
            nxt = [t for s in states for rs, t in self.edges[s] if any(lo <= cp <= hi for lo, hi in rs)]
            got = self._steps[key] = self.closure(nxt) if nxt else frozenset()
        return got

    def labels(self, states: frozenset[int]) -> list[Ranges]:
        got = self._labels.get(states)
        if got is None:
            got = self._labels[states] = list(dict.fromkeys(rs for s in states for rs, _ in self.edges[s]))
        return got


class Automaton:
    """The language of one AST node (rule references inlined)."""

    def __init__(self, node: Node, resolve: Callable[[Ref], Node]) -> None:
        self.nfa = _Nfa()
        start, self.accept = self.nfa.build(node, resolve)
        self.start = self.nfa.closure([start])


def _in(cp: int, ranges: Ranges) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def swallows_fast(
    t: Automaton, t_lit: str | None, follow: Ranges, u: Automaton, u_lit: str | None
) -> bool:
    """``swallows`` with shortcuts when ``t`` or ``u`` is one literal string."""
    if not follow:
        return False
    if t_lit is not None and u_lit is not None:
        return len(u_lit) > len(t_lit) and u_lit.startswith(t_lit) and _in(ord(u_lit[len(t_lit)]), follow)
    if t_lit is not None:  # the only w is t_lit itself
        b = u.start
        for ch in t_lit:
            b = u.nfa.step(b, ord(ch))
            if not b:
                return False
        return any(overlaps(rs, follow) for rs in u.nfa.labels(b))
    if u_lit is not None:  # w must be a proper prefix of u_lit
        a = t.start
        for k in range(len(u_lit) - 1):
            a = t.nfa.step(a, ord(u_lit[k]))
            if not a:
                return False
            if t.accept in a and _in(ord(u_lit[k + 1]), follow):
                return True
        return False
    return swallows(t, follow, u)


def swallows(t: Automaton, follow: Ranges, u: Automaton, limit: int = 20000) -> bool:
    """True if some non-empty ``w`` in L(t) followed by a code point ``c`` in ``follow``
    is a prefix of a string of L(u): a greedy lexer that has matched ``w`` as ``t``
    would then go on with ``u`` and lose the parse that ends ``t`` at ``w``.

    Conservative: returns True if the exploration passes ``limit`` state pairs.
    """
    if not follow:
        return False
    start = (t.start, u.start)
    seen = {start}
    queue: deque[tuple[frozenset[int], frozenset[int], bool]] = deque([(t.start, u.start, False)])
    while queue:
        a, b, moved = queue.popleft()
        if moved and t.accept in a:
            for rs in u.nfa.labels(b):
                if overlaps(rs, follow):
                    return True
        la, lb = t.nfa.labels(a), u.nfa.labels(b)
        if not la or not lb:
            continue
        points = sorted({p for rs in la + lb for lo, hi in rs for p in (lo, hi + 1)})
        for i in range(len(points) - 1):
            cp = points[i]
            if not any(lo <= cp <= hi for rs in la for lo, hi in rs):
                continue
            if not any(lo <= cp <= hi for rs in lb for lo, hi in rs):
                continue
            na, nb = t.nfa.step(a, cp), u.nfa.step(b, cp)
            if na and nb and (na, nb) not in seen:
                if len(seen) >= limit:
                    return True
                seen.add((na, nb))
                queue.append((na, nb, True))
    return False
