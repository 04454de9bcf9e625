"""Hash-consed regular expressions over bytes, with Brzozowski derivatives.

1. Every node is built by a smart constructor (``concat``, ``alt``, ``star``, ``repeat``,
   ``intersect``, ``complement``, ``byte_set``) that simplifies with algebraic laws and
   interns the result: structurally equal expressions are the same object, so identity
   comparison and ``id``-keyed caches are exact.
2. ``nullable`` is computed once at construction; ``derivative(node, byte)`` is cached on
   the node.
3. ``byte_classes(nodes)`` partitions the 256 bytes so that bytes in one class give equal
   derivatives for every node: a DFA row needs one derivative per class, not per byte.

Laws applied (Brzozowski 1964; Owens, Reppy & Turon, "Regular-expression derivatives
re-examined", 2009): concatenation is associative with ε as unit and ∅ as zero;
alternation is associative, commutative and idempotent (ACI) with ∅ as unit, byte sets in
it merge into one, and ε is dropped when another member is nullable; ``(r*)* = r*``,
``(r r*)* = r*``, ``(ε|r)* = r*``; ``~~r = r``; intersection is ACI with ∅ as zero and
``~∅`` (all strings) as unit. Without these the derivative states need not be finite.

Interning is process-wide and never freed (nodes are small; the number of distinct
expressions a program builds is bounded by its grammars).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from ..limits import check_deadline
from .partition import partition

# node kinds
K_EMPTY, K_EPS, K_BYTES, K_CONCAT, K_ALT, K_STAR, K_REPEAT, K_AND, K_NOT, K_HIDE = range(10)
INF = -1  # upper bound of an unbounded repeat

ALL_BYTES_MASK = (1 << 256) - 1


# the derivative cache of a node with none yet (shared, never written: ``derivative`` gives
# a node its own dict at its first derivative). Most nodes are never derived (the
# chains of literals the lexer has not reached, the parts of a built regex), and a dict
# per node was a tenth of a node's making and one more object for the collector
_NO_DERIVATIVES: dict[int, Node] = {}


class Node:
    """An interned regular expression. Compare with ``is``; never construct directly.

    Attributes:
        kind: one of the ``K_*`` constants.
        args: children (nodes) or data (byte mask, bounds), depending on ``kind``.
        nullable: whether the empty string is in the language.
        uid: a unique, stable small integer (ordering key for ACI normal forms).
    """

    __slots__ = (
        "kind", "args", "nullable", "uid", "_deriv", "_firsts", "_first_bytes", "_buckets",
        "flags", "_classes", "_reps", "_index", "_write", "__weakref__",
    )

    def __init__(self, kind: int, args: tuple[Any, ...], nullable: bool, uid: int, flags: int) -> None:
        self.kind, self.args, self.nullable, self.uid = kind, args, nullable, uid
        self._deriv: dict[int, Node] = _NO_DERIVATIVES  # a dict of its own at the first one
        self._firsts: tuple[int, ...] | None = None
        self._first_bytes = -1  # mask of bytes that can start a string (-1: not computed)
        self._buckets: list[tuple[int, list[Node]]] | None = None  # big alternations
        # bit 0 (F_BOOLEAN): contains AND/NOT (language may be empty though not ∅);
        # bit 1 (F_COUNTED): contains a repeat x{lo,hi}, hi * min_length(x) >= COUNTED_MIN
        self.flags = flags
        self._classes: tuple[int, ...] | None = None  # byte_classes((self,)), see node_classes
        # dfa.py's row cache (kept in slots, not in an object per node, so that the
        # garbage collector has no more objects to walk): the lowest byte of each class,
        # byte -> class number, and the function writing a row of these classes
        self._reps: tuple[int, ...] = ()
        self._index: bytes | None = None
        self._write: Callable[[Any, int, list[int]], None] | None = None

    # equality is identity and the hash is the identity hash (object's, in C): nodes
    # are interned, so structural equality and identity coincide

    def __lt__(self, other: Node) -> bool:
        return self.uid < other.uid

    def __repr__(self) -> str:
        return f"Node({_RENDER(self)})"

    def __reduce__(self) -> tuple[Callable[[int, tuple[Any, ...]], Node], tuple[int, tuple[Any, ...]]]:
        # rebuilt through the smart constructors, so an unpickled (or deep-copied) node is
        # the interned node of this process
        return (_rebuild, (self.kind, self.args))

    def __str__(self) -> str:
        return _RENDER(self)


def _by_uid(n: Node) -> str:
    return f"#{n.uid}"


# how a node renders in ``repr`` and ``str``: ``show.to_string``, set when ``show`` loads
# (the package loads it; ``show`` imports this module, never the other way round)
_RENDER: Callable[[Node], str] = _by_uid


def set_renderer(render: Callable[[Node], str]) -> None:
    """Make ``render`` what ``repr(node)`` and ``str(node)`` use."""
    global _RENDER
    _RENDER = render


F_BOOLEAN = 1
F_COUNTED = 2  # contains a repeat x{lo,hi} with hi * min_length(x) >= COUNTED_MIN
COUNTED_MIN = 32  # smaller counts are left to the states they make (``horizon``)

# every node by (kind, args); ``interning.trim`` drops the nodes nothing else holds (the
# table is changed in place, never replaced). uids come from a counter, not the table's
# size, so that they stay unique after a trim
_table: dict[tuple[int, tuple[Any, ...]], Node] = {}
_uids = itertools.count()


def _intern(kind: int, args: tuple[Any, ...], nullable: bool, flags: int = 0) -> Node:
    key = (kind, args)
    node = _table.get(key)
    if node is None:
        node = Node(kind, args, nullable, next(_uids), flags)
        _table[key] = node
    return node


def _key(n: Node) -> int:
    return n.uid


EMPTY = _intern(K_EMPTY, (), False)
EPSILON = _intern(K_EPS, (), True)


def _flags(*nodes: Node) -> int:
    f = 0
    for n in nodes:
        f |= n.flags
    return f


def byte_mask(node_or_bytes: Iterable[int] | range) -> int:
    m = 0
    for b in node_or_bytes:
        m |= 1 << b
    return m


def byte_set(*items: int | range | tuple[int, int] | Iterable[int], mask: int | None = None) -> Node:
    """A node matching one byte from the given bytes / ranges / (lo, hi) pairs / mask."""
    m = mask or 0
    for it in items:
        if isinstance(it, int):
            m |= 1 << it
        elif isinstance(it, tuple) and len(it) == 2 and all(isinstance(x, int) for x in it):
            lo, hi = it
            m |= ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
        else:
            for b in it:
                m |= 1 << b
    return _bytes(m)


def _bytes(m: int) -> Node:
    if m == 0:
        return EMPTY
    return _intern(K_BYTES, (m,), False)


ANY_BYTE = _bytes(ALL_BYTES_MASK)


def byte_range(lo: int, hi: int) -> Node:
    return _bytes(((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1))


_BYTE_NODES = [_bytes(1 << b) for b in range(256)]


def literal(data: bytes | str, rest: Node = EPSILON) -> Node:
    """The node matching exactly ``data`` (str is UTF-8 encoded), followed by ``rest``
    (``concat(literal(data), rest)``, with the chain built once, onto ``rest``)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if rest is EMPTY:
        return EMPTY
    if not data:
        return rest
    # ``_concat2(byte node, result)`` inlined (a byte node is no star; it is not nullable
    # and has no flags): one dict probe per byte, the same interned nodes
    table, byte_nodes, uids = _table, _BYTE_NODES, _uids
    if rest is EPSILON:
        result = byte_nodes[data[-1]]
        data = data[:-1]
    else:
        result = rest
    flags = result.flags
    for b in reversed(data):
        key = (K_CONCAT, (byte_nodes[b], result))
        node = table.get(key)
        if node is None:
            node = table[key] = Node(K_CONCAT, key[1], False, next(uids), flags)
        result = node
    return result


