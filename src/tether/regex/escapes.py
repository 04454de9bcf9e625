"""Character-level regex syntax, per flavor: escapes (``\\n \\x41 \\u{1F600} \\N{...}``,
octal, ``\\c``), class escapes (``\\d \\w \\s``, ECMA ``\\p{..}``), bracketed sets and
``.``, under the flags in force (case folding, dotall, ASCII). ``CharReader`` reads them;
the parser (``parser.py``) builds on it for the structure of a pattern.

Python ``re`` and ECMA-262 differ here most: ECMA's identity escapes and Annex B
leniency (``\\x`` without digits is ``x``, ``[\\w-x]`` is a set of three), ``\\u`` surrogate
pairs and ``\\p``; Python's octal escapes, ``\\U``, ``\\N{name}`` and ``]`` first in a set.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

from ..errors import RegexError, limited
from . import charset as cs

Flavor = Literal["python", "ecma"]
FLAVORS = ("python", "ecma")


def check_flavor(flavor: str) -> None:
    if flavor not in FLAVORS:
        raise RegexError(f"flavor must be one of {FLAVORS}; got {limited(flavor)}")


_PY_SIMPLE = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
_ECMA_SIMPLE = {"f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_HEX = "0123456789abcdefABCDEF"
OCTAL_DIGITS = frozenset("01234567")


_CLASS_CACHE: dict[tuple[str, str, bool, bool], cs.CharSet] = {}


def _class_end(p: str, at: int, python: bool) -> int:
    """One past the ``]`` closing the set that opens at ``p[at]`` as the set parser reads
    it (an escape skips the next character; a ``]`` first in a Python set is literal),
    or -1 if there is none."""
    i = at + 1
    if i < len(p) and p[i] == "^":
        i += 1
    first = True
    while i < len(p):
        c = p[i]
        if c == "\\":
            i += 2
            first = False
            continue
        if c == "]" and not (first and python):
            return i + 1
        first = False
        i += 1
    return -1



@dataclass
class Flags:
    ignore_case: bool = False
    dotall: bool = False
    verbose: bool = False
    multiline: bool = False
    ascii: bool = False

    def copy(self) -> Flags:
        return Flags(self.ignore_case, self.dotall, self.verbose, self.multiline, self.ascii)


class CharReader:
    """A cursor over a pattern (``p``, offset ``i``) that reads character-level syntax."""

    def __init__(self, pattern: str, flavor: str, flags: Flags) -> None:
        self.p, self.flavor, self.i = pattern, flavor, 0
        self.flags = flags

    def error(self, msg: str, offset: int | None = None) -> RegexError:
        return RegexError(msg, self.p, self.i if offset is None else offset)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def eat(self, s: str) -> bool:
        if self.p.startswith(s, self.i):
            self.i += len(s)
            return True
        return False

    def literal_set(self, cp: int) -> cs.CharSet:
        if self.flags.ignore_case:
            return cs.casefold_char(cp, self.flags.ascii)
        return ((cp, cp),)

    def dot(self) -> cs.CharSet:
        if self.flags.dotall:
            return cs.ALL
        if self.flavor == "ecma":
            return cs.complement(cs.ECMA_LINE_TERMINATORS)
        return cs.complement(cs.NEWLINE)

    def char_class(self) -> cs.CharSet:
        """A bracketed set; cached by its text, dialect and the flags it depends on
        (front ends repeat the same sets, e.g. JSON whitespace, in every terminal)."""
        at = self.i
        end = _class_end(self.p, at, self.flavor == "python")
        key = (self.p[at:end], self.flavor, self.flags.ignore_case, self.flags.ascii)
        hit = _CLASS_CACHE.get(key) if end > 0 else None
        if hit is not None:
            self.i = end
            return hit
        s = self._char_class()
        if end > 0 and self.i == end and len(_CLASS_CACHE) < 100_000:
            _CLASS_CACHE[key] = s
        return s

    def _char_class(self) -> cs.CharSet:
        at = self.i
        self.i += 1
        negate = self.eat("^")
        plain: list[tuple[int, int]] = []  # literal ranges (subject to case folding)
        classes: list[cs.CharSet] = []  # \d \w ... (not folded)
        first = True
        while True:
            c = self.peek()
            if c == "":
                raise self.error("unterminated character set", at)
            if c == "]" and not (first and self.flavor == "python"):
                self.i += 1
                break
            first = False
            item_at = self.i
            lo = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi_at = self.i
                hi = self.class_atom()
                if isinstance(lo, tuple) or isinstance(hi, tuple):
                    if self.flavor == "python":
                        raise self.error("bad character range", item_at)
                    # Annex B: "[\w-x]" is \w, "-", x
                    for part in (lo, hi):
                        if isinstance(part, tuple):
                            classes.append(part)
                        else:
                            plain.append((part, part))
                    plain.append((45, 45))
                    continue
                if hi < lo:
                    raise self.error("bad character range (end before start)", hi_at)
                plain.append((lo, hi))
            elif isinstance(lo, tuple):
                classes.append(lo)
            else:
                plain.append((lo, lo))
        s = cs.normalize(plain)
        if self.flags.ignore_case:
            s = cs.casefold_set(s, self.flags.ascii)
        s = cs.union(s, *classes)
        return cs.complement(s) if negate else s

    def class_atom(self) -> int | cs.CharSet:
        c = self.peek()
        if c != "\\":
            self.i += 1
            return ord(c)
        at, c = self.escape_start()
        s = self.set_escape(c, at)
        if s is not None:
            return s
        if c == "b":
            self.i += 1
            return 8
        if self.flavor == "python" and c in OCTAL_DIGITS:
            return self.octal(at)
        if self.flavor == "python" and c.isdigit():
            raise self.error(f"bad escape \\{c}", at)
        if c == "B" and self.flavor == "python":
            raise self.error("bad escape \\B", at)
        if c == "-" :
            self.i += 1
            return 45
        return self.char_escape(at)

    def escape_start(self) -> tuple[int, str]:
        """Step over a backslash: its offset and the character after it."""
        at = self.i
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.error("bad escape (end of pattern)", at)
        return at, c

    def set_escape(self, c: str, at: int) -> cs.CharSet | None:
        """The set of a class escape (``\\d \\w \\s``, their negations, ECMA ``\\p{..}``)
        whose letter ``c`` is at ``self.i``, else None (nothing read); ``at``: the
        backslash's offset."""
        if c in "dwsDWS":
            self.i += 1
            return cs.class_escape(c, self.flavor, self.flags.ascii)
        if c in "pP" and self.flavor == "ecma":
            return self.property_escape(at)
        return None

    def char_escape(self, at: int) -> int:
        """An escape denoting one code point; ``self.i`` is after the backslash."""
        c = self.peek()
        self.i += 1
        simple = _PY_SIMPLE if self.flavor == "python" else _ECMA_SIMPLE
        if c in simple:
            return simple[c]
        if c == "x":
            if self.flavor == "python" or (self.peek() in _HEX and self.peek(1) in _HEX and self.peek() and self.peek(1)):
                return self.hex_digits(2, at)
            return ord("x")
        if c == "u":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                digits = self.p[self.i + 1 : end] if end > 0 else ""
                if not digits or any(d not in _HEX for d in digits):
                    raise self.error("bad \\u{...} escape", at)
                self.i = end + 1
                v = int(digits, 16)
                if v > cs.MAX_CP:
                    raise self.error("code point out of range", at)
                return v
            if self.flavor == "ecma" and not all(self.peek(k) and self.peek(k) in _HEX for k in range(4)):
                return ord("u")
            v = self.hex_digits(4, at)
            if self.flavor == "ecma" and 0xD800 <= v <= 0xDBFF and self.p.startswith("\\u", self.i):
                save = self.i
                self.i += 2
                if all(self.peek(k) and self.peek(k) in _HEX for k in range(4)):
                    low = int(self.p[self.i : self.i + 4], 16)
                    if 0xDC00 <= low <= 0xDFFF:
                        self.i += 4
                        return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                self.i = save
            return v
        if c == "U" and self.flavor == "python":
            v = self.hex_digits(8, at)
            if v > cs.MAX_CP:
                raise self.error("bad escape \\U (code point out of range)", at)
            return v
        if c == "N" and self.flavor == "python":
            if self.peek() != "{":
                raise self.error("missing { after \\N", at)
            end = self.p.find("}", self.i)
            name = self.p[self.i + 1 : end] if end > 0 else ""
            try:
                v = ord(unicodedata.lookup(name))
            except KeyError:
                raise self.error(f"undefined character name {name!r}", at) from None
            self.i = end + 1
            return v
        if self.flavor == "ecma":
            if c == "c" and self.peek().isascii() and self.peek().isalpha():
                self.i += 1
                return ord(self.p[self.i - 1]) % 32
            if c == "0" and not self.peek().isdigit():
                return 0
            if c.isdigit():
                raise self.error("backreferences are not supported (not regular)", at)
            if c == "k" and self.peek() == "<":
                raise self.error("backreferences are not supported (not regular)", at)
            return ord(c)  # identity escape (Annex B)
        if c.isascii() and c.isalnum():
            raise self.error(f"bad escape \\{c}", at)
        return ord(c)

    def property_escape(self, at: int) -> cs.CharSet:
        """ECMA-262 ``\\p{Name}`` / ``\\P{Name}`` with a General_Category name."""
        negate = self.peek() == "P"
        self.i += 1
        end = self.p.find("}", self.i)
        if self.peek() != "{" or end < 0:
            raise self.error("expected {...} after \\p", at)
        name = self.p[self.i + 1 : end]
        s = cs.general_category(name)
        if s is None:
            raise self.error(
                f"Unicode property {name!r} is not supported (only General_Category names)", at
            )
        self.i = end + 1
        return cs.complement(s) if negate else s

    def octal(self, at: int) -> int:
        """A Python octal escape: up to three octal digits from ``self.i``, at most 0o377;
        ``at`` is the offset of its backslash."""
        j = self.i
        while self.i < len(self.p) and self.i - j < 3 and self.p[self.i] in OCTAL_DIGITS:
            self.i += 1
        v = int(self.p[j : self.i], 8)
        if v > 0o377:
            raise self.error("octal escape value outside of range 0-0o377", at)
        return v

    def hex_digits(self, n: int, at: int) -> int:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or any(d not in _HEX for d in digits):
            raise self.error(f"incomplete escape (expected {n} hex digits)", at)
        self.i += n
        return int(digits, 16)

