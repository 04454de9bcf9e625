"""String contents for JSON Schema: a small code-point regex AST, ECMA-262 patterns, JSON escaping.

A JSON Schema string keyword (``pattern``, ``format``, ``minLength``) speaks about the
*decoded* string, but the grammar constrains the *text* of the JSON document, where the
string is quoted and escaped. This module bridges the two in three steps:

1. ``parse_pattern`` reads an ECMA-262 pattern (the dialect JSON Schema names) into a small
   AST over code points (``CSet``, ``Seq``, ``Alt``, ``Rep``) and ``search_language`` turns
   it into the language of strings the pattern *finds* (unanchored search; ``^``/``$`` anchor
   at the ends of the string, as without the ``m`` flag);
2. the AST is measured (``width``) and combined with length bounds where that can be
   done exactly (``with_length``);
3. ``render`` writes the AST as a regex in tether's (Python) syntax over the JSON text of
   the string body in the *canonical escaping*: every character literal (UTF-8) except
   ``"`` → ``\\"``, ``\\`` → ``\\\\``, ``\\b \\f \\n \\r \\t`` for those controls and
   ``\\u00xx`` (lowercase hex) for the other C0 controls — exactly what ``json.dumps(s,
   ensure_ascii=False)`` writes.

Everything here is pure Python over small trees; costs are linear in the pattern size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tether.errors import LimitError, UnsupportedSchemaError
from tether.grammar.regexgen import quantifier
from tether.limits import current
from tether.regex import charset

MAX_CP = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Ranges = tuple[tuple[int, int], ...]


# --------------------------------------------------------------------------- interval sets


# The interval-set algebra is the regex layer's (code points, normalized tuples).
norm = charset.normalize
complement = charset.complement
intersect_ranges = charset.intersect
subtract = charset.difference


# --------------------------------------------------------------------------- the AST


@dataclass(frozen=True, slots=True)
class CSet:
    """One code point from ``ranges``."""

    ranges: Ranges


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Alt:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Rep:
    item: Node
    lo: int
    hi: int | None


@dataclass(frozen=True, slots=True)
class Anchor:
    """``^`` (start=True) or ``$``; only exists between parsing and ``search_language``."""

    start: bool


Node = CSet | Seq | Alt | Rep | Anchor

ANY = CSet(((0, MAX_CP),))
EPS = Seq(())
NOTHING = Alt(())


def lit(text: str) -> Node:
    return seq(*[CSet(((ord(c), ord(c)),)) for c in text])


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for it in items:
        if it == NOTHING:
            return NOTHING
        if isinstance(it, Seq):
            flat.extend(it.items)
        else:
            flat.append(it)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Node) -> Node:
    flat: dict[Node, None] = {}  # an ordered set: linear in the number of alternatives
    for it in items:
        for p in it.items if isinstance(it, Alt) else (it,):
            flat[p] = None
    return next(iter(flat)) if len(flat) == 1 else Alt(tuple(flat))


def rep(item: Node, lo: int, hi: int | None) -> Node:
    if hi == 0:
        return EPS
    if lo == hi == 1:
        return item
    return Rep(item, lo, hi)


def literal_of(node: Node) -> str | None:
    """The single string ``node`` matches, if it is a plain sequence of single characters."""
    items = node.items if isinstance(node, Seq) else (node,)
    out = []
    for it in items:
        if not (isinstance(it, CSet) and len(it.ranges) == 1 and it.ranges[0][0] == it.ranges[0][1]):
            return None
        out.append(chr(it.ranges[0][0]))
    return "".join(out)


# --------------------------------------------------------------------------- ECMA-262 patterns

_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = norm([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
# ECMA-262 WhiteSpace + LineTerminator
_SPACE: Ranges = norm(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
     (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)
_DOT: Ranges = complement(norm([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]))
_CLASS_ESC = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_CTRL_ESC = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "0": 0x00}


class PatternError(ValueError):
    """A pattern outside the supported ECMA-262 subset (message names the construct)."""


class _Parser:
    """Recursive descent over the pattern; groups and stacked quantifiers nest at most
    ``Limits.max_nesting`` deep (LimitError naming the offset), so the recursion here and
    in the tree functions below stays bounded."""

    def __init__(self, pattern: str) -> None:
        self.p, self.i = pattern, 0
        self.depth, self.max_depth = 0, current().max_nesting

    def nest(self, extra: int = 1) -> None:
        if self.depth + extra > self.max_depth:
            raise LimitError("max_nesting", self.depth + extra, self.max_depth, f"offset {self.i} in pattern")

    def error(self, what: str) -> PatternError:
        return PatternError(f"{what} at offset {self.i} in pattern {self.p!r}")

    def peek(self) -> str:
        return self.p[self.i] if self.i < len(self.p) else ""

    def take(self) -> str:
        c = self.peek()
        if not c:
            raise self.error("unexpected end")
        self.i += 1
        return c

    def parse(self) -> Node:
        node = self.alternation()
        if self.i != len(self.p):
            raise self.error("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else Alt(tuple(branches))

    def sequence(self) -> Node:
        items: list[Node] = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified())
        return Seq(tuple(items)) if len(items) != 1 else items[0]

    def quantified(self) -> Node:
        atom = self.atom()
        stacked = 0
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{" and self._brace_ahead():
                lo, hi = self._braces()
            else:
                return atom
            if isinstance(atom, Anchor):
                raise self.error("quantified anchor")
            if self.peek() == "?":  # lazy: same language
                self.i += 1
            stacked += 1
            self.nest(stacked)
            atom = Rep(atom, lo, hi)

    def _brace_ahead(self) -> bool:
        j = self.p.find("}", self.i)
        body = self.p[self.i + 1 : j] if j > 0 else ""
        a, _, b = body.partition(",")
        return j > 0 and a.isdigit() and (b == "" or b.isdigit())

    def _braces(self) -> tuple[int, int | None]:
        j = self.p.index("}", self.i)
        body = self.p[self.i + 1 : j]
        self.i = j + 1
        if "," not in body:
            self.count(int(body))
            return int(body), int(body)
        a, b = body.split(",")
        lo, hi = int(a), (int(b) if b else None)
        if hi is not None and hi < lo:
            raise self.error("numbers out of order in {} quantifier")
        self.count(lo)
        if hi is not None:
            self.count(hi)
        return lo, hi

    def count(self, n: int) -> None:
        limit = current().max_repeat
        if n > limit:
            raise LimitError("max_repeat", n, limit, f"offset {self.i} in pattern")

    def atom(self) -> Node:
        c = self.take()
        if c == "(":
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?<", self.i) and self.p[self.i + 2 : self.i + 3] not in ("=", "!"):
                j = self.p.find(">", self.i)
                if j < 0:
                    raise self.error("unterminated group name")
                self.i = j + 1
            elif self.peek() == "?":
                raise self.error("lookaround assertion (not regular)")
            self.nest()
            self.depth += 1
            node = self.alternation()
            self.depth -= 1
            if self.take() != ")":
                raise self.error("missing ')'")
            return node
        if c == "[":
            return CSet(self.char_class())
        if c == ".":
            return CSet(_DOT)
        if c == "^":
            return Anchor(True)
        if c == "$":
            return Anchor(False)
        if c == "\\":
            return self.escape(in_class=False)
        if c in ")":
            raise self.error("unbalanced ')'")
        if c in "*+?":
            raise self.error("nothing to repeat")
        return CSet(((ord(c), ord(c)),))

    def escape(self, *, in_class: bool) -> CSet:
        c = self.take()
        if c in _CLASS_ESC:
            return CSet(_CLASS_ESC[c])
        if c.lower() in _CLASS_ESC:
            return CSet(complement(_CLASS_ESC[c.lower()]))
        if c == "b" and in_class:
            return CSet(((8, 8),))
        if c in ("b", "B"):
            raise self.error("word-boundary assertion \\" + c)
        if c in _CTRL_ESC:
            if c == "0" and self.peek().isdigit():
                raise self.error("octal escape")
            v = _CTRL_ESC[c]
            return CSet(((v, v),))
        if c == "c":
            letter = self.take()
            if not letter.isascii() or not letter.isalpha():
                raise self.error("bad \\c escape")
            v = ord(letter) % 32
            return CSet(((v, v),))
        if c == "x":
            h = self.p[self.i : self.i + 2]
            if len(h) != 2 or not all(ch in "0123456789abcdefABCDEF" for ch in h):
                raise self.error("bad \\x escape")
            self.i += 2
            return CSet(((int(h, 16),) * 2,))
        if c == "u":
            if self.peek() == "{":
                j = self.p.find("}", self.i)
                v = int(self.p[self.i + 1 : j], 16)
                self.i = j + 1
                return CSet(((v, v),))
            h = self.p[self.i : self.i + 4]
            if len(h) != 4 or not all(ch in "0123456789abcdefABCDEF" for ch in h):
                raise self.error("bad \\u escape")
            self.i += 4
            v = int(h, 16)
            if 0xD800 <= v <= 0xDBFF and self.p.startswith("\\u", self.i):  # surrogate pair
                h2 = self.p[self.i + 2 : self.i + 6]
                try:
                    v2 = int(h2, 16)
                except ValueError:
                    v2 = 0
                if 0xDC00 <= v2 <= 0xDFFF:
                    self.i += 6
                    v = 0x10000 + ((v - 0xD800) << 10) + (v2 - 0xDC00)
            return CSet(((v, v),))
        if c in ("p", "P"):
            from tether.regex.charset import general_category

            j = self.p.find("}", self.i)
            if self.peek() != "{" or j < 0:
                raise self.error("bad Unicode property escape \\" + c)
            name = self.p[self.i + 1 : j]
            found = general_category(name)
            if found is None:
                raise self.error(f"Unicode property {name!r} (only general categories)")
            self.i = j + 1
            r = norm(list(found))
            return CSet(r if c == "p" else complement(r))
        if c.isdigit():
            raise self.error("backreference")
        if c == "k":
            raise self.error("named backreference")
        return CSet(((ord(c), ord(c)),))

    def char_class(self) -> Ranges:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.take()
            if c == "]" and not (first and False):
                break
            first = False
            lo_set = self._class_atom(c)
            if self.peek() == "-" and self.p[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                hi_set = self._class_atom(self.take())
                if not (_single(lo_set) and _single(hi_set)):
                    # ECMA (non-u) treats [\d-z] as a union with '-'; keep that reading
                    ranges += list(lo_set) + [(0x2D, 0x2D)] + list(hi_set)
                    continue
                a, b = lo_set[0][0], hi_set[0][0]
                if a > b:
                    raise self.error("range out of order in character class")
                ranges.append((a, b))
            else:
                ranges += list(lo_set)
        r = norm(ranges)
        return complement(r) if negate else r

    def _class_atom(self, c: str) -> Ranges:
        if c == "\\":
            if self.peek() == "-":
                self.i += 1
                return ((0x2D, 0x2D),)
            return self.escape(in_class=True).ranges
        return ((ord(c), ord(c)),)


def _single(r: Ranges) -> bool:
    return len(r) == 1 and r[0][0] == r[0][1]


def parse_pattern(pattern: str) -> Node:
    """Parse an ECMA-262 pattern (``u`` semantics, no flags) into the AST, anchors included.

    Raises:
        PatternError: lookaround, backreferences, ``\\b``, ``\\p{..}`` or bad syntax.
    """
    return _Parser(pattern).parse()


def _edges(node: Node) -> list[tuple[bool, Node, bool]]:
    """Rewrite ``node`` as alternatives ``(anchored_start, body, anchored_end)``."""
    if isinstance(node, Anchor):
        return [(node.start, EPS, not node.start)]
    if not _has_anchor(node):
        return [(False, node, False)]
    if isinstance(node, Alt):
        out = []
        for b in node.items:
            out += _edges(b)
        return out
    if isinstance(node, Seq):
        acc: list[tuple[bool, Node, bool]] = [(False, EPS, False)]
        for it in node.items:
            nxt: list[tuple[bool, Node, bool]] = []
            for sa, body, ea in acc:
                for sb, body2, eb in _edges(it):
                    if ea and _can_be_nonempty(body2):
                        continue  # text after '$' never matches... unless body2 is empty-only
                    if sb and _can_be_nonempty(body):
                        continue
                    nxt.append((sa or sb, seq(body, body2), ea or eb))
            acc = nxt
            if len(acc) > 64:
                raise PatternError("too many anchored alternatives")
        return acc
    if isinstance(node, Rep):
        if _has_anchor(node.item):
            raise PatternError("anchor inside a repetition")
        return [(False, node, False)]
    return [(False, node, False)]


def _has_anchor(node: Node) -> bool:
    if isinstance(node, Anchor):
        return True
    if isinstance(node, (Seq, Alt)):
        return any(_has_anchor(i) for i in node.items)
    if isinstance(node, Rep):
        return _has_anchor(node.item)
    return False


def _can_be_nonempty(node: Node) -> bool:
    return width(node)[1] != 0


def search_language(node: Node) -> Node:
    """The strings in which the pattern ``node`` finds a match (JSON Schema ``pattern``)."""
    anywhere = Rep(ANY, 0, None)
    alts = []
    for sa, body, ea in _edges(node):
        alts.append(seq(*([] if sa else [anywhere]), body, *([] if ea else [anywhere])))
    return alt(*alts) if alts else NOTHING


def fullmatch_language(node: Node) -> Node:
    """The AST read with full-match semantics (anchors must not appear inside)."""
    if _has_anchor(node):
        return search_language(node)
    return node


def pattern_language(pattern: str, pointer: str) -> Node:
    """Parse a JSON Schema ``pattern`` into its search language, or raise naming the pointer."""
    try:
        return search_language(parse_pattern(pattern))
    except PatternError as exc:
        raise UnsupportedSchemaError("pattern", pointer, str(exc)) from None


# --------------------------------------------------------------------------- measuring


def width(node: Node) -> tuple[int, int | None]:
    """(fewest, most) code points a match has; ``None`` = unbounded."""
    if isinstance(node, CSet):
        return (1, 1) if node.ranges else (0, 0)
    if isinstance(node, Anchor):
        return (0, 0)
    if isinstance(node, Seq):
        lo, hi = 0, 0  # type: int, int | None
        for it in node.items:
            a, b = width(it)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(node, Alt):
        if not node.items:
            return (0, 0)
        ws = [width(i) for i in node.items]
        his = [b for _, b in ws]
        return min(a for a, _ in ws), (None if None in his else max(h for h in his if h is not None))
    a, b = width(node.item)
    hi = None if node.hi is None or b is None else b * node.hi
    if node.hi is None and b == 0:
        hi = 0
    return a * node.lo, hi


def is_empty_language(node: Node) -> bool:
    """Whether ``node`` matches no string (remembered per node object, as ``render``)."""
    found = _EMPTY.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    empty = _is_empty(node)
    if len(_EMPTY) >= _MEMO_MAX:
        _EMPTY.clear()
    _EMPTY[id(node)] = (node, empty)
    return empty


def _is_empty(node: Node) -> bool:
    if isinstance(node, CSet):
        return not node.ranges
    if isinstance(node, Seq):
        return any(_is_empty(i) for i in node.items)
    if isinstance(node, Alt):
        return all(_is_empty(i) for i in node.items)
    if isinstance(node, Rep):
        return node.lo > 0 and _is_empty(node.item)
    return False


# id(node) -> (node, ``is_empty_language(node)``)
_EMPTY: dict[int, tuple[Node, bool]] = {}
# entries of each per-node memo (``render``, ``is_empty_language``); cleared when full
_MEMO_MAX = 4096


def with_length(node: Node, lo: int, hi: int | None) -> Node | None:
    """``node`` restricted to strings of ``lo..hi`` code points, or None if not done exactly.

    Exact cases: the bounds already hold for every match; or ``node`` is a sequence whose
    items all have a fixed width except one repetition of a fixed-width item, whose
    count is then narrowed.
    """
    a, b = width(node)
    if a >= lo and (hi is None or (b is not None and b <= hi)):
        return node
    if b is not None and b < lo or (hi is not None and a > hi):
        return NOTHING
    items: list[Node] = list(node.items) if isinstance(node, Seq) else [node]
    var = [k for k, it in enumerate(items) if width(it)[0] != width(it)[1]]
    if len(var) != 1 or not isinstance(items[var[0]], Rep):
        return None
    r = items[var[0]]
    assert isinstance(r, Rep)
    iw = width(r.item)
    if iw[0] != iw[1] or iw[0] == 0:
        return None
    unit = iw[0]
    fixed = a - r.lo * unit
    # count n of the repetition: lo <= fixed + n*unit <= hi
    n_lo = max(r.lo, -(-(lo - fixed) // unit))
    n_hi = r.hi
    if hi is not None:
        cap = (hi - fixed) // unit
        n_hi = cap if n_hi is None else min(n_hi, cap)
    if n_hi is not None and n_hi < n_lo:
        return NOTHING
    items[var[0]] = rep(r.item, n_lo, n_hi)
    return seq(*items)


def matches(node: Node, text: str) -> bool:
    """Whether ``text`` is in the language of ``node`` (Python ``re`` on the decoded text)."""
    import re

    return re.fullmatch(render_plain(node), text, re.DOTALL) is not None


# --------------------------------------------------------------------------- rendering

_SHORT = {0x22: '\\\\"', 0x5C: "\\\\\\\\", 0x08: "\\\\b", 0x0C: "\\\\f", 0x0A: "\\\\n",
          0x0D: "\\\\r", 0x09: "\\\\t"}
_NEEDS_ESCAPE: Ranges = norm([(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)])
_UNENCODABLE: Ranges = (SURROGATES,)
_CLASS_SPECIAL = set("\\]^-[")


def _class_char(cp: int) -> str:
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    c = chr(cp)
    if c in _CLASS_SPECIAL:
        return "\\" + c
    if cp > 0x7F and not c.isprintable():
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    return c


def _char_class(ranges: Ranges) -> str:
    """A Python character class for non-empty ``ranges`` (never containing specials)."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        c = chr(ranges[0][0])
        import re

        return re.escape(c) if ranges[0][0] >= 0x20 and c.isprintable() else _class_char(ranges[0][0])
    if ranges == ((0x30, 0x39),):
        return "[0-9]"
    comp = subtract(complement(ranges), norm(list(_NEEDS_ESCAPE) + list(_UNENCODABLE)))
    total = sum(h - lo + 1 for lo, h in ranges)
    if len(comp) < len(ranges) and total > 0x8000:
        body = "".join(_range_text(r) for r in norm(list(comp) + list(_NEEDS_ESCAPE)))
        return f"[^{body}]"
    return "[" + "".join(_range_text(r) for r in ranges) + "]"


