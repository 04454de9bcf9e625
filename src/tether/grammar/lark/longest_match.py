"""A negative look-ahead that reads past the end of a Lark terminal, decided exactly by
tether's greedy lexer and the grammar around the terminal.

Lark's lexer lets a terminal's look-ahead read the input after the lexeme
(lark.lark's ``OP: /[+*]|[?](?![a-z])/``, python.lark's ``STRING: /"(?!"").*?"/``).
tether lowers the regex on the lexeme alone, where the end of the lexeme does not match
the look-ahead's body. The two differ only where the lexeme ``x y`` (``x`` before the
look-ahead, ``y`` after it) ends inside a text of the body ``A`` (``y`` a proper prefix
of it) and the next character ``c`` continues that text: Lark's lexer refuses the
terminal there; tether's could end the lexeme. It does not, and the look-ahead is
exact as lowered, when at every use of the terminal in the grammar:

(a) another terminal ``U`` that the parser allows at the same place continues the
    lexeme: ``x y c`` is a prefix of a text of ``U`` (the lexer is greedy: a lexeme goes
    on while the next character keeps an allowed terminal alive; ``?`` then ``[a-z]`` is
    a ``RULE``), or ``U`` is ``%ignore``d; or
(b) no terminal that may follow the terminal there, nor an ``%ignore``d one, starts
    with a character of ``A`` (the lexeme ends and the next one dies at ``c``, where Lark
    also fails: any terminal Lark could take instead is a ``U`` of (a)).

Both are decided soundly, not completely, on the BNF rules (FIRST and FOLLOW sets; a
place where ``T`` is allowed is a rule ``B -> γ T δ``: ``U`` is allowed there if it can
start ``T δ``'s sibling items or what follows the completed last symbol of ``γ``). Where
they do not hold, the caller refuses the look-ahead with its place.
"""

from __future__ import annotations

from typing import Any

from tether.errors import LimitError, RegexError
from tether.grammar.ir import NT, Grammar, T
from tether.grammar.lark.lookahead import (
    Tree,
    Unsupported,
    contexts,
    looks,
    max_len,
    min_len,
    parse_tree,
    prefixes,
    render,
    tree_chars,
)
from tether.regex import charset as cs

_MAX_FIRST_CHARS = 256  # a look-ahead body with more distinct characters is not analysed


