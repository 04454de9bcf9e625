"""Input bounds of the grammar front ends (``tether.limits``), checked where text enters.

Grammar text is hostile input. Every front end (GBNF, Lark, KBNF, choices, the IR
builders) calls these helpers so that an input past one of the active
`tether.limits.Limits` raises `LimitError` naming the limit, the value and the place
(``line L column C`` of the grammar text), before any pass can spend time or memory on it:

* `check_text`: ``max_text_chars`` (the characters of the grammar text);
* `count`: a repeat count read from the text (``{m,n}``, ``~ n..m``, ``except!(X, n)``)
  against ``max_repeat``, without converting a 5,000-digit number first;
* `Depth`: the nesting depth of the recursive-descent readers (``max_nesting``);
* `check_rules`: after parsing, per rule body (iteratively): the nesting depth of the AST
  (``max_nesting``; the later passes recurse on it, so this bound is what keeps them within
  the interpreter's stack), the expanded size, where a repetition multiplies the size of
  its item by its count (``max_expanded``), the alternatives of one alternation
  (``max_alternatives``), and the number of rules (``max_rules``).

Rule references are not followed here (rules stay rules in the IR); the passes that
inline rules (``lower``'s lexical units) bound what they inline themselves
(`inlined_sizes`).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from tether.errors import GrammarError, LimitError, line_col
from tether.grammar.ast import Alt, Lit, Node, Ref, Rep, Seq, SetOp
from tether.limits import check, check_deadline, current  # noqa: F401 (current: for the front ends)

__all__ = [
    "Depth", "check_encodable", "check_rules", "check_text", "code_point", "count", "inlined_sizes", "place", "node_size", "run",
]


def place(text: str, pos: int, source: str = "") -> str:
    """``line L column C`` (``in SOURCE``) of offset ``pos`` in ``text`` (empty if unknown)."""
    if pos < 0 or not text:
        return source
    line, col = line_col(text, min(pos, len(text)))
    return f"line {line} column {col}" + (f" in {source}" if source else "")


def check_text(text: object, source: str = "", what: str = "grammar") -> str:
    """Return ``text`` if it is a string within ``max_text_chars``; else raise.

    Raises:
        GrammarError: ``text`` is not a string.
        LimitError: ``max_text_chars``.
    """
    if not isinstance(text, str):
        raise GrammarError(f"the {what} must be a string, not {type(text).__name__}")
    check("max_text_chars", len(text), source or what)
    check_encodable(text, source)
    return text


def code_point(digits: str, text: str, pos: int, source: str = "") -> str:
    """The character of a ``\\x``/``\\u``/``\\U`` escape's hex ``digits`` (already checked
    to be hex). Raises GrammarError past U+10FFFF or for a surrogate (not encodable)."""
    cp = int(digits, 16)
    if cp > 0x10FFFF:
        raise GrammarError(f"code point {digits} is out of range", text, pos, source)
    if 0xD800 <= cp <= 0xDFFF:
        raise GrammarError(f"code point {digits} is a surrogate, not a character", text, pos, source)
    return chr(cp)


def unescape(body: str, text: str, pos: int, source: str, escapes: dict[str, str], *,
             keep_unknown: bool = False, invalid: str = "invalid escape '{}'") -> str:
    """A string literal's ``body`` (at ``pos`` in ``text``) with its escapes replaced:
    ``\\x``/``\\u``/``\\U`` with 2/4/8 hex digits, and the one-letter ``escapes``.
    Another escape is kept as written (``keep_unknown``, Lark) or a GrammarError;
    malformed hex digits are the GrammarError ``invalid`` (``{}``: the escape)."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1] if i + 1 < len(body) else ""
        if e in ("x", "u", "U"):
            n = {"x": 2, "u": 4, "U": 8}[e]
            digits = body[i + 2 : i + 2 + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise GrammarError(invalid.format(f"\\{e}{digits}"), text, pos + i, source)
            out.append(code_point(digits, text, pos + i, source))
            i += 2 + n
        elif e in escapes:
            out.append(escapes[e])
            i += 2
        elif keep_unknown:
            out.append("\\" + e)
            i += 2
        else:
            raise GrammarError(f"unknown escape '\\{e}'", text, pos + i, source)
    return "".join(out)


def check_encodable(text: str, source: str = "") -> None:
    """Raise GrammarError at the first lone surrogate of ``text`` (it has no UTF-8 form)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise GrammarError("the text holds a lone surrogate, which has no UTF-8 encoding",
                           text, exc.start, source) from None


def count(digits: str, text: str, pos: int, source: str = "") -> int:
    """The repeat count spelled by ``digits`` (decimal, or Lark's ``0x..``), checked
    against ``max_repeat`` at offset ``pos`` of ``text``.

    Raises:
        LimitError: ``max_repeat`` (also for numbers too long to convert).
        GrammarError: not a number.
    """
    maximum = current().max_repeat
    body = digits[2:] if digits[:2].lower() == "0x" else digits
    if not body or len(body) > 30:
        if body and all(c in "0123456789abcdefABCDEF" for c in body):
            raise LimitError("max_repeat", f"a {len(body)}-digit number", maximum, place(text, pos, source))
        raise GrammarError(f"expected a number, got {digits[:40]!r}", text, pos, source)
    try:
        value = int(digits, 16) if body is not digits else int(digits)
    except ValueError:
        raise GrammarError(f"expected a number, got {digits[:40]!r}", text, pos, source) from None
    if value > maximum:
        raise LimitError("max_repeat", value, maximum, place(text, pos, source))
    return value


class Depth:
    """Nesting counter of a recursive-descent reader: ``enter`` raises LimitError past
    ``max_nesting`` (before the reader recurses once more), ``leave`` undoes it."""

    __slots__ = ("level", "maximum", "text", "source")

    def __init__(self, text: str, source: str = "") -> None:
        self.level, self.maximum = 0, current().max_nesting
        self.text, self.source = text, source

    def enter(self, pos: int) -> None:
        self.level += 1
        if self.level > self.maximum:
            raise LimitError("max_nesting", self.level, self.maximum, place(self.text, pos, self.source))

    def leave(self) -> None:
        self.level -= 1


def _children(n: Node) -> tuple[Node, ...]:
    if isinstance(n, Seq | Alt):
        return n.items
    if isinstance(n, Rep):
        return (n.item,)
    if isinstance(n, SetOp):
        return n.args
    return ()


def _rep_factor(n: Rep) -> int:
    # an unbounded repetition is expanded to lo copies plus one starred copy
    return max(1, n.hi if n.hi is not None else n.lo + 1)


def node_size(node: Node, inlined: dict[str, int] | None = None,
              ref_depth: dict[str, int] | None = None) -> tuple[int, int]:
    """``(depth, expanded size)`` of ``node``, iteratively. A literal counts its
    characters, a repetition multiplies its item by its count, a reference counts 1 (or
    ``inlined[name]`` when given) and adds ``ref_depth[name]`` to the depth when given.
    Sizes saturate at 2**62."""
    cap = 1 << 62
    sizes: dict[int, int] = {}
    depth = 0
    stack: list[tuple[Node, int, bool]] = [(node, 1, False)]
    while stack:
        n, d, done = stack.pop()
        kids = _children(n)
        if not done:
            if id(n) in sizes:  # a shared sub-node: sized once
                continue
            extra = ref_depth.get(n.name, 0) if ref_depth is not None and isinstance(n, Ref) else 0
            depth = max(depth, d + extra)
            stack.append((n, d, True))
            stack.extend((k, d + 1, False) for k in kids)
            continue
        if isinstance(n, Lit):
            s = max(1, len(n.text))
        elif isinstance(n, Ref):
            s = inlined.get(n.name, 1) if inlined is not None else 1
        elif isinstance(n, Rep):
            s = sizes[id(n.item)] * _rep_factor(n)
        elif kids:
            s = sum(sizes[id(k)] for k in kids)
        else:
            s = 1
        sizes[id(n)] = min(s, cap)
    return depth, sizes[id(node)]


def check_rules(
    rules: dict[str, Node], text: str = "", source: str = "", positions: dict[str, int] | None = None
) -> None:
    """Check the parsed rules against ``max_rules``, ``max_nesting``, ``max_alternatives``
    and ``max_expanded`` (see the module docstring); the place is the offending node's.

    Raises:
        LimitError: naming the limit, the value and ``line L column C``.
    """
    lim = current()
    if len(rules) > lim.max_rules:
        raise LimitError("max_rules", len(rules), lim.max_rules, source)
    total = 0
    for name, body in rules.items():
        at = positions.get(name, -1) if positions else -1
        # depth and alternatives first (iteratively), naming the deepest node's place
        stack: list[tuple[Node, int]] = [(body, 1)]
        while stack:
            n, d = stack.pop()
            pos = getattr(n, "pos", -1)
            if d > lim.max_nesting:
                raise LimitError("max_nesting", d, lim.max_nesting,
                                 place(text, pos if pos >= 0 else at, source))
            if isinstance(n, Alt) and len(n.items) > lim.max_alternatives:
                raise LimitError("max_alternatives", len(n.items), lim.max_alternatives,
                                 place(text, pos if pos >= 0 else at, source))
            stack.extend((k, d + 1) for k in _children(n))
        _, size = node_size(body)
        total += size
        if total > lim.max_expanded:
            raise LimitError("max_expanded", total if size < total else size, lim.max_expanded,
                             place(text, _largest_rep(body, at), source),
                             detail=f"rule '{name}' after its repetitions are expanded")


def _largest_rep(body: Node, default: int) -> int:
    """Offset of the repetition with the largest expanded size in ``body`` (for messages)."""
    best, where = -1, default
    stack = [body]
    while stack:
        n = stack.pop()
        if isinstance(n, Rep) and n.pos >= 0:
            s = node_size(n)[1]
            if s > best:
                best, where = s, n.pos
        stack.extend(_children(n))
    return where


def inlined_sizes(rules: dict[str, Node], names: set[str] | None = None) -> dict[str, tuple[int, int]]:
    """Per rule (of ``names``, default all) that does not reach itself: ``(depth, size)``
    with every reference to such a rule inlined, computed children first without recursion.
    Rules on a cycle (and rules using them) are left out."""
    names = set(rules) if names is None else names
    deps: dict[str, set[str]] = {}
    for n in names:
        stack, out = [rules[n]], set()
        while stack:
            x = stack.pop()
            if isinstance(x, Ref):
                out.add(x.name)
            stack.extend(_children(x))
        deps[n] = out
    # Kahn's order over the references (a rule after everything it uses)
    waiting = {n: {d for d in deps[n] if d in names} for n in names}
    users: dict[str, list[str]] = {}
    for n, ds in waiting.items():
        for d in ds:
            users.setdefault(d, []).append(n)
    ready = [n for n, ds in waiting.items() if not ds]
    out_sz: dict[str, tuple[int, int]] = {}
    depth_of: dict[str, int] = {}
    size_of: dict[str, int] = {}
    while ready:
        n = ready.pop()
        if any(d in rules and d not in names for d in deps[n]):
            continue  # uses a rule outside the set: not inlinable
        d0, s0 = node_size(rules[n], size_of, depth_of)
        depth_of[n], size_of[n] = d0, s0
        out_sz[n] = (d0, s0)
        for u in users.get(n, ()):
            w = waiting[u]
            w.discard(n)
            if not w:
                ready.append(u)
    return out_sz


def run(gen: Generator[Any, Any, Any]) -> Any:
    """Drive a recursive-descent reader written as generators, without recursion.

    A reader function ``f`` that would call ``self.g()`` recursively instead does
    ``x = yield self.g()`` (``g`` being a generator function too); ``run`` keeps the
    generators on an explicit stack, so the depth of the input costs heap, not the
    interpreter's stack. Exceptions propagate out of ``run`` as from a plain call; the
    active deadline (``tether.limits.deadline``) is checked every 1,024 calls."""
    stack: list[Generator[Any, Any, Any]] = [gen]
    value: Any = None
    steps = 0
    while stack:
        try:
            sub = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            value = stop.value
            continue
        steps += 1
        if not steps & 1023:
            check_deadline()
        stack.append(sub)
        value = None
    return value