def _range_text(r: tuple[int, int]) -> str:
    lo, hi = r
    if lo == hi:
        return _class_char(lo)
    if hi == lo + 1:
        return _class_char(lo) + _class_char(hi)
    return _class_char(lo) + "-" + _class_char(hi)


def render_cset(ranges: Ranges) -> str:
    """Regex over JSON string-body text for one code point of ``ranges`` (canonical escape).

    Cost: memoized by ``ranges`` (a pattern or a key repeats the same few classes).
    """
    found = _CSET_TEXT.get(ranges)
    if found is None:
        if len(_CSET_TEXT) >= 1 << 16:
            _CSET_TEXT.clear()
        found = _CSET_TEXT[ranges] = _render_cset(ranges)
    return found


_CSET_TEXT: dict[Ranges, str] = {}


def _render_cset(ranges: Ranges) -> str:
    ranges = subtract(ranges, _UNENCODABLE)
    plain = subtract(ranges, _NEEDS_ESCAPE)
    parts = []
    if plain:
        parts.append(_char_class(plain))
    special = intersect_ranges(ranges, _NEEDS_ESCAPE)
    uhex: list[int] = []
    for lo, hi in special:
        for cp in range(lo, hi + 1):
            if cp in _SHORT:
                parts.append(_SHORT[cp])
            else:
                uhex.append(cp)
    if uhex:
        parts.append(_uhex(uhex))
    if not parts:
        return "[^\\x00-\\U0010ffff]"  # matches nothing
    if len(parts) == 1 and plain:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _uhex(cps: list[int]) -> str:
    by_high: dict[int, list[int]] = {}
    for cp in cps:
        by_high.setdefault(cp >> 4, []).append(cp & 15)
    alts = []
    for high, lows in sorted(by_high.items()):
        runs = norm([(x, x) for x in lows])
        hexd = "0123456789abcdef"
        pieces = []
        for a, b in runs:  # ranges must not span '9'..'a' (other characters lie between)
            for lo_, hi_ in ((a, min(b, 9)), (max(a, 10), b)):
                if lo_ <= hi_:
                    pieces.append(hexd[lo_] if lo_ == hi_ else f"{hexd[lo_]}-{hexd[hi_]}")
        cls = "".join(pieces)
        alts.append(f"{high:x}" + (cls if len(lows) == 1 else f"[{cls}]"))
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return "\\\\u00" + body


