"""Regex trees of Lark terminals, and look-aheads the regex layer cannot lower directly.

A pattern is read (by the regex layer's parser) into a small tree of code point sets,
sequences, alternatives, repetitions and look-arounds (``parse_tree``); the trees have
the facts ``longest_match.py`` needs (lengths, prefixes, the text around a look-around).

``without_lookaheads``: a look-ahead inside a repetition (verilog.lark's
``/\\/\\*(\\*(?!\\/)|[^*])*\\*\\//``) whose body is one character and whose text is
decided inside the regex is rewritten away, the language unchanged: each look-ahead
becomes a constraint on the first character of what follows it ("not ``/``", "one of
``[a-z]``"), applied to the following items; a repetition becomes a small system of
equations, one unknown per constraint still open at the start of an iteration, solved
with Arden's rule. Look-behinds, anchors and longer look-ahead bodies are left to the
regex layer (None).
"""

from __future__ import annotations

from typing import Any

from tether.grammar.ast import Cls, Node, Rep, alt, seq
from tether.regex import charset as cs
from tether.regex.ast import INF
from tether.regex.tree import Tree as RegexTree
from tether.regex.tree import fold_trie

Tree = tuple[Any, ...]
# ("set", CharSet) | ("seq", (Tree, ...)) | ("alt", (Tree, ...)) | ("rep", Tree, lo, hi | None)
# | ("look", positive, Tree, ahead): a look-ahead (ahead) or look-behind; its body has no look
Constraint = tuple[cs.CharSet, bool]  # the first character of what follows is in the set
# (or what follows is empty, where the flag allows it)

FREE: Constraint = (cs.ALL, True)
NOTHING: Tree = ("alt", ())
EPSILON: Tree = ("seq", ())
_MAX_NODES = 20_000  # a rewrite larger than this is left to the regex layer
_MAX_UNROLL = 16  # counted repetitions holding a look-ahead are unrolled up to this


class Unsupported(Exception):
    """The pattern holds something these rewrites do not handle."""


# --- Python regex syntax → Tree ------------------------------------------------------


def parse_tree(pattern: str, flags: str = "") -> Tree | None:
    """``pattern`` (Python syntax, Lark flags ``i s x``) as a Tree, or None when it holds
    something outside the Tree (anchors, word boundaries, a look-around inside a
    look-around) or the regex layer refuses it. Read by the regex layer's parser (the one
    that compiles the pattern: flags and case folding are applied to the sets)."""
    from tether import regex as rx  # noqa: PLC0415
    from tether.errors import TetherError  # noqa: PLC0415

    try:
        tree, _ = rx.parse_tree(pattern, flavor="python", ignore_case="i" in flags,
                                dotall="s" in flags, verbose="x" in flags)
        return _convert(tree)
    except (TetherError, Unsupported):
        return None


def _convert(t: RegexTree) -> Tree:
    """A regex-layer parse tree (``tether.regex.tree``) as a Tree (look-behinds of one
    character become ``("look", positive, set, False)``)."""
    k = t[0]
    if k == "set":
        return ("set", t[1])
    if k == "seq":
        return _seq([_convert(x) for x in t[1]])
    if k == "alt":
        return _alt([_convert(x) for x in t[1]])
    if k == "trie":
        return fold_trie(t[1], lambda s, rest: _seq([("set", s), rest]), _alt, EPSILON)
    if k == "rep":
        return _rep(_convert(t[1]), t[2], None if t[3] == INF else t[3])
    if k == "look":
        inner = _convert(t[2])
        if has_look(inner):
            raise Unsupported
        return ("look", t[1], inner, True)
    if k == "behind":  # "preceded by one of" / "not preceded by one of (or at the start)"
        return ("look", True, ("set", t[1]), False) if not t[2] else \
            ("look", False, ("set", cs.complement(t[1])), False)
    raise Unsupported  # anchors and word boundaries


def _one_char(t: Tree) -> cs.CharSet | None:
    """The character set of ``t`` if it matches exactly one character, else None."""
    if t[0] == "set":
        return t[1]  # type: ignore[no-any-return]
    if t[0] == "alt" and t[1]:
        sets = [_one_char(x) for x in t[1]]
        return None if any(s is None for s in sets) else cs.union(*[s for s in sets if s is not None])
    return None