def concat(*nodes: Node) -> Node:
    """Concatenation, right-nested; ε dropped; ∅ absorbs.

    Cost: O(length of the chains of the arguments before the last); the last argument is
    already in normal form and is reused as is (so a derivative step is O(1) here).
    """
    result = EPSILON
    for n in reversed(nodes):
        if n is EMPTY:
            return EMPTY
        if n is EPSILON:
            continue
        if result is EPSILON:
            result = n
        elif n.kind == K_CONCAT:
            parts = []
            while n.kind == K_CONCAT:
                parts.append(n.args[0])
                n = n.args[1]
            parts.append(n)
            for p in reversed(parts):
                result = _concat2(p, result)
        else:
            result = _concat2(n, result)
    return result


def _concat2(a: Node, b: Node) -> Node:
    # a* a* = a*
    if a.kind == K_STAR and (b is a or (b.kind == K_CONCAT and b.args[0] is a)):
        return b
    return _intern(K_CONCAT, (a, b), a.nullable and b.nullable, a.flags | b.flags)


def alt(*nodes: Node) -> Node:
    """Alternation (union) in ACI normal form."""
    members: set[Node] = set()
    mask = 0
    stack = list(nodes)
    while stack:
        n = stack.pop()
        k = n.kind
        if k == K_EMPTY:
            continue
        if k == K_ALT:
            stack.extend(n.args)
        elif k == K_BYTES:
            mask |= n.args[0]
        else:
            members.add(n)
    if mask:
        members.add(_bytes(mask))
    if len(members) > 1:
        _drop_subsumed_suffixes(members)
    if len(members) > 1 and EPSILON in members:
        if any(m.nullable for m in members if m is not EPSILON):
            members.discard(EPSILON)
    if not members:
        return EMPTY
    if len(members) == 1:
        return members.pop()
    full = _universal()
    if full in members:
        return full
    args = tuple(sorted(members, key=_key))
    return _intern(K_ALT, args, any(m.nullable for m in args), _flags(*args))


