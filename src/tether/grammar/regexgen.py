"""Spell front-end AST nodes as regexes in tether's (Python-flavor) syntax.

Used for terminals: a literal, a character class, or a whole lexical sub-expression
(sequences, alternations, repetitions, inlined rules) becomes one regex string.
Set operations (``&``, ``~``, ``except!``) have no regex spelling; they become
``Terminal.expr`` trees instead (see ``terminal_expr``).
"""

from __future__ import annotations

from collections.abc import Callable

from tether.grammar.ast import EPS, MAX_CP, Alt, Cls, Lit, Node, Ref, Rep, Rx, Seq, SetOp, Term

_LITERAL_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ ")


def escape_char(cp: int, in_class: bool = False) -> str:
    c = chr(cp)
    if c in _LITERAL_SAFE and not (in_class and c == " "):
        return c
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    if cp < 0x80:
        return "\\" + c
    if 0xD800 <= cp <= 0xDFFF or not c.isprintable():
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    return c


def escape_literal(text: str) -> str:
    return "".join(escape_char(ord(c)) for c in text)


def class_regex(node: Cls) -> str:
    if node.ranges == ((0, MAX_CP),):
        return "(?s:.)"
    neg = node.negated_view is not None
    ranges = node.negated_view if node.negated_view is not None else node.ranges
    if not neg and len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return escape_char(ranges[0][0])
    parts = []
    for lo, hi in ranges:
        a = escape_char(lo, True)
        if lo == hi:
            parts.append(a)
        elif hi == lo + 1:
            parts.append(a + escape_char(hi, True))
        else:
            parts.append(f"{a}-{escape_char(hi, True)}")
    if not parts:  # an empty class: matches nothing
        return "[^\\x00-\\U0010ffff]" if not neg else "(?s:.)"
    return f"[{'^' if neg else ''}{''.join(parts)}]"


def quantifier(lo: int, hi: int | None) -> str:
    """The regex repetition suffix for ``lo`` to ``hi`` (None: unbounded) copies."""
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    if lo == hi:
        return f"{{{lo}}}"
    return f"{{{lo},{hi}}}"


def _atomic(r: str) -> bool:
    """True if ``r`` can take a quantifier without a group."""
    if len(r) == 1 or (len(r) == 2 and r[0] == "\\"):
        return True
    if r.startswith("(?") and r.endswith(")"):
        depth = 0
        for i, c in enumerate(r):
            if c == "\\":
                continue
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(r) - 1:
                return False
        return True
    if r.startswith("[") and r.endswith("]") and r.count("]") - r.count("\\]") == 1:
        return True
    return False


def to_regex(node: Node, resolve: Callable[[Ref], Node]) -> str:
    """The regex for ``node``; rule references are inlined through ``resolve``.

    Raises:
        ValueError: if ``node`` holds a set operation (use ``terminal_expr``).
    """
    if isinstance(node, Lit):
        r = escape_literal(node.text)
        return f"(?i:{r})" if node.ignore_case and r else r
    if isinstance(node, Cls):
        return class_regex(node)
    if isinstance(node, Rx):
        if node.flavor != "python":  # the terminal takes the ECMAScript flavor (see lower)
            if node.flags:
                raise ValueError("flags on an ECMAScript regex are not supported")
            return f"(?:{node.pattern})"
        flags = node.flags.replace("u", "")
        return f"(?{flags}:{node.pattern})" if flags else f"(?:{node.pattern})"
    if isinstance(node, Ref):
        return to_regex(resolve(node), resolve)
    if isinstance(node, Seq):
        if not node.items:
            return ""
        return "".join(
            f"(?:{r})" if isinstance(it, Alt) or (isinstance(it, Ref) and "|" in r) else r
            for it in node.items
            for r in (to_regex(it, resolve),)
        )
    if isinstance(node, Alt):
        parts = [to_regex(it, resolve) for it in node.items]
        return "(?:" + "|".join(parts) + ")"
    if isinstance(node, Rep):
        inner = to_regex(node.item, resolve)
        if inner == "":
            return ""
        if not _atomic(inner):
            inner = f"(?:{inner})"
        return inner + quantifier(node.lo, node.hi)
    if isinstance(node, SetOp | Term):
        raise ValueError("set operations and IR terminals have no regex spelling here")
    raise TypeError(f"unexpected node {node!r}")


def has_setop(node: Node, resolve: Callable[[Ref], Node]) -> bool:
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if isinstance(n, SetOp):
            return True
        if isinstance(n, Ref):
            if n.name not in seen:
                seen.add(n.name)
                stack.append(resolve(n))
        elif isinstance(n, Seq | Alt):
            stack.extend(n.items)
        elif isinstance(n, Rep):
            stack.append(n.item)
    return False


def terminal_expr(node: Node, resolve: Callable[[Ref], Node]) -> tuple | str:  # type: ignore[type-arg]
    """``node`` as a ``Terminal.expr`` tree: a regex string, or
    ``("and", a, b, ...)``, ``("not", a)``, ``("except", a, max_reps)``,
    ``("concat", ...)``, ``("or", ...)``, ``("repeat", a, lo, hi)``."""
    if not has_setop(node, resolve):
        return to_regex(node, resolve)
    if isinstance(node, Ref):
        return terminal_expr(resolve(node), resolve)
    if isinstance(node, SetOp):
        args = tuple(terminal_expr(a, resolve) for a in node.args)
        if node.op == "except":
            return ("except", args[0], node.max_reps)
        return (node.op, *args)
    if isinstance(node, Seq):
        return ("concat", *(terminal_expr(a, resolve) for a in node.items))
    if isinstance(node, Alt):
        return ("or", *(terminal_expr(a, resolve) for a in node.items))
    if isinstance(node, Rep):
        return ("repeat", terminal_expr(node.item, resolve), node.lo, node.hi)
    raise TypeError(f"unexpected node {node!r}")


__all__ = ["EPS", "escape_literal", "has_setop", "terminal_expr", "to_regex"]