# --- trees: building, facts, rendering -------------------------------------------------


def _seq(items: list[Tree] | tuple[Tree, ...]) -> Tree:
    out: list[Tree] = []
    for x in items:
        if x == NOTHING or (x[0] == "set" and not x[1]):
            return NOTHING
        if x[0] == "seq":
            out.extend(x[1])
        else:
            out.append(x)
    return out[0] if len(out) == 1 else ("seq", tuple(out))


def _alt(items: list[Tree] | tuple[Tree, ...]) -> Tree:
    out: list[Tree] = []
    for x in items:
        for y in x[1] if x[0] == "alt" else (x,):
            if y not in out and not (y[0] == "set" and not y[1]):
                out.append(y)
    return out[0] if len(out) == 1 else ("alt", tuple(out))


def _rep(x: Tree, lo: int, hi: int | None) -> Tree:
    if hi == 0 or x == EPSILON:
        return EPSILON
    if x == NOTHING:
        return EPSILON if lo == 0 else NOTHING
    if (lo, hi) == (1, 1):
        return x
    return ("rep", x, lo, hi)


def has_look(t: Tree) -> bool:
    k = t[0]
    if k == "look":
        return True
    if k in ("seq", "alt"):
        return any(has_look(x) for x in t[1])
    return k == "rep" and has_look(t[1])


def _look_in_repetition(t: Tree) -> bool:
    k = t[0]
    if k in ("seq", "alt"):
        return any(_look_in_repetition(x) for x in t[1])
    return k == "rep" and has_look(t[1])


def _nullable(t: Tree) -> bool:
    k = t[0]
    if k == "set":
        return False
    if k == "seq":
        return all(_nullable(x) for x in t[1])
    if k == "alt":
        return any(_nullable(x) for x in t[1])
    if k == "rep":
        return t[2] == 0 or _nullable(t[1])
    return True  # a look-ahead reads no text


def _size(t: Tree) -> int:
    n, stack = 0, [t]
    while stack:
        x = stack.pop()
        n += 1
        if x[0] in ("seq", "alt"):
            stack.extend(x[1])
        elif x[0] == "rep":
            stack.append(x[1])
    return n


def to_node(t: Tree) -> Node:
    """The front-end AST of a look-free Tree (rendered with ``regexgen.to_regex``)."""
    k = t[0]
    if k == "set":
        return Cls(t[1])
    if k == "seq":
        return seq([to_node(x) for x in t[1]])
    if k == "alt":
        return alt([to_node(x) for x in t[1]]) if t[1] else Cls(())
    if k == "rep":
        return Rep(to_node(t[1]), t[2], t[3])
    raise Unsupported


def render(t: Tree) -> str:
    from tether.grammar.regexgen import to_regex  # noqa: PLC0415

    def no_refs(_r: object) -> Node:
        raise Unsupported

    return to_regex(to_node(t), no_refs)


# --- 1. look-aheads decided inside the regex --------------------------------------------


def _and(c: Constraint, d: Constraint) -> Constraint:
    return (cs.intersect(c[0], d[0]), c[1] and d[1])


def _restrict_ne(t: Tree, allowed: cs.CharSet) -> Tree:
    """The non-empty texts of look-free ``t`` whose first character is in ``allowed``."""
    k = t[0]
    if k == "set":
        return ("set", cs.intersect(t[1], allowed))
    if k == "alt":
        return _alt([_restrict_ne(x, allowed) for x in t[1]])
    if k == "seq":
        items = t[1]
        out: list[Tree] = []
        for i, x in enumerate(items):
            out.append(_seq([_restrict_ne(x, allowed), *items[i + 1 :]]))
            if not _nullable(x):
                break
        return _alt(out)
    if k == "rep":
        x, lo, hi = t[1], t[2], t[3]
        if hi == 0:
            return NOTHING
        rest_lo = 0 if _nullable(x) else max(lo - 1, 0)
        return _seq([_restrict_ne(x, allowed), _rep(x, rest_lo, None if hi is None else hi - 1)])
    raise Unsupported