def _drop_subsumed_suffixes(members: set[Node]) -> None:
    """Remove from an alternation the members that another member ``p·s`` with ``p``
    nullable contains: ``s ⊆ p·s`` (and so down the chain while heads are nullable).
    Derivatives of ``X?X?...X?`` list every suffix of the chain; this keeps the longest.
    Each chain node is walked once per call (a node seen from another member stops it)."""
    seen: set[Node] | None = None
    for m in tuple(members):
        if m.kind != K_CONCAT or not m.args[0].nullable:
            continue
        if seen is None:
            seen = set()
        n = m.args[1]
        while n not in seen:
            seen.add(n)
            members.discard(n)
            if n.kind != K_CONCAT or not n.args[0].nullable:
                break
            n = n.args[1]


def star(node: Node) -> Node:
    """Kleene star with ``(r*)* = r*``, ``(r r*)* = r*``, ``(ε|r)* = r*``, ``∅* = ε* = ε``."""
    if node is EMPTY or node is EPSILON:
        return EPSILON
    if node.kind == K_STAR:
        return node
    if node.kind == K_CONCAT and node.args[1].kind == K_STAR and node.args[1].args[0] is node.args[0]:
        tail: Node = node.args[1]
        return tail
    if node.kind == K_ALT and EPSILON in node.args:
        return star(alt(*[m for m in node.args if m is not EPSILON]))
    if node.kind == K_REPEAT and node.args[1] <= 1 and node.args[2] == INF:
        return star(node.args[0])
    return _intern(K_STAR, (node,), True, node.flags)


def plus(node: Node) -> Node:
    return concat(node, star(node))


def optional(node: Node) -> Node:
    return alt(EPSILON, node)


