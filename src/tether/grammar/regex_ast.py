"""Read a simple Python-flavor regex into the front-end AST, so the greedy-safe lowering
(``tether.grammar.lower``) can look inside it instead of treating it as one opaque,
greedily lexed terminal.

1. Python's own regex parser (``re._parser``) reads the pattern;
2. literals, classes (``\\d \\w \\s`` from the regex layer's tables, ``.``, ranges,
   negation, case folding), alternation, groups and repetitions map to AST nodes;
3. anything else (anchors, look-around, backreferences, atomic groups, huge counted
   repetitions) returns None and the regex stays opaque.

The AST has the same language as the regex (full match), so nothing changes but the
lowering's freedom to split it where greedy lexing would lose a parse.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from tether.grammar.ast import (
    MAX_CP,
    Alt,
    Cls,
    Lit,
    Node,
    Ranges,
    Rep,
    alt,
    complement,
    normalize,
    seq,
)

try:  # Python 3.11+ (private modules of `re`, read-only use)
    _c: Any = importlib.import_module("re._constants")
    _p: Any = importlib.import_module("re._parser")
except ImportError:  # pragma: no cover - older Pythons
    _c = importlib.import_module("sre_constants")
    _p = importlib.import_module("sre_parse")

MAX_COUNT = 64  # counted repetitions above this stay opaque (the automata would be large)


class _Unsupported(Exception):
    pass


def _fold(ranges: Ranges, ignore_case: bool) -> Ranges:
    if not ignore_case:
        return ranges
    from tether.regex.charset import casefold_set

    return normalize(casefold_set(ranges))


def _category(cat: Any) -> Ranges:
    from tether.regex.charset import class_escape

    table = {
        _c.CATEGORY_DIGIT: "d", _c.CATEGORY_NOT_DIGIT: "D",
        _c.CATEGORY_WORD: "w", _c.CATEGORY_NOT_WORD: "W",
        _c.CATEGORY_SPACE: "s", _c.CATEGORY_NOT_SPACE: "S",
    }
    if cat not in table:
        raise _Unsupported(str(cat))
    return normalize(class_escape(table[cat], "python"))


def _in(items: list[tuple[Any, Any]], ignore_case: bool) -> Node:
    neg = False
    ranges: list[tuple[int, int]] = []
    for op, av in items:
        if op is _c.NEGATE:
            neg = True
        elif op is _c.LITERAL:
            ranges.append((av, av))
        elif op is _c.RANGE:
            ranges.append((av[0], av[1]))
        elif op is _c.CATEGORY:
            ranges.extend(_category(av))
        else:
            raise _Unsupported(str(op))
    rs = _fold(normalize(ranges), ignore_case)
    if neg:
        return Cls(complement(rs), negated_view=rs)
    if not rs:
        raise _Unsupported("empty class")
    return Cls(rs)


def _convert(sub: Any, ignore_case: bool, dotall: bool) -> Node:
    items: list[Node] = []
    for op, av in sub:
        if op is _c.LITERAL:
            if ignore_case:
                items.append(Cls(_fold(((av, av),), True)))
            else:
                items.append(Lit(chr(av)))
        elif op is _c.NOT_LITERAL:
            rs = _fold(((av, av),), ignore_case)
            items.append(Cls(complement(rs), negated_view=rs))
        elif op is _c.ANY:
            items.append(Cls(((0, MAX_CP),)) if dotall else Cls(complement(((10, 10),)), negated_view=((10, 10),)))
        elif op is _c.IN:
            items.append(_in(av, ignore_case))
        elif op is _c.BRANCH:
            items.append(alt([_convert(b, ignore_case, dotall) for b in av[1]]))
        elif op is _c.SUBPATTERN:
            _group, add, delete, p = av
            ic = (ignore_case or bool(add & re.IGNORECASE)) and not delete & re.IGNORECASE
            da = (dotall or bool(add & re.DOTALL)) and not delete & re.DOTALL
            items.append(_convert(p, ic, da))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", None)):
            if op is getattr(_c, "POSSESSIVE_REPEAT", object()):
                raise _Unsupported("possessive")
            lo, hi, p = av
            top = None if hi == _c.MAXREPEAT else hi
            if lo > MAX_COUNT or (top is not None and top > MAX_COUNT):
                raise _Unsupported("large count")
            items.append(Rep(_convert(p, ignore_case, dotall), lo, top))
        else:  # AT (anchors), ASSERT, GROUPREF, ATOMIC_GROUP, ...
            raise _Unsupported(str(op))
    # merge runs of single-character literals back into strings
    merged: list[Node] = []
    for it in items:
        if isinstance(it, Lit) and merged and isinstance(merged[-1], Lit):
            merged[-1] = Lit(merged[-1].text + it.text)
        else:
            merged.append(it)
    return seq(merged)


def regex_to_ast(pattern: str, *, flags: str = "", flavor: str = "python") -> Node | None:
    """The AST of ``pattern`` (full-match language), or None if it uses something the
    AST cannot express (then keep the regex as an opaque terminal)."""
    if flavor != "python" or "x" in flags and "#" in pattern:
        return None
    try:
        tree = _p.parse(pattern, re.VERBOSE if "x" in flags else 0)
    except (re.error, RecursionError, OverflowError):
        return None
    gflags = tree.state.flags
    ic = "i" in flags or bool(gflags & re.IGNORECASE)
    da = "s" in flags or bool(gflags & re.DOTALL)
    try:
        node = _convert(tree, ic, da)
    except (_Unsupported, RecursionError):
        return None
    if isinstance(node, Alt) and not node.items:  # pragma: no cover - defensive
        return None
    return node
