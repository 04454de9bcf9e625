"""Small hand-written grammars and a brute-force language oracle for the parser tests."""

from __future__ import annotations

from itertools import product

from tether.grammar.ir import NT, Grammar, T, Terminal


def build(
    start: str, rules: dict[str, list[str]], terminals: dict[str, str] | None = None
) -> Grammar:
    """A grammar from ``{"S": ["a S", "a", ""]}``: a word naming a terminal (a key of
    ``terminals``, default: single lowercase letters as literals) is a terminal, any other
    word a nonterminal; ``""`` is ε."""
    g = Grammar(start)
    words = {w for alts in rules.values() for alt in alts for w in alt.split()}
    if terminals is None:
        terminals = {w: w for w in sorted(words) if len(w) == 1 and w.islower()}
    for name, lit in terminals.items():
        g.add_terminal(Terminal(name, literal=lit))
    for lhs, alts in rules.items():
        for alt in alts:
            g.add_rule(lhs, *[T(w) if w in terminals else NT(w) for w in alt.split()])
    return g


def language(
    rules: dict[str, list[str]], terminals: set[str], max_len: int
) -> dict[str, set[tuple[str, ...]]]:
    """Per nonterminal, every terminal string of length ≤ ``max_len`` it derives
    (least fixpoint of the rules read as set equations)."""
    lang: dict[str, set[tuple[str, ...]]] = {a: set() for a in rules}
    changed = True
    while changed:
        changed = False
        for a, alts in rules.items():
            for alt in alts:
                parts: list[set[tuple[str, ...]]] = []
                for w in alt.split():
                    parts.append({(w,)} if w in terminals else lang.get(w, set()))
                acc: set[tuple[str, ...]] = {()}
                for part in parts:
                    acc = {x + y for x in acc for y in part if len(x) + len(y) <= max_len}
                    if not acc:
                        break
                new = acc - lang[a]
                if new:
                    lang[a] |= new
                    changed = True
    return lang


def strings(alphabet: list[str], max_len: int):
    for n in range(max_len + 1):
        yield from product(alphabet, repeat=n)
