"""The parse tree of a regex, between the parser (``parser.py``) and the lowering
(``lowering.py``): its shapes, how sequences and alternations are built compactly, and the
iterative walks that tell the lowering which assertions a tree holds.

A tree is a tuple whose first item names its kind:

* ``("set", CharSet)``: one character among a code point set;
* ``("seq", [t, ...])``, ``("alt", [t, ...])``, ``("rep", t, lo, hi)``;
* ``("trie", root, edges)``: an alternation of set sequences, left-factored (``factor``);
* assertions (``ASSERTIONS``): ``("bol", offset)``, ``("eol", "end" | "py" | "ml", offset)``,
  ``("look", positive, t, offset)``, ``("behind", CharSet, at_start, offset)``,
  ``("wordb", positive, word CharSet, offset)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from . import charset as cs
from .ast import INF

Tree = tuple[Any, ...]  # see the module docstring for the shapes
# A trie node is [ends here?, {set: child}]; it denotes the union of the set sequences
# along its paths.
TrieNode = list[Any]
_TRIE_MIN = 8  # alternations with at least this many such branches are factored
ASSERTIONS = ("bol", "eol", "look", "behind", "wordb")
N = TypeVar("N")


def _counted(t: Tree) -> tuple[Tree, int, int]:
    """``(X, lo, hi)`` of ``X{lo,hi}``; any other tree is ``X{1,1}``."""
    if t[0] == "rep":
        return t[1], t[2], t[3]
    return t, 1, 1


def append_item(items: list[Tree], t: Tree) -> None:
    """Append ``t`` to a sequence, merging a counted repeat with a neighbour repeating the
    same assertion-free tree: ``X{a,b}X{c,d}`` is ``X{a+c,b+d}`` (``a?a?a?`` is
    ``a{0,3}``: one counter instead of a chain whose derivatives list every suffix).
    Plain runs (``aa``) stay literals."""
    if items and (t[0] == "rep" or items[-1][0] == "rep"):
        x, lo, hi = _counted(t)
        y, lo2, hi2 = _counted(items[-1])
        if x == y and not any(z[0] in ASSERTIONS for z, _ in walk(x)):
            total = INF if INF in (hi, hi2) else hi + hi2
            items[-1] = ("rep", x, lo + lo2, total)
            return
    items.append(t)


def _set_sequence(t: Tree) -> list[cs.CharSet] | None:
    """The sets of a branch made only of sets (a literal, ``[ab]x``...), else None."""
    if t[0] == "set":
        return [t[1]]
    if t[0] == "seq":
        items = t[1]
        for x in items:
            if x[0] != "set":
                return None
        return [x[1] for x in items]
    return None


def factor(branches: list[Tree]) -> Tree:
    """``("alt", branches)``, with the branches that are sequences of sets merged into one
    trie (``A·X | A·Y = A·(X|Y)``: the same language). An alternation of n literals then
    costs nodes for the distinct prefixes only, built in time linear in its size."""
    if all(b[0] == "set" for b in branches):  # a|b|c is [abc]
        return ("set", cs.union(*[b[1] for b in branches]))
    plain: list[list[cs.CharSet]] = []
    other: list[Tree] = []
    for b in branches:
        seq = _set_sequence(b)
        if seq is None:
            other.append(b)
        else:
            plain.append(seq)
    if len(plain) < _TRIE_MIN:
        return ("alt", branches)
    root: TrieNode = [False, {}]
    edges = 0
    for seq in plain:
        node = root
        for key in seq:
            kids = node[1]
            nxt = kids.get(key)
            if nxt is None:
                nxt = kids[key] = [False, {}]
                edges += 1
            node = nxt
        node[0] = True
    other.append(("trie", root, edges))
    return other[0] if len(other) == 1 else ("alt", other)



def fold_trie(root: TrieNode, step: Callable[[cs.CharSet, N], N], union: Callable[[list[N]], N], end: N) -> N:
    """The alternation a trie stands for, built children first without recursion:
    ``step(set, rest)`` is one character of ``set`` followed by ``rest``, ``union`` an
    alternation of parts, ``end`` the empty word (a word of the trie ends here)."""
    order = []
    stack = [root]
    while stack:
        n = stack.pop()
        order.append(n)
        stack.extend(n[1].values())
    built: dict[int, N] = {}
    for n in reversed(order):
        parts = [step(k, built[id(c)]) for k, c in n[1].items()]
        if n[0]:
            parts.append(end)
        built[id(n)] = union(parts)
    return built[id(root)]


def _trie_single_set(root: TrieNode) -> cs.CharSet | None:
    """The code points of a trie of one-character words only, else None."""
    if root[0]:
        return None
    for child in root[1].values():
        if not child[0] or child[1]:
            return None
    return cs.union(*root[1])


def _children(t: Tree) -> list[Tree]:
    k = t[0]
    if k in ("seq", "alt"):
        items: list[Tree] = t[1]
        return items
    if k == "rep":
        return [t[1]]
    if k == "look":
        return [t[2]]
    return []


def expanded_size(t: Tree, memo: dict[int, tuple[int, Tree]]) -> int:
    """Characters of ``t`` with every counted repeat written out (``a{3}`` is 3,
    ``(a{50}){50}`` 2500; an unbounded repeat counts its minimum, at least once).
    Iterative; ``memo`` (``id`` -> size and the tree, which keeps the id taken) holds the
    sizes of subtrees already measured."""
    stack = [(t, False)]
    while stack:
        x, ready = stack.pop()
        if id(x) in memo:
            continue
        kids = _children(x)
        if kids and not ready:
            stack.append((x, True))
            stack.extend((c, False) for c in kids if id(c) not in memo)
            continue
        k = x[0]
        if k in ("seq", "alt"):
            n = max(1, sum(memo[id(c)][0] for c in kids))
        elif k == "rep":
            count = x[3] if x[3] != INF else max(x[2], 1)
            n = memo[id(kids[0])][0] * max(count, 1)
        elif k == "look":
            n = memo[id(kids[0])][0]
        elif k == "trie":
            n = max(1, x[2])
        else:
            n = 1
        memo[id(x)] = (n, x)
    return memo[id(t)][0]



def single_set(t: Tree) -> cs.CharSet | None:
    """The code points of a tree matching exactly one character, else None."""
    if t[0] == "set":
        s: cs.CharSet = t[1]
        return s
    if t[0] == "trie":
        return _trie_single_set(t[1])
    if t[0] == "seq" and len(t[1]) == 1:
        return single_set(t[1][0])
    if t[0] == "alt":
        parts = [single_set(x) for x in t[1]]
        sets = [p for p in parts if p is not None]
        if len(sets) == len(parts):
            return cs.union(*sets)
    return None


def walk(t: Tree, into_looks: bool = True) -> Iterator[tuple[Tree, bool]]:
    """Every subtree of ``t`` in preorder, each with whether it lies inside a lookaround
    body; without ``into_looks`` the bodies are not entered. Iterative and lazy (a
    search stops at its first hit)."""
    stack = [(t, False)]
    while stack:
        x, inside = stack.pop()
        yield x, inside
        k = x[0]
        if k in ("seq", "alt"):
            stack.extend((c, inside) for c in reversed(x[1]))
        elif k == "rep":
            stack.append((x[1], inside))
        elif k == "look" and into_looks:
            stack.append((x[2], True))


def needs_annotation(t: Tree) -> bool:
    """Whether ``t`` asserts something about the previous character, or has an anchor
    inside a lookaround (lowered exactly only over annotated texts: there the text has
    exactly one begin and one end marker, where plain lowering lets the number of
    markers vary, which a negative lookaround could exploit)."""
    for x, inside in walk(t):
        k = x[0]
        if k in ("behind", "wordb") or (inside and k in ("bol", "eol")):
            return True
    return _end_before_begin(t)


def _end_before_begin(t: Tree) -> bool:
    """Whether an end anchor (``$``, ``\\Z``) may come before a begin anchor (``^``,
    ``\\A``) in the main line: ``$^``, ``(?:^a$){2}``. Plain lowering orders the begin
    markers before the end ones, which holds on the empty text only (handled apart),
    while Python's ``$`` also holds before a final newline (``re.search("$^", "\\n")``
    matches): such patterns are lowered over annotated texts."""
    info: dict[int, tuple[bool, bool, bool]] = {}  # id -> (has end, has begin, bad)
    stack = [(t, False)]
    while stack:
        x, ready = stack.pop()
        k = x[0]
        kids = x[1] if k in ("seq", "alt") else [x[1]] if k == "rep" else []
        if kids and not ready:
            stack.append((x, True))
            stack.extend((c, False) for c in kids)
            continue
        if k == "eol":
            r = (True, False, False)
        elif k == "bol":
            r = (False, True, False)
        elif k == "seq":
            end_seen = bad = has_b = False
            for c in kids:
                e, b, bd = info[id(c)]
                bad = bad or bd or (end_seen and b)
                end_seen = end_seen or e
                has_b = has_b or b
            r = (end_seen, has_b, bad)
        elif k == "alt":
            parts = [info[id(c)] for c in kids]
            r = (any(p[0] for p in parts), any(p[1] for p in parts), any(p[2] for p in parts))
        elif k == "rep":
            e, b, bd = info[id(kids[0])]
            r = (e, b, bd or (e and b and (x[3] == INF or x[3] > 1)))
        else:
            r = (False, False, False)
        info[id(x)] = r
    return info[id(t)][2]


def behind_sets(t: Tree, out: list[cs.CharSet]) -> list[cs.CharSet]:
    for x, _ in walk(t):
        if x[0] == "behind":
            out.append(x[1])
        elif x[0] == "wordb":
            out.append(x[2])
    return out



def empty_only(t: Tree) -> bool:
    """Whether ``t`` can only match the empty text (anchors, lookarounds, empty groups)."""
    for x, _ in walk(t, False):
        k = x[0]
        if k == "set" and x[1] != ():
            return False  # a non-empty set matches a character
        if k == "trie" and x[1][1]:
            return False  # a word of at least one character
    return True


def lenient_empty(t: Tree) -> bool:
    """``empty_only``, and no assertion in ``t`` tells the end of the text from just
    before a final newline (so a Python ``$`` before ``t`` may take that newline):
    ``\\Z``/``\\z`` and lookarounds can."""
    for x, _ in walk(t, False):
        k = x[0]
        if k == "look" or (k == "eol" and x[1] == "end"):
            return False
    return empty_only(t)


def needs_context(t: Tree) -> bool:
    """Whether lowering ``t`` needs its continuation (lookahead, Python's ``$``)."""
    for x, _ in walk(t, False):
        k = x[0]
        if k == "look" or (k == "eol" and x[1] in ("py", "ml")):
            return True
    return False



def offset_of(t: Tree) -> int:
    """The offset of the first assertion in ``t`` (-1 if none)."""
    for x, _ in walk(t, False):
        if x[0] in ("bol", "look", "behind", "wordb"):
            return int(x[-1])
        if x[0] == "eol":
            return int(x[2])
    return -1
