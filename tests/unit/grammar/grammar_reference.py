"""A slow reference recognizer for the Grammar IR, for tests only.

``cf_accepts(g, text)`` reads the grammar as a plain context-free grammar over
characters: a terminal may match *any* substring its regex matches (no greedy lexing,
no %ignore), checked with Python's ``re``. Earley with nullable handling (Aycock and
Horspool 2002). Fine for strings of a few hundred characters.
"""

from __future__ import annotations

import re
from functools import cache

from tether.grammar import NT, Grammar
from tether.grammar.simplify import nullable_rules


def _compile(g: Grammar) -> dict[str, re.Pattern[str]]:
    out = {}
    for name, t in g.terminals.items():
        if t.expr is not None:
            raise NotImplementedError("set-operation terminals have no `re` spelling")
        out[name] = re.compile(t.pattern)
    return out


def cf_accepts(g: Grammar, text: str) -> bool:
    pats = _compile(g)
    nullable = nullable_rules(g)
    by_lhs: dict[str, list[tuple]] = {}
    for r in g.rules:
        by_lhs.setdefault(r.lhs, []).append(r.rhs)
    n = len(text)

    @cache
    def ends(tname: str, i: int) -> tuple[int, ...]:
        p = pats[tname]
        return tuple(j for j in range(i + 1, n + 1) if p.fullmatch(text, i, j))

    sets: list[set[tuple]] = [set() for _ in range(n + 1)]
    start = ("^", (NT(g.start),), 0, 0)
    sets[0].add(start)
    for i in range(n + 1):
        agenda = list(sets[i])
        while agenda:
            item = agenda.pop()
            lhs, rhs, dot, origin = item
            if dot < len(rhs):
                s = rhs[dot]
                if isinstance(s, NT):
                    for alt in by_lhs.get(s.name, ()):
                        new = (s.name, alt, 0, i)
                        if new not in sets[i]:
                            sets[i].add(new)
                            agenda.append(new)
                    if s.name in nullable:
                        new = (lhs, rhs, dot + 1, origin)
                        if new not in sets[i]:
                            sets[i].add(new)
                            agenda.append(new)
                else:
                    for j in ends(s.name, i):
                        sets[j].add((lhs, rhs, dot + 1, origin))
            else:
                for it in list(sets[origin]):
                    l2, r2, d2, o2 = it
                    if d2 < len(r2) and r2[d2] == NT(lhs):
                        new = (l2, r2, d2 + 1, o2)
                        if new not in sets[i]:
                            sets[i].add(new)
                            agenda.append(new)
    return ("^", (NT(g.start),), 1, 0) in sets[n]