class _Places:
    """FIRST, FOLLOW and nullable sets of ``g``'s rules, and where terminals may come.
    Every fixpoint is a worklist: each set grows (or each flag flips) a bounded number
    of times, so a grammar of many rules costs about its size times its terminals."""

    def __init__(self, g: Grammar) -> None:
        self.g = g
        self.nts = {r.lhs for r in g.rules}
        rules = g.rules
        users: dict[str, list[int]] = {}  # nonterminal -> rules that use it
        for i, r in enumerate(rules):
            for x in r.rhs:
                if isinstance(x, NT):
                    users.setdefault(x.name, []).append(i)
        self.nullable: set[str] = set()
        self.first: dict[str, set[str]] = {n: set() for n in self.nts}
        todo = list(range(len(rules)))
        while todo:
            r = rules[todo.pop()]
            f, n = self.first_of(r.rhs)
            grew = not f <= self.first[r.lhs]
            if grew:
                self.first[r.lhs] |= f
            if n and r.lhs not in self.nullable:
                self.nullable.add(r.lhs)
                grew = True
            if grew:
                todo.extend(users.get(r.lhs, ()))
        self.follow: dict[str, set[str]] = {n: set() for n in self.nts}
        by_lhs: dict[str, list[int]] = {}
        for i, r in enumerate(rules):
            by_lhs.setdefault(r.lhs, []).append(i)
        todo = list(range(len(rules)))
        while todo:
            r = rules[todo.pop()]
            for i, x in enumerate(r.rhs):
                if isinstance(x, NT):
                    f, n = self.first_of(r.rhs[i + 1 :])
                    if n:
                        f = f | self.follow[r.lhs]
                    if not f <= self.follow[x.name]:
                        self.follow[x.name] |= f
                        todo.extend(by_lhs.get(x.name, ()))
        # the rules that may follow a prefix: (lhs, prefix) -> FIRST and nullable of each rest
        self.rests: dict[tuple[str, tuple[Any, ...]], list[tuple[set[str], bool]]] = {}
        self.uses: dict[str, set[tuple[str, tuple[Any, ...]]]] = {}  # NT -> (lhs, prefix ending in it)
        self.starts: dict[str, set[str]] = {}  # lhs -> the NTs its rules start with
        for r in rules:
            for i in range(len(r.rhs) + 1):
                self.rests.setdefault((r.lhs, r.rhs[:i]), []).append(self.first_of(r.rhs[i:]))
            for i, x in enumerate(r.rhs):
                if isinstance(x, NT):
                    self.uses.setdefault(x.name, set()).add((r.lhs, r.rhs[: i + 1]))
            if r.rhs and isinstance(r.rhs[0], NT):
                self.starts.setdefault(r.lhs, set()).add(r.rhs[0].name)
        self.component = _left_corner_components(g, self.nullable)
        self._after: dict[str, dict[str, bool]] = {}
        self._at_start: dict[str, dict[str, bool]] = {}

    def first_of(self, syms: tuple[Any, ...]) -> tuple[set[str], bool]:
        out: set[str] = set()
        for s in syms:
            if isinstance(s, T):
                out.add(s.name)
                return out, False
            out |= self.first.get(s.name, set())
            if s.name not in self.nullable:
                return out, False
        return out, True

    def _siblings_allow(self, lhs: str, prefix: tuple[Any, ...], u: str, ok: dict[str, bool]) -> bool:
        """Whether a rule ``lhs -> prefix β`` (alive wherever one with this prefix is)
        takes ``u`` next: ``u`` in FIRST(β), or β nullable and ``u`` after ``lhs``."""
        return any(u in f or (n and ok.get(lhs, False)) for f, n in self.rests.get((lhs, prefix), ()))

    def after(self, u: str) -> dict[str, bool]:
        """``ok[A]``: ``u`` is allowed whenever ``A`` has just been completed (a greatest
        fixpoint; the start rule may also end the text). ``A`` completed where it was
        predicted, with every rule of the nonterminals predicted with it: a rule
        ``X -> A β`` of such an ``X`` (same left-corner component) advances over it."""
        got = self._after.get(u)
        if got is not None:
            return got
        always = set()
        for r in self.g.rules:
            if r.rhs and isinstance(r.rhs[0], NT) and self.component.get(r.lhs) == self.component.get(r.rhs[0].name):
                if u in self.first_of(r.rhs[1:])[0]:
                    always.add(r.rhs[0].name)
        ok = {n: n in always or n != self.g.start for n in self.nts}
        dependents: dict[str, set[str]] = {}  # lhs -> the NTs whose uses read ok[lhs]
        for x, uses in self.uses.items():
            for lhs, _prefix in uses:
                dependents.setdefault(lhs, set()).add(x)
        todo = list(self.nts)
        while todo:
            x = todo.pop()
            if not ok.get(x, False) or x in always:
                continue
            if not all(self._siblings_allow(lhs, prefix, u, ok) for lhs, prefix in self.uses.get(x, ())):
                ok[x] = False
                todo.extend(dependents.get(x, ()))
        self._after[u] = ok
        return ok

    def at_start(self, u: str) -> dict[str, bool]:
        """``ok[N]``: ``u`` is allowed wherever ``N`` is predicted: in FIRST(N), or at each
        use ``P -> α . N β`` (a greatest fixpoint: a use at the start of ``N``'s own
        rules is the same place)."""
        got = self._at_start.get(u)
        if got is not None:
            return got
        ok = {n: True for n in self.nts}
        todo = list(self.nts)
        while todo:
            n = todo.pop()
            if not ok[n] or u in self.first[n]:
                continue
            good = n != self.g.start
            for lhs, prefix in self.uses.get(n, ()):
                before = prefix[:-1]
                if not (ok[lhs] if not before else self.allowed_with(lhs, before, u)):
                    good = False
                    break
            if not good:
                ok[n] = False
                todo.extend(self.starts.get(n, ()))
        self._at_start[u] = ok
        return ok

    def allowed_with(self, lhs: str, before: tuple[Any, ...], u: str) -> bool:
        """Whether ``u`` is allowed wherever the parser is at ``lhs -> before . T δ``."""
        if not before:
            return self.at_start(u).get(lhs, False)
        last = before[-1]
        ok = self.after(u)
        if isinstance(last, NT) and ok.get(last.name, False):
            return True
        return self._siblings_allow(lhs, before, u, ok)

    def may_follow(self, lhs: str, rest: tuple[Any, ...]) -> set[str]:
        """The terminals that may come after ``T`` at ``lhs -> γ T . rest`` (a superset)."""
        f, n = self.first_of(rest)
        return f | self.follow[lhs] if n else f


def _left_corner_components(g: Grammar, nullable: set[str]) -> dict[str, int]:
    """The strongly connected components of the left-corner graph (``X -> Y ...``, ``Y``
    after a nullable prefix): ``X`` is predicted whenever ``Y`` is, and the other way
    round, exactly when they share one (iterative Kosaraju)."""
    edges: dict[str, set[str]] = {}
    back: dict[str, set[str]] = {}
    for r in g.rules:
        for x in r.rhs:
            if not isinstance(x, NT):
                break
            edges.setdefault(r.lhs, set()).add(x.name)
            back.setdefault(x.name, set()).add(r.lhs)
            if x.name not in nullable:
                break
    order: list[str] = []
    seen: set[str] = set()
    for root in {r.lhs for r in g.rules}:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(edges.get(root, ())))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                order.append(node)
            elif nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, iter(edges.get(nxt, ()))))
    component: dict[str, int] = {}
    for root in reversed(order):
        if root in component:
            continue
        component[root] = len(component)
        label = component[root]
        todo = [root]
        while todo:
            node = todo.pop()
            for prev in back.get(node, ()):
                if prev not in component:
                    component[prev] = label
                    todo.append(prev)
    return component


