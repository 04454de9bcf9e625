"""The front-end AST shared by the GBNF, Lark and KBNF readers, before lowering to the IR.

Every front end parses its text into these nodes (hash-consed by value, so identical
groups are lowered once), then ``tether.grammar.lower`` turns them into ``Grammar`` rules.
Character classes are sets of Unicode code points kept as sorted disjoint ranges.

Nodes carry the source offset they came from (``pos``, not part of equality) so that
lowering errors can point at the text.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from tether.regex import charset

MAX_CP = 0x10FFFF

Ranges = tuple[tuple[int, int], ...]


# The interval-set algebra is the regex layer's (code points, normalized tuples).
normalize = charset.normalize
complement = charset.complement


def union(a: Ranges, b: Ranges) -> Ranges:
    return charset.union(a, b)


def overlaps(a: Ranges, b: Ranges) -> bool:
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


class Node:
    """Base of the AST node kinds (value objects; ``pos`` is ignored by ``==``)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Lit(Node):
    """A literal string (``ignore_case``: Lark ``"..."i``)."""

    text: str
    ignore_case: bool = False
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Cls(Node):
    """One code point from ``ranges`` (already resolved: negation applied)."""

    ranges: Ranges
    negated_view: Ranges | None = field(default=None, compare=False)  # for readable regexes
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Rx(Node):
    """An opaque regex in tether's syntax (Lark ``/.../``, KBNF ``#"..."``)."""

    pattern: str
    flags: str = ""  # subset of "imsx" (Lark flags), already checked
    lazy: bool = False
    flavor: str = "python"  # or "ecma" (xgrammar's Regex("..."))
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class SetOp(Node):
    """A terminal-level set operation: ``and`` (intersection), ``not`` (complement)
    or ``except`` (strings not containing the operand; KBNF ``except!``)."""

    op: str
    args: tuple[Node, ...]
    max_reps: int | None = None
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Term(Node):
    """An existing IR terminal used as is (composition of already-lowered grammars)."""

    terminal: object  # tether.grammar.ir.Terminal (the AST does not import the IR)
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Seq(Node):
    items: tuple[Node, ...]
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Alt(Node):
    items: tuple[Node, ...]
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Rep(Node):
    """``item{lo,hi}``; ``hi=None`` is unbounded."""

    item: Node
    lo: int
    hi: int | None
    pos: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Ref(Node):
    """A reference to a rule (or, in Lark, a terminal) by name."""

    name: str
    pos: int = field(default=-1, compare=False)


# a reader step: a generator driven by ``bounds.run`` (nesting costs heap, not stack)
Gen = Generator[Any, Any, Node]

EPS = Seq(())


def seq(items: list[Node], pos: int = -1) -> Node:
    """Build a sequence, flattening nested sequences and dropping ε."""
    flat: list[Node] = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        elif isinstance(it, Lit) and it.text == "":
            continue
        else:
            flat.append(it)
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat), pos)


def alt(items: list[Node], pos: int = -1) -> Node:
    """Build an alternation, flattening nested ones and dropping duplicates."""
    flat: dict[Node, None] = {}  # insertion-ordered set: linear in the alternatives
    for it in items:
        for x in it.items if isinstance(it, Alt) else (it,):
            if isinstance(x, Lit) and x.text == "":
                x = EPS
            flat.setdefault(x)
    if len(flat) == 1:
        return next(iter(flat))
    return Alt(tuple(flat), pos)


def walk(node: Node) -> Iterator[Node]:
    """``node`` and every node inside it, depth first (an explicit stack: any depth)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, Seq | Alt):
            stack.extend(n.items)
        elif isinstance(n, Rep):
            stack.append(n.item)
        elif isinstance(n, SetOp):
            stack.extend(n.args)


def refs(node: Node) -> list[Ref]:
    """Every rule reference inside ``node``."""
    return [n for n in walk(node) if isinstance(n, Ref)]