def _add(out: dict[Constraint, Tree], c: Constraint, t: Tree) -> None:
    if t == NOTHING:
        return
    out[c] = _alt([out[c], t]) if c in out else t


def _follow(acc: dict[Constraint, Tree], nxt: dict[Constraint, Tree]) -> dict[Constraint, Tree]:
    """``acc`` (texts, each with the constraint left on what follows) then ``nxt``."""
    out: dict[Constraint, Tree] = {}
    for c, a in acc.items():
        for d, b in nxt.items():
            if c == FREE:
                _add(out, d, _seq([a, b]))
                continue
            _add(out, d, _seq([a, _restrict_ne(b, c[0])]))
            if _nullable(b):
                _add(out, _and(c, d), a)
    return out


def _decompose(t: Tree) -> dict[Constraint, Tree]:
    """``t`` as look-free texts, grouped by the constraint they leave on what follows."""
    if not has_look(t):
        return {FREE: t}
    k = t[0]
    if k == "look":
        s = _one_char(t[2]) if t[3] else None
        if s is None:  # look-behinds and longer bodies are the regex layer's
            raise Unsupported
        return {(s, False) if t[1] else (cs.complement(s), True): EPSILON}
    if k == "alt":
        out: dict[Constraint, Tree] = {}
        for x in t[1]:
            for c, a in _decompose(x).items():
                _add(out, c, a)
        return out
    if k == "seq":
        acc: dict[Constraint, Tree] = {FREE: EPSILON}
        for x in t[1]:
            acc = _bounded(_follow(acc, _decompose(x)))
        return acc
    x, lo, hi = t[1], t[2], t[3]
    if lo > _MAX_UNROLL or (hi is not None and hi > _MAX_UNROLL):
        raise Unsupported
    acc = {FREE: EPSILON}
    for _ in range(lo):
        acc = _follow(acc, _decompose(x))
    if hi is None:
        return _follow(acc, _star(_decompose(x)))
    for _ in range(hi - lo):
        acc = _follow(acc, _optional(_decompose(x)))
    return acc


def _bounded(d: dict[Constraint, Tree]) -> dict[Constraint, Tree]:
    """``d``, or Unsupported when its texts grew past ``_MAX_NODES`` tree nodes."""
    if sum(_size(v) for v in d.values()) > _MAX_NODES:
        raise Unsupported
    return d


def _optional(d: dict[Constraint, Tree]) -> dict[Constraint, Tree]:
    out = dict(d)
    _add(out, FREE, EPSILON)
    return out


def _star(item: dict[Constraint, Tree]) -> dict[Constraint, Tree]:
    """Any number of ``item`` texts (each with its constraint on what follows), solved
    as equations: ``L_c`` = the rest of the repetition when what follows must meet ``c``
    = exit with ``c``, or an item's non-empty text meeting ``c``, then ``L_d`` for the
    item's constraint ``d``. (An empty item text only narrows ``c``: its texts are
    already in ``L_c``.) Eliminated state by state with Arden's rule."""
    states = [FREE] + [d for d in item if d != FREE]
    # each equation: (constants by exit constraint, coefficients by unknown)
    eqs: dict[Constraint, tuple[dict[Constraint, Tree], dict[Constraint, Tree]]] = {}
    for s in states:
        coef: dict[Constraint, Tree] = {}
        for d, x in item.items():
            _add(coef, d, _restrict_ne(x, s[0]))
        eqs[s] = ({s: EPSILON}, coef)
    for s in states[1:] + states[:1]:
        const, coef = eqs.pop(s)
        loop = coef.pop(s, None)
        if loop is not None:
            star = _rep(loop, 0, None)
            const = {k: _seq([star, v]) for k, v in const.items()}
            coef = {k: _seq([star, v]) for k, v in coef.items()}
        if not eqs:
            return const
        for other, (oc, of) in eqs.items():
            b = of.pop(s, None)
            if b is None:
                continue
            for k, v in const.items():
                _add(oc, k, _seq([b, v]))
            for k, v in coef.items():
                _add(of, k, _seq([b, v]))
            if sum(_size(v) for v in (*oc.values(), *of.values())) > _MAX_NODES:
                raise Unsupported
            eqs[other] = (oc, of)
    raise AssertionError("unreachable: the last state returns")


