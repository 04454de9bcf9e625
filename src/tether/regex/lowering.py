"""Parse tree (``tree.py``) → byte-level ``Node``.

1. Code point sets become UTF-8 byte automata (``charset_node``).
2. Anchors are lowered exactly with two marker bytes that never occur in UTF-8:
   ``^``/``\\A`` match a begin marker, ``$``/``\\Z``/``\\z`` an end marker. The pattern is
   wrapped for the requested semantics (fullmatch, or search: any text may surround an
   unanchored side), then the begin marker is removed by a left derivative, the end marker
   by a right quotient, and markers left in the middle (which no text can match) are
   stripped from every byte set.

Lookahead ``(?=X)`` / ``(?!X)`` is lowered exactly with intersection and complement (see
``Lowering``); so is Python's ``$``, which may match before a final newline. Assertions
about the previous character (lookbehind of one character, ``\\b \\B``, multi-line ``^``)
are lowered over texts annotated with marker bytes that are erased afterwards (see
``Annotation``). Assertions inside a group repeated without a small bound are rejected
with ``RegexError``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from ..errors import RegexError
from ..limits import check_deadline
from . import charset as cs
from .ast import (
    ANYTHING,
    EMPTY,
    EPSILON,
    INF,
    K_ALT,
    K_AND,
    K_BYTES,
    K_CONCAT,
    K_EMPTY,
    K_EPS,
    K_NOT,
    K_REPEAT,
    K_STAR,
    Node,
    alt,
    byte_range,
    byte_set,
    complement,
    concat,
    derivative,
    hide,
    intersect,
    repeat,
    star,
)
from .tree import (
    ASSERTIONS,
    Tree,
    TrieNode,
    behind_sets,
    empty_only,
    fold_trie,
    lenient_empty,
    needs_annotation,
    needs_context,
    offset_of,
)

BEGIN, END = 0xFE, 0xFF  # marker bytes: never part of valid UTF-8
_MARKERS_MASK = (1 << BEGIN) | (1 << END)


@lru_cache(maxsize=4096)
def charset_node(s: cs.CharSet) -> Node:
    """Byte-level node matching exactly the UTF-8 encodings of the code points in ``s``."""
    seqs = cs.utf8_sequences(s)
    return alt(*[concat(*[byte_range(lo, hi) for lo, hi in seq]) for seq in seqs])



ANY_CHAR = charset_node(cs.ALL)  # one valid UTF-8 encoded code point


def _trie_node(root: TrieNode, char: Callable[[cs.CharSet], Node]) -> Node:
    """The node of a trie; ``char`` lowers a set."""
    return fold_trie(root, lambda k, rest: concat(char(k), rest), lambda parts: alt(*parts), EPSILON)



class Annotation:
    """Marker bytes for texts annotated with the class of each previous character.

    The annotated text is ``m0 c1 m1 c2 ... cn mn END``: ``m0`` marks the start and ``mi``
    names the block of a partition of code points (refining every lookbehind class) that
    holds ``ci``. An assertion about the previous character is then a one-symbol
    lookahead at the marker, exact under continuation-passing lowering; each character
    atom consumes its marker and then its bytes. ``W`` is the language of well-annotated
    texts (one per text), and erasing the markers (``ast.hide``) maps it back to texts.
    """

    # block markers; 0xFE marks the start, 0xFF the end (none of these occurs in UTF-8)
    MARKERS = (0xC0, 0xC1, *range(0xF5, 0xFE))

    def __init__(self, sets: list[cs.CharSet], pattern: str) -> None:
        blocks = [cs.ALL]
        for s in sets:
            nxt = []
            for b in blocks:
                inside, outside = cs.intersect(b, s), cs.difference(b, s)
                nxt += [x for x in (inside, outside) if x]
            blocks = nxt
        if len(blocks) > len(self.MARKERS):
            raise RegexError(
                f"too many distinct lookbehind classes (they split the characters into "
                f"{len(blocks)} blocks; at most {len(self.MARKERS)})",
                pattern,
                0,
            )
        self.blocks = blocks
        self.block_mask = sum(1 << self.MARKERS[i] for i in range(len(blocks)))
        self.any_marker = byte_set(mask=self.block_mask | 1 << BEGIN)
        self.start = byte_set(mask=1 << BEGIN)
        self.end = byte_set(mask=1 << END)
        self.hidden = self.block_mask | 1 << BEGIN | 1 << END
        chars = alt(*[concat(charset_node(b), byte_set(mask=1 << self.MARKERS[i])) for i, b in enumerate(blocks)])
        self.well_formed = concat(self.start, star(chars), self.end)

    def markers(self, s: cs.CharSet, start: bool) -> Node:
        """Markers meaning "the previous character is in ``s``" (or "at the start")."""
        m = sum(1 << self.MARKERS[i] for i, b in enumerate(self.blocks) if cs.intersect(b, s))
        return byte_set(mask=m | (1 << BEGIN if start else 0))



_UNROLL_LIMIT = 4  # a group with lookaround may be repeated at most this many times


class Lowering:
    """Parse tree → node, in continuation-passing style where lookahead needs it.

    ``lower_k(t, k)`` is the language of ``t`` followed by ``k``; a lookahead ``(?=X)``
    becomes ``(X·Σ*) ∩ k`` and ``(?!X)`` becomes ``~(X·Σ*) ∩ k``, which is exact.
    Anchors consume marker bytes (see ``lower``).
    """

    def __init__(
        self, pattern: str, search: bool, empty_text: bool = False, ann: Annotation | None = None
    ) -> None:
        self.pattern, self.search, self.ann = pattern, search, ann
        self.python_flavor = False
        self.anchors = False
        # empty_text: lower for the empty text only, where every anchor holds (all
        # anchors become ε); used to decide whether "" matches
        self.begin = EPSILON if empty_text else byte_set(mask=1 << BEGIN)
        self.end = EPSILON if empty_text else byte_set(mask=1 << END)

    def needs_context(self, t: Tree) -> bool:
        if self.ann is None:
            return needs_context(t)
        k = t[0]  # annotated: every assertion is a lookahead at the markers
        if k in ASSERTIONS:
            return True
        if k in ("seq", "alt"):
            return any(self.needs_context(x) for x in t[1])
        if k == "rep":
            return self.needs_context(t[1])
        return False

    def lower(self, t: Tree) -> Node:
        k = t[0]
        if k == "set":
            if self.ann is not None:
                return concat(self.ann.any_marker, charset_node(t[1]))
            return charset_node(t[1])
        if k == "trie":
            ann = self.ann
            if ann is not None:
                return _trie_node(t[1], lambda c: concat(ann.any_marker, charset_node(c)))
            return _trie_node(t[1], charset_node)
        if k == "seq":
            return concat(*[self.lower(x) for x in t[1]])
        if k == "alt":
            return alt(*[self.lower(x) for x in t[1]])
        if k == "rep":
            return repeat(self.lower(t[1]), t[2], t[3])
        self.anchors = True
        if k == "bol":
            return self.begin
        return self.end  # "end" anchors ("py" ones go through lower_k)

    def lower_k(self, t: Tree, k: Node, at_end: bool) -> Node:
        if not self.needs_context(t):
            return concat(self.lower(t), k)
        kind = t[0]
        if kind == "seq":
            items = t[1]
            for i in range(len(items) - 1, -1, -1):
                tail_empty = at_end and all(lenient_empty(y) for y in items[i + 1 :])
                k = self.lower_k(items[i], k, tail_empty)
            return k
        if kind == "alt":
            return alt(*[self.lower_k(x, k, at_end) for x in t[1]])
        if kind == "rep":
            inner, lo, hi = t[1], t[2], t[3]
            if hi == INF or hi > _UNROLL_LIMIT:
                raise RegexError(
                    f"an assertion (lookaround, '$', or with lookbehind/\\b in the pattern any "
                    f"anchor) inside a group repeated more than {_UNROLL_LIMIT} times is not "
                    "supported",
                    self.pattern,
                    offset_of(inner),
                )
            inner_end = at_end and empty_only(inner)
            out = k
            for i in range(hi, 0, -1):
                step = self.lower_k(inner, out, inner_end)
                out = step if i <= lo else alt(k, step)
            return out
        self.anchors = True
        if self.ann is not None:
            return intersect(self.assertion(t), k)
        if kind == "look":
            _, positive, body, _at = t
            # BEGIN markers still ahead belong to later "^" anchors: the body skips them
            ahead = concat(star(self.begin), self.lower_k(body, ANYTHING, False))
            return intersect(ahead if positive else complement(ahead), k)
        end = self.end
        if t[1] == "ml":  # multi-line "$": before any newline, or at the end
            return intersect(alt(concat(byte_set(mask=1 << 10), ANYTHING), concat(end, ANYTHING)), k)
        # Python's "$": at the end of the text, or before a final newline there
        if at_end:
            return concat(alt(end, concat(byte_set(mask=1 << 10), end)) if self.search else end, k)
        return intersect(concat(alt(EPSILON, byte_set(mask=1 << 10)), end, ANYTHING), k)


    def assertion(self, t: Tree) -> Node:
        """Annotated mode: what the rest of the annotated text must start with."""
        ann = self.ann
        assert ann is not None
        kind, m, end = t[0], ann.any_marker, ann.end
        newline = byte_set(mask=1 << 10)
        if kind == "bol":
            return concat(ann.start, ANYTHING)
        if kind == "eol":
            if t[1] == "end":
                return concat(m, end)
            if t[1] == "ml":
                return concat(m, alt(end, concat(newline, ANYTHING)))
            return concat(m, alt(end, concat(newline, m, end)))  # Python's "$"
        if kind == "look":
            ahead = self.lower_k(t[2], ANYTHING, False)
            return ahead if t[1] else intersect(ANYTHING, complement(ahead))
        if kind == "behind":
            return concat(ann.markers(t[1], t[2]), ANYTHING)
        # word boundary: previous and next character differ in being word characters
        word = t[2]
        other = cs.complement(word)
        bound = alt(
            concat(ann.markers(word, False), alt(end, charset_node(other)), ANYTHING),
            concat(ann.markers(other, True), charset_node(word), ANYTHING),
        )
        if t[1]:
            return bound
        not_bound = complement(bound)
        if self.pattern is not None and self.python_flavor:
            # Python (before 3.14): \B does not match the empty text
            not_bound = intersect(not_bound, complement(concat(ann.start, end)))
        return not_bound



def _fixpoint_union(node: Node, step: Callable[[Node], Node]) -> Node:
    """``node | step(node) | step(step(node)) | ...`` until a repeat (finite by Brzozowski)."""
    seen = {node}
    parts = [node]
    cur = node
    while True:
        check_deadline("lowering the anchors of a regex")
        cur = step(cur)
        if cur is EMPTY or cur in seen:
            return alt(*parts)
        if len(seen) > 64:
            raise RegexError("anchors too complex to lower")
        seen.add(cur)
        parts.append(cur)


def _chain(node: Node) -> list[Node]:
    """The items of a right-nested concatenation (``[node]`` for any other node)."""
    items = []
    while node.kind == K_CONCAT:
        items.append(node.args[0])
        node = node.args[1]
    items.append(node)
    return items


def _right_quotient(node: Node, b: int, memo: dict[Node, Node]) -> Node:
    """``{s | s·b ∈ L(node)}``. A concatenation is walked as a chain (no recursion along
    it): ``(x·rest)/b = x·(rest/b) | (x/b if rest is nullable)``."""
    r = memo.get(node)
    if r is not None:
        return r
    k = node.kind
    if k == K_BYTES:
        r = EPSILON if node.args[0] >> b & 1 else EMPTY
    elif k == K_CONCAT:
        items = _chain(node)
        suffixes = [node]  # suffixes[i]: the concatenation of items[i:]
        for _ in items[1:]:
            suffixes.append(suffixes[-1].args[1])
        r = _right_quotient(items[-1], b, memo)
        for i in range(len(items) - 2, -1, -1):
            rest = suffixes[i + 1]
            q = concat(items[i], r)
            if rest.nullable:
                q = alt(q, _right_quotient(items[i], b, memo))
            memo[suffixes[i]] = r = q
    elif k == K_ALT:
        r = alt(*[_right_quotient(m, b, memo) for m in node.args])
    elif k == K_STAR:
        r = concat(node, _right_quotient(node.args[0], b, memo))
    elif k == K_REPEAT:
        inner, lo, hi = node.args
        r = concat(repeat(inner, max(lo - 1, 0), INF if hi == INF else hi - 1), _right_quotient(inner, b, memo))
    elif k == K_AND:
        r = intersect(*[_right_quotient(m, b, memo) for m in node.args])
    elif k == K_NOT:
        r = complement(_right_quotient(node.args[0], b, memo))
    elif k in (K_EMPTY, K_EPS):
        r = EMPTY
    else:
        raise ValueError("right quotient does not apply to hide nodes")
    memo[node] = r
    return r


def map_masks(node: Node, f: Callable[[int], int], memo: dict[Node, Node] | None = None) -> Node:
    """Rebuild ``node`` with every byte mask ``m`` replaced by ``f(m)`` (a concatenation
    is walked as a chain, without recursion along it)."""
    if memo is None:
        memo = {}
    r = memo.get(node)
    if r is not None:
        return r
    k = node.kind
    if k in (K_EMPTY, K_EPS):
        r = node
    elif k == K_BYTES:
        r = byte_set(mask=f(node.args[0]))
    elif k == K_CONCAT:
        r = concat(*[map_masks(m, f, memo) for m in _chain(node)])
    elif k == K_ALT:
        r = alt(*[map_masks(m, f, memo) for m in node.args])
    elif k == K_STAR:
        r = star(map_masks(node.args[0], f, memo))
    elif k == K_REPEAT:
        r = repeat(map_masks(node.args[0], f, memo), node.args[1], node.args[2])
    elif k == K_AND:
        r = intersect(*[map_masks(m, f, memo) for m in node.args])
    elif k == K_NOT:
        r = complement(map_masks(node.args[0], f, memo))
    else:
        raise ValueError("map_masks does not apply to hide nodes")
    memo[node] = r
    return r



def lower(tree: Tree, pattern: str, flavor: str, search: bool, *, assertions: bool) -> Node:
    """The node of ``tree`` (read from ``pattern``) for full matches, or for ``search``;
    ``assertions``: whether the tree may hold an anchor, word boundary or lookaround
    (when False, the passes looking for them are skipped)."""
    if assertions and needs_annotation(tree):
        return _lower_annotated(tree, pattern, flavor, search)
    low = Lowering(pattern, search)
    if not assertions or not needs_context(tree):
        body = low.lower(tree)
        if not low.anchors:
            return concat(star(ANY_CHAR), body, star(ANY_CHAR)) if search else body
    # The text is read as BEGIN^i · text · END^j: each "^" consumes one BEGIN, each "$"
    # one END, so repeated anchors ("^^", "$$") need no special case. The wrapper
    # consumes the markers (and, for search, any text on an unanchored side); the result
    # keeps the texts for which some i, j work: left derivatives by BEGIN and right
    # quotients by END, unioned to a fixpoint. Markers left inside (an anchor in the
    # middle, which no text can satisfy) are then removed from every byte set.
    begin, end = byte_set(mask=1 << BEGIN), byte_set(mask=1 << END)
    if search:
        suffix = concat(star(ANY_CHAR), star(end))
        full = concat(star(begin), star(ANY_CHAR), low.lower_k(tree, suffix, True))
    else:
        full = concat(star(begin), low.lower_k(tree, star(end), True))
    n = _fixpoint_union(full, lambda x: derivative(x, BEGIN))
    memo: dict[Node, Node] = {}
    n = _fixpoint_union(n, lambda x: _right_quotient(x, END, memo))
    n = map_masks(n, lambda m: m & ~_MARKERS_MASK)
    # Markers are ordered BEGIN...END, but on the empty text "$" may come before "^"
    # ("$^" matches ""): decide the empty text apart, with every anchor as ε.
    if not n.nullable and Lowering(pattern, search, True).lower_k(tree, EPSILON, True).nullable:
        n = alt(n, EPSILON)
    return n


def _lower_annotated(tree: Tree, pattern: str, flavor: str, search: bool) -> Node:
    """Patterns asserting about the previous character (lookbehind, ``\\b``, multi-line
    ``^``): lower over annotated texts (see ``Annotation``), then erase the markers."""
    ann = Annotation(behind_sets(tree, []), pattern)
    low = Lowering(pattern, search, ann=ann)
    low.python_flavor = flavor == "python"
    m = ann.any_marker
    tail = concat(m, ann.end)
    if search:
        step = star(concat(m, ANY_CHAR))
        full = concat(step, low.lower_k(tree, concat(step, tail), True))
    else:
        full = low.lower_k(tree, tail, True)
    return hide(intersect(ann.well_formed, full), ann.hidden)