def repeat(node: Node, lo: int, hi: int | None = None) -> Node:
    """``node{lo,hi}``; ``hi=None`` (or ``INF``) means unbounded.

    Kept as one node (not unrolled), so ``x{0,1000}`` costs one node and derivatives count
    down the bounds.
    """
    if hi is None:
        hi = INF
    if lo < 0 or (hi != INF and hi < lo):
        raise ValueError(f"bad repeat bounds {{{lo},{hi}}}")
    if node.nullable:
        lo = 0
    if hi == 0 or node is EPSILON:
        return EPSILON
    if node is EMPTY:
        return EPSILON if lo == 0 else EMPTY
    if lo == 0 and hi == INF:
        return star(node)
    if lo == 1 and hi == 1:
        return node
    if lo == 1 and hi == INF:
        return plus(node)
    if node.kind == K_STAR:
        return node
    if node.kind == K_REPEAT:
        merged = _merge_counts(node.args[1], node.args[2], lo, hi)
        if merged is not None:
            return repeat(node.args[0], *merged)
    elif node.kind == K_CONCAT and node.args[1].kind == K_STAR and node.args[1].args[0] is node.args[0]:
        merged = _merge_counts(1, INF, lo, hi)  # x+ is x{1,}
        if merged is not None:
            return repeat(node.args[0], *merged)
    long = hi != INF and hi * min_length(node) >= COUNTED_MIN
    flags = node.flags | (F_COUNTED if long else 0)
    return _intern(K_REPEAT, (node, lo, hi), lo == 0 or node.nullable, flags)


_MIN_LENGTH: dict[Node, int] = {}


def min_length(node: Node, depth: int = 0) -> int:
    """A lower bound of the length of ``node``'s shortest string: exact without
    intersections and complements (an intersection counts its longest member's, a
    complement 1 unless nullable); 0 past 200 levels of nesting. Cached."""
    got = _MIN_LENGTH.get(node)
    if got is not None:
        return got
    if depth > 200:
        return 0
    depth += 1
    n, k = node, node.kind
    if n.nullable:
        got = 0
    elif k == K_BYTES:
        got = 1
    elif k == K_CONCAT:
        got = 0
        while n.kind == K_CONCAT:
            got += min_length(n.args[0], depth)
            n = n.args[1]
        got += min_length(n, depth)
    elif k == K_ALT:
        got = min(min_length(m, depth) for m in n.args)
    elif k == K_AND:
        got = max(min_length(m, depth) for m in n.args)
    elif k == K_REPEAT:
        got = n.args[1] * min_length(n.args[0], depth)
    elif n is EMPTY:
        got = 1 << 30
    else:  # a complement or a hide, not nullable
        got = 1
    _MIN_LENGTH[node] = got
    return got


def _merge_counts(a: int, b: int, lo: int, hi: int) -> tuple[int, int] | None:
    """``(x{a,b}){lo,hi}`` as ``x{lo*a, hi*b}`` when that is the same language: the counts
    of ``x`` it allows are the union of ``[k*a, k*b]`` for ``k`` in ``[lo, hi]`` (and 0
    when ``lo`` is 0), one interval when neighbouring ones touch. Without this, nested
    counted repeats (``(a{0,200}){200}``) have derivatives that are unions of hundreds of
    terms, and each DFA state costs tens of milliseconds. None when there are gaps."""
    k0 = max(lo, 1)
    if lo == 0 and a > 1:
        return None  # 0, then a gap before a
    if hi != k0 and b != INF and a > k0 * (b - a) + 1:
        return None  # [k*a, k*b] and [(k+1)*a, ...] leave a gap for k = k0 (then for none larger)
    new_hi = INF if INF in (b, hi) else hi * b
    return lo * a, new_hi


def _universal() -> Node:
    return _UNIVERSAL