def _render(node: Node, cset) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    """(regex text, precedence): 0 = atom, 1 = sequence, 2 = alternation."""
    if isinstance(node, CSet):
        return cset(node.ranges), 0
    if isinstance(node, Seq):
        parts = []
        for i in node.items:
            t, p = _render(i, cset)
            parts.append(f"(?:{t})" if p == 2 else t)
        if len(parts) == 1:
            t, p = _render(node.items[0], cset)
            return t, p
        return "".join(parts), 1
    if isinstance(node, Alt):
        if not node.items:
            return cset(()), 0
        if len(node.items) == 1:
            return _render(node.items[0], cset)
        if EPS in node.items:  # write ε | x as (?:x)? — no empty alternatives in the output
            t, p = _render(alt(*[i for i in node.items if i != EPS]), cset)
            return (f"(?:{t})" if p else t) + "?", 1
        return "|".join(_render(i, cset)[0] for i in node.items), 2
    if isinstance(node, Rep):
        t, p = _render(node.item, cset)
        # precedence 1: a quantified atom takes no second quantifier without a group
        return (f"(?:{t})" if p else t) + quantifier(node.lo, node.hi), 1
    raise AssertionError(node)


def render(node: Node, *, cset=render_cset) -> str:  # type: ignore[no-untyped-def]
    """The regex (tether/Python syntax) for ``node`` over canonical JSON string-body text.

    Remembered per node object (nodes are immutable; the entry holds the node, so its id
    is not reused while it is kept): the languages of formats and patterns are memoized
    nodes, written again for every string that uses them."""
    if cset is not render_cset:
        return _render(node, cset)[0]
    found = _RENDERED.get(id(node))
    if found is not None and found[0] is node:
        return found[1]
    text = _render(node, cset)[0]
    if len(_RENDERED) >= _MEMO_MAX:
        _RENDERED.clear()
    _RENDERED[id(node)] = (node, text)
    return text


