"""The parse tree of an accepted text, for users who want the structure back.

1. Re-run the Earley parser over the text's lexemes *without* Leo items, so that every
   completed item ``B -> γ .`` from row ``k`` in row ``e`` is recorded: it says ``B``
   derives the lexemes ``k .. e`` (and a nullable ``B`` derives every empty span).
2. Build the tree top-down from ``$start`` over all lexemes, with an explicit work list
   (deep trees need no recursion): a node ``A`` over ``[i, j)`` takes the first rule of
   ``A`` whose right side splits ``[i, j)`` into lexemes and chart facts (a small dynamic
   program over the rule's symbols). A child covering the whole ``[i, j)`` must have
   been justified first (the nonterminals over one span are justified in rounds), and
   empty spans use, per nullable nonterminal, a rule whose symbols became nullable
   earlier; so unit-rule cycles (``A -> B``, ``B -> A``) cannot loop.

Ambiguous texts get one of their trees (rules tried in definition order, shorter first
children first). ``%ignore``d lexemes are left out of the tree. Cost: the chart without
Leo items is quadratic in the length of long right-recursive inputs; meant for outputs of
a generation, not for megabytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tether.parser.earley import EarleyParser
from tether.parser.tables import ParserTables


@dataclass(frozen=True, slots=True)
class Lexeme:
    """A leaf: the text of one lexeme and the terminal it was scanned as."""

    terminal: str
    text: str
    start: int  # byte offsets in the input
    end: int


@dataclass(slots=True)
class Tree:
    """An inner node: a nonterminal and its children, in order."""

    rule: str
    children: list[Tree | Lexeme] = field(default_factory=list)

    def pretty(self, indent: str = "  ") -> str:
        """The tree as indented text, one node per line."""
        lines: list[str] = []
        todo: list[tuple[Tree | Lexeme, int]] = [(self, 0)]
        while todo:
            node, depth = todo.pop()
            if isinstance(node, Lexeme):
                lines.append(f"{indent * depth}{node.terminal} {node.text!r}")
            else:
                lines.append(f"{indent * depth}{node.rule}")
                todo.extend((c, depth + 1) for c in reversed(node.children))
        return "\n".join(lines)

    def iter_lexemes(self) -> list[Lexeme]:
        """The leaves, left to right."""
        out: list[Lexeme] = []
        todo: list[Tree | Lexeme] = [self]
        while todo:
            node = todo.pop()
            if isinstance(node, Lexeme):
                out.append(node)
            else:
                todo.extend(reversed(node.children))
        return out


def build_tree(
    tables: ParserTables, lexemes: list[tuple[int, int, tuple[int, ...]]], data: bytes
) -> Tree:
    """The parse tree of ``lexemes`` (``(start, end, terminal ids)`` per scanned lexeme,
    offsets into ``data``) under the grammar's start rule.

    Raises:
        ValueError: the lexemes do not form a sentence.
    """
    t = tables
    p = EarleyParser(t, leo=False)
    for _, _, ts in lexemes:
        if not p.push(ts):
            raise ValueError("the lexemes do not form a sentence (rejected)")
    if not p.is_accepting():
        raise ValueError("the lexemes do not form a sentence (incomplete)")
    pm = (1 << t.pos_bits) - 1
    ends: dict[tuple[int, int], set[int]] = {}  # (nonterminal, from row) -> rows it ends in
    for e, row in enumerate(p.rows):
        for it in row.kernel:
            pos = it & pm
            if t.sym[pos] < 0:
                key = (t.lhs[pos], it >> t.pos_bits)
                got = ends.get(key)
                if got is None:
                    ends[key] = {e}
                else:
                    got.add(e)
    leaf_sets = [set(ts) for _, _, ts in lexemes]

    # empty spans: per nullable nonterminal, a rule whose symbols became nullable earlier
    empty_rule: dict[int, int] = {}
    changed = True
    while changed:
        changed = False
        for a in range(t.n_terminals, t.n_symbols):
            if a in empty_rule or not t.nullable[a]:
                continue
            for r in t.rules_of[a]:
                if all(
                    x in empty_rule if x >= t.n_terminals else t.nullable[x] for x in t.rule_rhs[r]
                ):
                    empty_rule[a] = r
                    changed = True
                    break

    def split(
        rule: int, i: int, j: int, same: dict[int, object]
    ) -> list[tuple[int, int, int]] | None:
        """Spans ``(symbol, from, to)`` of the rule's right side over ``[i, j)``, or None;
        a nonterminal child may cover all of ``[i, j)`` only if it is in ``same``."""
        rhs = t.rule_rhs[rule]
        reach: list[dict[int, int]] = [{i: -1}]  # per dot: reachable row -> previous row
        last = len(rhs) - 1
        for d, s in enumerate(rhs):
            nxt: dict[int, int] = {}
            for k in reach[-1]:
                if s < t.n_terminals:
                    if k < j and s in leaf_sets[k]:
                        nxt.setdefault(k + 1, k)
                elif d == last:  # only a child ending at j helps (keeps right recursion linear)
                    if j in ends.get((s, k), ()) and (k != i or s in same):
                        nxt.setdefault(j, k)
                else:
                    for e in sorted(ends.get((s, k), ())):
                        if e <= j and (k != i or e != j or s in same):
                            nxt.setdefault(e, k)
                if t.nullable[s]:
                    nxt.setdefault(k, k)
            if not nxt:
                return None
            reach.append(nxt)
        if j not in reach[-1]:
            return None
        spans = []
        k = j
        for d in range(len(rhs), 0, -1):
            prev = reach[d][k]
            spans.append((rhs[d - 1], prev, k))
            k = prev
        return spans[::-1]

    # non-empty spans: the nonterminals over one span are justified in rounds, a child over
    # the same whole span only once justified itself, so unit-rule cycles cannot loop
    justified: dict[tuple[int, int], dict[int, object]] = {}

    def justify(i: int, j: int) -> dict[int, object]:
        got = justified.get((i, j))
        if got is None:
            got = justified[(i, j)] = {}
            pending = {a for a in range(t.n_terminals, t.n_symbols) if j in ends.get((a, i), ())}
            progress = True
            while pending and progress:
                progress = False
                for a in sorted(pending):
                    for r in t.rules_of[a]:
                        spans = split(r, i, j, got)
                        if spans is not None:
                            got[a] = spans
                            pending.discard(a)
                            progress = True
                            break
        return got

    root = Tree(t.nonterminals[0])
    todo: list[tuple[Tree, int, int, int]] = [(root, t.start, 0, len(lexemes))]
    while todo:
        node, a, i, j = todo.pop()
        if i == j:
            spans = [(x, i, i) for x in t.rule_rhs[empty_rule[a]]]
        else:
            spans = justify(i, j)[a]  # type: ignore[assignment]
        for s, k, e in spans:
            if s < t.n_terminals:
                if e > k:  # (an absent nullable terminal leaves no leaf)
                    start, end, _ = lexemes[k]
                    text = data[start:end].decode("utf-8", errors="replace")
                    node.children.append(Lexeme(t.terminals[s].name, text, start, end))
            else:
                child = Tree(t.nonterminals[s - t.n_terminals])
                node.children.append(child)
                todo.append((child, s, k, e))
    only = root.children[0]
    assert isinstance(only, Tree)
    return only