def intersect(*nodes: Node) -> Node:
    """Intersection, ACI; ∅ absorbs; Σ* (``complement(EMPTY)``) is the unit."""
    members: set[Node] = set()
    mask = ALL_BYTES_MASK
    has_bytes = False
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if n is EMPTY:
            return EMPTY
        if n is _UNIVERSAL:
            continue
        if n.kind == K_AND:
            stack.extend(n.args)
        elif n.kind == K_BYTES:
            mask &= n.args[0]
            has_bytes = True
        else:
            members.add(n)
    if has_bytes:
        if not mask:
            return EMPTY
        b = _bytes(mask)
        # a single byte set against nullable-only members: quick cases
        if not members:
            return b
        members.add(b)
    if not members:
        return _UNIVERSAL
    if EPSILON in members:
        return EPSILON if all(m.nullable for m in members) else EMPTY
    if len(members) == 1:
        return members.pop()
    args = tuple(sorted(members, key=_key))
    return _intern(K_AND, args, all(m.nullable for m in args), F_BOOLEAN | _flags(*args))


def complement(node: Node) -> Node:
    """All byte strings not in ``node`` (over all 256 byte values, not only UTF-8)."""
    if node.kind == K_NOT:
        inner: Node = node.args[0]
        return inner
    return _intern(K_NOT, (node,), not node.nullable, F_BOOLEAN | node.flags)


_UNIVERSAL = _intern(K_NOT, (EMPTY,), True, F_BOOLEAN)
ANYTHING = _UNIVERSAL  # Σ*: every byte string


def hide(node: Node, mask: int) -> Node:
    """The strings of ``node`` with every byte of ``mask`` erased (a homomorphic image).

    Used for texts annotated with marker bytes that are not part of the text: the node
    keeps the closure of ``node`` under derivatives by hidden bytes, so a derivative by a
    visible byte first skips any hidden ones. Cost: the closure is explored eagerly (it
    is small when markers are sparse, as in the annotations ``lowering`` builds).
    """
    if node is EMPTY or node is EPSILON:
        return node
    seen = {node}
    todo = [node]
    while todo:
        n = todo.pop()
        if len(seen) & 63 == 0:
            check_deadline("hiding regex markers")
        for cls in node_classes(n):
            h = cls & mask
            if h:
                d = derivative(n, lowest_byte(h))
                if d is not EMPTY and d not in seen:
                    seen.add(d)
                    todo.append(d)
    inner = alt(*seen)
    if inner is EMPTY:
        return EMPTY
    return _intern(K_HIDE, (inner, mask), inner.nullable, F_BOOLEAN | inner.flags)


def _rebuild(kind: int, args: tuple[Any, ...]) -> Node:
    if kind == K_EMPTY:
        return EMPTY
    if kind == K_EPS:
        return EPSILON
    if kind == K_BYTES:
        return _bytes(args[0])
    if kind == K_CONCAT:
        return concat(*args)
    if kind == K_ALT:
        return alt(*args)
    if kind == K_STAR:
        return star(args[0])
    if kind == K_REPEAT:
        return repeat(*args)
    if kind == K_AND:
        return intersect(*args)
    if kind == K_NOT:
        return complement(args[0])
    return hide(*args)


def nullable(node: Node) -> bool:
    """Whether the empty string is in ``node``'s language."""
    return node.nullable


def derivative(node: Node, byte: int) -> Node:
    """Brzozowski derivative: ``{s | byte·s ∈ L(node)}``; cached on the node."""
    d = node._deriv.get(byte)
    if d is None:
        d = _derive(node, byte)
        cache = node._deriv  # (read again: the derivation may have given it its own)
        if cache is _NO_DERIVATIVES:
            cache = node._deriv = {}
        cache[byte] = d
    return d


