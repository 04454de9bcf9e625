"""Dropping the rules a compiled schema cannot use: those that derive no finite text,
then the unreachable ones (linear; the compiler's names make a fast path)."""

from __future__ import annotations

import operator
from typing import Any

from tether.grammar.ir import NT, Grammar, Rule, T, symbol_ids


def prune(g: Grammar) -> None:
    """Drop rules that use nonterminals deriving no finite text, then unreachable ones.

    Rules and terminals are kept in their order. Rules are defined children first, so a
    few sweeps in rule order settle productivity and a few in reverse order reachability;
    a worklist over what is left finishes either. The sweeps read the rules as integer
    ids (``symbol_ids``), which the grammar then keeps for the parser tables
    (``Grammar.mark_trimmed``) when nothing was dropped. Where a symbol names nothing
    defined, symbols are compared by name (``_prune_names``); where a rule name is also a
    terminal name, by kind (``_prune_general``).

    Cost: one encoding of the rules and about two passes over them, each right side read
    in C.
    """
    ids = symbol_ids(g)
    if ids is None or g.start not in ids.nid:
        defined = set(map(_LHS, g.rules))
        if not defined.isdisjoint(g.terminals):
            _prune_general(g)
        else:
            _prune_names(g)
        return
    rules = g.rules
    lhs, rhs = ids.lhs, ids.rhs
    n_t = len(g.terminals)
    n_ids = n_t + 1 + len(ids.names)
    productive = set(range(n_t))
    all_productive, add = productive.issuperset, productive.add
    left = []  # rule indices not known to be productive
    for r, (a, b) in enumerate(zip(lhs, rhs, strict=True)):
        if all_productive(b):
            add(a)
        else:
            left.append(r)
    rest = left
    for _ in range(_SWEEPS - 1):
        if not rest:
            break
        left = []
        for r in rest:
            if all_productive(rhs[r]):
                add(lhs[r])
            else:
                left.append(r)
        if len(left) == len(rest):
            break
        rest = left
    else:
        if rest:
            rest = _close_productive_ids(rest, lhs, rhs, productive)
    bad = set(rest)  # rules using a nonterminal that derives nothing
    reach = {ids.nid[g.start]}
    is_reached = reach.__contains__
    todo: Any = [r for r in range(len(rules)) if r not in bad] if bad else range(len(rules))
    for _ in range(_SWEEPS):
        left = []
        n_reached = len(reach)
        for r in reversed(todo):
            if is_reached(lhs[r]):
                reach.update(rhs[r])
            else:
                left.append(r)
        if not left or len(reach) == n_reached:
            todo = []
            break
        todo = left[::-1]
    if todo:  # a worklist over the rules not yet expanded
        by_lhs: dict[int, list[int]] = {}
        for r in todo:
            by_lhs.setdefault(lhs[r], []).append(r)
        stack = [a for a in by_lhs if a in reach]
        while stack:
            for r in by_lhs.pop(stack.pop(), ()):
                for x in rhs[r]:
                    if x not in reach:
                        reach.add(x)
                        if x in by_lhs:
                            stack.append(x)
    every_rule = not bad and reach.issuperset(range(n_t + 1, n_ids))
    every_terminal = reach.issuperset(range(n_t))
    if not every_rule:
        g.rules = [rule for r, rule in enumerate(rules) if lhs[r] in reach and r not in bad]
    if not every_terminal:
        g.terminals = {k: v for i, (k, v) in enumerate(g.terminals.items()) if i in reach}
    g.mark_trimmed(ids if every_rule and every_terminal else None)


def _close_productive_ids(rest: list[int], lhs: list[int], rhs: list[tuple[int, ...]],
                          productive: set[int]) -> list[int]:
    """Finish ``productive`` over the rules ``rest`` (indices) with a worklist; the rules
    that use a symbol deriving nothing."""
    count: dict[int, int] = {}
    users: dict[int, list[int]] = {}
    todo: list[int] = []
    for r in rest:
        n = 0
        for x in rhs[r]:
            if x not in productive:
                n += 1
                users.setdefault(x, []).append(r)
        count[r] = n
        if not n and lhs[r] not in productive:
            productive.add(lhs[r])
            todo.append(lhs[r])
    while todo:
        for r in users.get(todo.pop(), ()):
            count[r] -= 1
            if not count[r] and lhs[r] not in productive:
                productive.add(lhs[r])
                todo.append(lhs[r])
    return [r for r in rest if count[r]]