# id(node) -> (node, ``render(node)``)
_RENDERED: dict[int, tuple[Node, str]] = {}


def _plain_cset(ranges: Ranges) -> str:
    ranges = subtract(ranges, _UNENCODABLE)
    if not ranges:
        return "[^\\x00-\\U0010ffff]"
    return _char_class(ranges) if ranges != norm([(0, MAX_CP)]) else "."


def render_plain(node: Node) -> str:
    """The regex for ``node`` over the decoded text (Python ``re``, use with DOTALL)."""
    return render(node, cset=_plain_cset)


def render_string(node: Node) -> str:
    """Regex for a whole JSON string (quotes included) whose decoded value is in ``node``."""
    t, p = _render(node, render_cset)
    return '"' + (f"(?:{t})" if p == 2 else t) + '"'


# --------------------------------------------------------------------------- finite sets


def not_in(words: list[str]) -> Node:
    """Every string except those in ``words`` (exact, size linear in the trie of ``words``)."""
    trie: dict[Any, Any] = {}
    for w in words:
        t = trie
        for ch in w:
            t = t.setdefault(ch, {})
        t[None] = True
    return _not_in(trie)


def _not_in(t: dict[Any, Any]) -> Node:
    kids = sorted(k for k in t if k is not None)
    alts: list[Node] = []
    if None not in t:
        alts.append(EPS)
    for k in kids:
        alts.append(seq(lit(k), _not_in(t[k])))
    other = complement(norm([(ord(k), ord(k)) for k in kids]))
    alts.append(seq(CSet(other), Rep(ANY, 0, None)))
    return alt(*alts)