def _derive(node: Node, b: int) -> Node:
    k = node.kind
    if k == K_BYTES:
        return EPSILON if node.args[0] >> b & 1 else EMPTY
    if k == K_CONCAT:
        a, rest = node.args
        if a.kind == K_BYTES:  # a literal's next byte (or a class): no sub-derivative
            return rest if a.args[0] >> b & 1 else EMPTY
        d = _head_derivative(a, rest, b)
        if not a.nullable:
            return d
        # d(a·rest) = d(a)·rest | d(rest) while heads are nullable: walk the chain of
        # nullable heads (no recursion along it), then derive the first non-nullable one
        parts = [d] if d is not EMPTY else []
        n = rest
        while True:
            dr = n._deriv.get(b)
            if dr is not None:
                break
            if n.kind != K_CONCAT or not n.args[0].nullable:
                dr = derivative(n, b)  # a non-nullable head: no walk down the chain
                break
            a2, rest2 = n.args
            d2 = _head_derivative(a2, rest2, b)
            if d2 is not EMPTY:
                parts.append(d2)
            n = rest2
        if dr is not EMPTY:
            parts.append(dr)
        if not parts:
            return EMPTY
        return parts[0] if len(parts) == 1 else alt(*parts)
    if k == K_ALT:
        if len(node.args) <= 16:
            out = []
            for m in node.args:
                fb = m._first_bytes
                if fb < 0:
                    fb = first_bytes(m)
                if fb >> b & 1:
                    d = m._deriv.get(b)
                    if d is None:
                        d = derivative(m, b)
                    if d is not EMPTY:
                        out.append(d)
            if not out:
                return EMPTY
            return out[0] if len(out) == 1 else alt(*out)  # alt(x) is x
        buckets = node._buckets
        if buckets is None:  # members grouped by first bytes: visit only those that may live
            groups: dict[int, list[Node]] = {}
            for m in node.args:
                groups.setdefault(first_bytes(m), []).append(m)
            buckets = node._buckets = list(groups.items())
        return alt(*[derivative(m, b) for mask, ms in buckets if mask >> b & 1 for m in ms])
    if k == K_STAR:
        inner: Node = node.args[0]
        da = inner._deriv.get(b)
        if da is None:
            da = derivative(inner, b)
        if da is EMPTY:
            return EMPTY
        return node if da is EPSILON else concat(da, node)
    if k == K_REPEAT:
        inner, lo, hi = node.args
        da = inner._deriv.get(b)
        if da is None:
            da = derivative(inner, b)
        if da is EMPTY:  # no need to build the count-down node
            return EMPTY
        return concat(da, repeat(inner, max(lo - 1, 0), INF if hi == INF else hi - 1))
    if k == K_AND:
        ds = []
        plain = True  # no member that ``intersect`` would flatten, merge or drop
        for m in node.args:
            d = m._deriv.get(b)
            if d is None:
                d = derivative(m, b)
            if d is EMPTY:
                return EMPTY
            if d.kind in _AND_SPECIAL or d is _UNIVERSAL:
                plain = False
            ds.append(d)
        if plain:  # intersect(*ds) without its general pass: dedupe, sort, intern
            if len(ds) == 2:
                x, y = ds
                if x is y:
                    return x
                pair = (x, y) if x.uid < y.uid else (y, x)
                return _intern(K_AND, pair, x.nullable and y.nullable, F_BOOLEAN | x.flags | y.flags)
            uniq = set(ds)
            if len(uniq) == 1:
                return ds[0]
            args = tuple(sorted(uniq, key=_key))
            return _intern(K_AND, args, all(m.nullable for m in args), F_BOOLEAN | _flags(*args))
        return intersect(*ds)
    if k == K_NOT:
        inner = node.args[0]
        dn = inner._deriv.get(b)
        if dn is None:
            dn = derivative(inner, b)
        return complement(dn)
    if k == K_HIDE:
        inner, mask = node.args
        return EMPTY if mask >> b & 1 else hide(derivative(inner, b), mask)
    return EMPTY  # ∅, ε


_AND_SPECIAL = frozenset((K_AND, K_BYTES, K_EPS))  # members ``intersect`` rewrites


def _head_derivative(a: Node, rest: Node, b: int) -> Node:
    """``derivative(a, b) · rest`` (``rest`` is never ε: concat drops it)."""
    if a.kind == K_BYTES:
        return rest if a.args[0] >> b & 1 else EMPTY
    da = a._deriv.get(b)
    if da is None:
        da = derivative(a, b)
    if da is EMPTY:
        return EMPTY
    if da is EPSILON:
        return rest
    if da.kind == K_CONCAT:
        return concat(da, rest)
    return _concat2(da, rest)