def without_lookaheads(pattern: str, flags: str) -> str | None:
    """``pattern`` rewritten without its look-aheads, the same language, when a
    look-ahead sits inside a repetition (which the regex layer does not lower) and every
    look-ahead is decided by text inside the pattern; None otherwise (the regex layer and
    the look-around checks then handle the pattern as written). The result carries the
    ``i``/``s``/``x`` flags in its character classes."""
    tree = parse_tree(pattern, flags)
    if tree is None or not _look_in_repetition(tree):
        return None
    try:
        parts = _decompose(tree)
        if set(parts) != {FREE}:  # a look-ahead reads past the end of the pattern
            return None
        out = parts[FREE]
        if _size(out) > _MAX_NODES:
            return None
        return render(out)
    except (Unsupported, RecursionError):
        return None


def prefixes(t: Tree) -> Tree:
    """Every prefix of a text of look-free ``t``."""
    k = t[0]
    if k == "set":
        return _alt([EPSILON, t])
    if k == "alt":
        return _alt([prefixes(x) for x in t[1]])
    if k == "seq":
        items = t[1]
        return _alt([EPSILON] + [_seq([*items[:i], prefixes(x)]) for i, x in enumerate(items)])
    if k == "rep":
        x, hi = t[1], t[3]
        if hi == 0:
            return EPSILON
        return _seq([_rep(x, 0, None if hi is None else hi - 1), prefixes(x)])
    raise Unsupported


def min_len(t: Tree) -> int:
    k = t[0]
    if k == "set":
        return 1
    if k == "seq":
        return sum(min_len(x) for x in t[1])
    if k == "alt":
        return min((min_len(x) for x in t[1]), default=0)
    if k == "rep":
        return int(t[2]) * min_len(t[1])
    return 0


def max_len(t: Tree) -> int | None:
    k = t[0]
    if k == "set":
        return 1
    if k in ("seq", "alt"):
        lens = [max_len(x) for x in t[1]]
        if any(n is None for n in lens):
            return None
        known = [n for n in lens if n is not None]
        return sum(known) if k == "seq" else max(known, default=0)
    if k == "rep":
        n = max_len(t[1])
        if n == 0:
            return 0
        return None if n is None or t[3] is None else n * t[3]
    return 0


def without_looks(t: Tree) -> Tree:
    """``t`` with every look-around read as the empty text (a superset of its texts)."""
    k = t[0]
    if k == "look":
        return EPSILON
    if k in ("seq", "alt"):
        return (_seq if k == "seq" else _alt)([without_looks(x) for x in t[1]])
    if k == "rep":
        return _rep(without_looks(t[1]), t[2], t[3])
    return t


def contexts(t: Tree, target: Tree) -> list[tuple[Tree, Tree]]:
    """(text before, text after) around each place of the look-around node ``target``
    (compared by identity) in ``t``, other look-arounds read as empty: a superset."""
    k = t[0]
    if t is target:
        return [(EPSILON, EPSILON)]
    out: list[tuple[Tree, Tree]] = []
    if k == "seq":
        items = t[1]
        for i, x in enumerate(items):
            for b, a in contexts(x, target):
                out.append((_seq([*map(without_looks, items[:i]), b]),
                            _seq([a, *map(without_looks, items[i + 1 :])])))
    elif k == "alt":
        for x in t[1]:
            out.extend(contexts(x, target))
    elif k == "rep":
        many = _rep(without_looks(t[1]), 0, None)
        out.extend((_seq([many, b]), _seq([a, many])) for b, a in contexts(t[1], target))
    return out


def looks(t: Tree) -> list[Tree]:
    k = t[0]
    if k == "look":
        return [t]
    if k in ("seq", "alt"):
        return [y for x in t[1] for y in looks(x)]
    return looks(t[1]) if k == "rep" else []


def tree_chars(t: Tree) -> cs.CharSet:
    """Every character a text of ``t`` may hold."""
    k = t[0]
    if k == "set":
        return t[1]  # type: ignore[no-any-return]
    if k in ("seq", "alt"):
        return cs.union(*[tree_chars(x) for x in t[1]])
    if k == "rep":
        return tree_chars(t[1])
    return tree_chars(t[2])