def _prune_names(g: Grammar) -> None:
    """``prune`` comparing symbols by name (a name that is neither a rule nor a terminal
    derives nothing); rule and terminal names must differ."""
    rules = g.rules
    defined = set(map(_LHS, rules))
    productive = set(g.terminals)
    all_productive = productive.issuperset  # (an iterable is read in C, no set built)
    rest = rules
    for _ in range(_SWEEPS):
        left = []
        for r in rest:
            if all_productive(map(_NAME, r.rhs)):
                productive.add(r.lhs)
            else:
                left.append(r)
        if len(left) == len(rest):
            break
        rest = left
    else:
        rest = _close_productive(rest, productive)
    bad = {id(r) for r in rest}  # rules using a nonterminal that derives nothing
    reach = {g.start}
    is_reached = reach.__contains__
    todo = [r for r in rules if id(r) not in bad] if bad else rules
    for _ in range(_SWEEPS):
        left = []
        n_reached = len(reach)
        for r in reversed(todo):
            if is_reached(r.lhs):
                reach.update(map(_NAME, r.rhs))
            else:
                left.append(r)
        if not left or len(reach) == n_reached:
            todo = []
            break
        todo = left[::-1]
    if todo:  # a worklist over the rules not yet expanded
        by_lhs: dict[str, list[Rule]] = {}
        for r in todo:
            by_lhs.setdefault(r.lhs, []).append(r)
        stack = [a for a in by_lhs if a in reach]
        while stack:
            for r in by_lhs.pop(stack.pop(), ()):
                for x in r.rhs:
                    if x.name not in reach:
                        reach.add(x.name)
                        if x.name in by_lhs:
                            stack.append(x.name)
    if bad:
        g.rules = [r for r in rules if r.lhs in reach and id(r) not in bad]
    elif not defined <= reach:
        g.rules = [r for r in rules if r.lhs in reach]
    if not g.terminals.keys() <= reach:
        g.terminals = {k: v for k, v in g.terminals.items() if k in reach}
    g.mark_trimmed()


def _close_productive(rest: list[Rule], productive: set[str]) -> list[Rule]:
    """Finish ``productive`` over the rules ``rest`` with a worklist; the rules that use
    a name deriving nothing."""
    count: list[int] = []
    users: dict[str, list[int]] = {}
    todo: list[str] = []
    for k, r in enumerate(rest):
        n = 0
        for x in r.rhs:
            if x.name not in productive:
                n += 1
                users.setdefault(x.name, []).append(k)
        count.append(n)
        if not n and r.lhs not in productive:
            productive.add(r.lhs)
            todo.append(r.lhs)
    while todo:
        for k in users.get(todo.pop(), ()):
            count[k] -= 1
            if not count[k] and rest[k].lhs not in productive:
                productive.add(rest[k].lhs)
                todo.append(rest[k].lhs)
    return [r for k, r in enumerate(rest) if count[k]]


_SWEEPS = 4  # sweeps over the rules before a worklist takes over
_NAME = operator.attrgetter("name")
_LHS = operator.attrgetter("lhs")


def _prune_general(g: Grammar) -> None:
    """``prune`` for any grammar (symbols told apart by kind): a worklist, linear."""
    rules = g.rules
    pending = [0] * len(rules)
    uses: dict[str, list[int]] = {}
    ready: list[int] = []
    for idx, r in enumerate(rules):
        n = 0
        for x in r.rhs:
            if not isinstance(x, T):
                n += 1
                uses.setdefault(x.name, []).append(idx)
        pending[idx] = n
        if not n:
            ready.append(idx)
    productive: set[str] = set()
    while ready:
        lhs = rules[ready.pop()].lhs
        if lhs in productive:
            continue
        productive.add(lhs)
        for idx in uses.get(lhs, ()):
            pending[idx] -= 1
            if not pending[idx]:
                ready.append(idx)
    # a rule whose every nonterminal is productive has a productive lhs
    g.rules = [r for idx, r in enumerate(rules) if not pending[idx]]
    reach = {g.start}
    stack = [g.start]
    by_lhs: dict[str, list[Any]] = {}
    for r in g.rules:
        by_lhs.setdefault(r.lhs, []).append(r)
    used_t: set[str] = set()
    while stack:
        for r in by_lhs.get(stack.pop(), []):
            for x in r.rhs:
                if isinstance(x, NT) and x.name not in reach:
                    reach.add(x.name)
                    stack.append(x.name)
                elif isinstance(x, T):
                    used_t.add(x.name)
    g.rules = [r for r in g.rules if r.lhs in reach]
    g.terminals = {k: v for k, v in g.terminals.items() if k in used_t}