def _starts_with(node: Any, chars: cs.CharSet) -> bool:
    """Whether a text of regex-layer ``node`` starts with a character of ``chars``
    (True when undecided)."""
    import tether.regex as rx  # noqa: PLC0415

    for lo, hi in chars:
        for cp in range(lo, hi + 1):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            d = node
            for b in chr(cp).encode("utf-8"):
                d = rx.derivative(d, b)
            if rx.is_empty(d) is not True:
                return True
    return False


def _prefixes_of(want: Any, node: Any, limit: int = 4000) -> bool:
    """Whether every text of regex-layer node ``want`` is a prefix of a text of ``node``
    (False when undecided within ``limit`` pairs of derivatives: a True answer is sound)."""
    import tether.regex as rx  # noqa: PLC0415

    seen: set[tuple[Any, Any]] = set()
    todo = [(want, node)]
    while todo:
        a, b = todo.pop()
        if (a, b) in seen:
            continue
        seen.add((a, b))
        if len(seen) > limit:
            return False
        empty_a = rx.is_empty(a)
        if empty_a is True:
            continue
        if empty_a is None or rx.is_empty(b) is not False:
            return False  # a text of `want` goes on where no text of `node` does (or undecided)
        for mask in rx.byte_classes([a, b]):
            byte = (mask & -mask).bit_length() - 1
            todo.append((rx.derivative(a, byte), rx.derivative(b, byte)))
    return True


def _decided(g: Grammar, places: _Places, name: str, continuing: list[str], chars: cs.CharSet) -> bool:
    """(a) or (b) of the module docstring at every use of terminal ``name``."""
    if any(u in g.ignore for u in continuing):
        return True
    starting = {t.name for t in g.terminals.values() if _starts_with(t.to_node(), chars)}
    ignored_start = bool(starting & set(g.ignore))  # then (b) holds nowhere
    for r in g.rules:
        for i, s in enumerate(r.rhs):
            if not (isinstance(s, T) and s.name == name):
                continue
            if any(places.allowed_with(r.lhs, r.rhs[:i], u) for u in continuing):
                continue
            if ignored_start or places.may_follow(r.lhs, r.rhs[i + 1 :]) & starting:
                return False
    return True


def decided_by_longest_match(g: Grammar, name: str, pattern: str,
                             memo: dict[str, Any] | None = None) -> list[str] | None:
    """For terminal ``name`` of ``g`` with regex ``pattern``: if every look-around of it
    that may read outside the lexeme is a negative look-ahead decided as the module
    docstring says, a description of each decision ("terminal U continues it" or "nothing
    that follows starts with it"); else None (the caller refuses the look-around).
    ``memo`` keeps the grammar's facts between the terminals of one grammar."""
    import tether.regex as rx  # noqa: PLC0415

    tree = parse_tree(pattern)
    if tree is None:
        return None
    places: _Places | None = None
    notes: list[str] = []
    try:
        for look in looks(tree):
            _, positive, body, ahead = look
            longest = max_len(body)
            around = contexts(tree, look)
            if not ahead:  # a look-behind must stay inside the lexeme
                if all(longest is not None and longest <= min_len(b) for b, _a in around):
                    continue
                return None
            if all(longest is not None and longest <= min_len(a) for _b, a in around):
                continue  # decided inside the lexeme
            if positive:
                return None
            chars = tree_chars(body)
            if sum(hi - lo + 1 for lo, hi in chars) > _MAX_FIRST_CHARS:
                return None
            # x · ((y · c) ∩ prefixes(A)) for each place of the look-ahead
            want = rx.alt(*[
                rx.concat(rx.parse(render(b)),
                          rx.intersect(rx.concat(rx.parse(render(a)), rx.ANY_CHAR),
                                       rx.parse(render(prefixes(body)))))
                for b, a in around
            ])
            continuing = [t.name for t in g.terminals.values()
                          if t.name != name and _prefixes_of(want, t.to_node())]
            if places is None:
                memo = {} if memo is None else memo
                places = memo.get("places") or memo.setdefault("places", _Places(g))
            if not _decided(g, places, name, continuing, chars):
                return None
            notes.append(f"continued by {', '.join(continuing)}" if continuing else
                         "nothing that may follow starts with its text")
    except (Unsupported, RecursionError, RegexError, LimitError):
        return None  # not decided here: the caller refuses the look-ahead
    return notes or None


__all__ = ["Tree", "decided_by_longest_match"]
