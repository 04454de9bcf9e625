"""Dropping the rules a compiled schema cannot use: those that derive no finite text,
then the unreachable ones (linear; the compiler's names make a fast path)."""

from __future__ import annotations

import operator
from typing import Any

from tether.grammar.ir import NT, Grammar, Rule, T


def prune(g: Grammar) -> None:
    """Drop rules that use nonterminals deriving no finite text, then unreachable ones.

    Rules and terminals are kept in their order. Rules are defined children first, so a
    few sweeps in rule order settle productivity and a few in reverse order reachability;
    a worklist over what is left finishes either. Symbols are compared by name: the
    compiler's terminal names (``key3``) never equal rule names (``obj_7``, ``root``),
    and every terminal it uses is defined; otherwise ``_prune_general`` does the work.

    Cost: about three passes over the rules, each symbol read in C.
    """
    rules = g.rules
    defined = set(map(_LHS, rules))
    if not defined.isdisjoint(g.terminals):
        _prune_general(g)
        return
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