_SAME_FIRSTS = frozenset((K_STAR, K_REPEAT, K_NOT))  # firsts: those of args[0]


def firsts_child(node: Node) -> Node | None:
    """The child with the same ``firsts`` as ``node`` (so the same byte classes): the
    head of a concatenation whose head is not nullable, the body of a star, repeat or
    complement; None for other nodes."""
    k = node.kind
    if k in _SAME_FIRSTS or (k == K_CONCAT and not node.args[0].nullable):
        child: Node = node.args[0]
        return child
    return None


def firsts(node: Node) -> tuple[int, ...]:
    """Byte masks whose membership decides the node's derivative (cached).

    Bytes that agree on membership in every returned mask have the same derivative.
    """
    f = node._firsts
    if f is None:
        inner = firsts_child(node)
        if inner is not None:  # the child's tuple itself
            f = node._firsts = inner._firsts if inner._firsts is not None else firsts(inner)
            return f
        k = node.kind
        acc: set[int] = set()
        if k == K_BYTES:
            acc.add(node.args[0])
        elif k == K_CONCAT:  # heads up to the first non-nullable one, without recursion
            n = node
            while n.kind == K_CONCAT:
                head = n.args[0]
                acc.update(firsts(head))
                if not head.nullable:
                    break
                n = n.args[1]
            else:
                acc.update(firsts(n))
        elif k in (K_ALT, K_AND):
            for m in node.args:
                acc.update(firsts(m))
        elif k in (K_STAR, K_REPEAT, K_NOT):
            acc.update(firsts(node.args[0]))
        elif k == K_HIDE:
            acc.update(firsts(node.args[0]))
            acc.add(node.args[1])
        f = tuple(sorted(acc))
        node._firsts = f
    return f


def first_bytes(node: Node) -> int:
    """Mask of bytes whose derivative may be non-∅ (all bytes for boolean nodes)."""
    f = node._first_bytes
    if f < 0:
        if node.flags & F_BOOLEAN:
            f = ALL_BYTES_MASK
        else:
            f = 0
            for m in firsts(node):
                f |= m
        node._first_bytes = f
    return f


def node_classes(node: Node) -> tuple[int, ...]:
    """``byte_classes((node,))`` as a tuple, cached on the node (do not mutate)."""
    c = node._classes
    if c is None:
        child = firsts_child(node)
        c = classes_of((node,)) if child is None else node_classes(child)
        node._classes = c
    return c


def byte_classes(nodes: Iterable[Node]) -> list[int]:
    """Partition of 0..255 (as byte masks) refining every node's ``firsts``.

    The partition depends only on the set of distinct ``firsts`` masks, and it is cached
    by that set (process-wide; states of different DFAs share most of their masks).
    Cost on a miss: O(#masks × #classes) big-int operations up to 150 masks (faster than
    numpy below that: 13 µs for 25 masks, 73 µs for 80), one numpy pass (unique byte
    signatures) beyond; a hit costs collecting the masks.
    """
    return list(classes_of(nodes))


def classes_of(nodes: Iterable[Node]) -> tuple[int, ...]:
    """``byte_classes`` as the memoised tuple itself (equal mask sets give the same tuple
    object while the memo holds it); do not mutate."""
    key = frozenset().union(*[n._firsts or firsts(n) for n in nodes])  # one C call
    if ALL_BYTES_MASK in key:
        key = key - _ALL_SET
    if not key:
        return _ALL_CLASSES
    return partition(key)


_ALL_CLASSES = (ALL_BYTES_MASK,)
_ALL_SET = frozenset((ALL_BYTES_MASK,))


def lowest_byte(mask: int) -> int:
    return (mask & -mask).bit_length() - 1


def mask_bytes(mask: int) -> list[int]:
    """The bytes of a 256-bit mask, increasing."""
    if mask.bit_count() <= 16:
        out = []
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return out
    s = bin(mask)[:1:-1]  # bit i at position i
    return [i for i, c in enumerate(s) if c == "1"]
