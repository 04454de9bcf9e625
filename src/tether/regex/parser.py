"""Regex pattern text (Python ``re`` or ECMA-262) → parse tree (``tree.py``).

Recursive descent over alternation, sequence, quantifiers and groups, with groups kept
on an explicit stack (nesting is bounded by ``Limits.max_nesting``, never by Python's
recursion). Character-level syntax comes from ``CharReader`` (``escapes.py``). Counted
repeats are checked against ``max_repeat`` and ``max_expanded`` as they are read.
Rejected with ``RegexError`` naming the offset: backreferences, lookbehind longer than
one character, atomic groups and possessive quantifiers, conditionals, ECMA multi-line
anchors. Lazy quantifiers denote the same language as greedy ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import LimitError
from ..limits import current
from . import charset as cs
from .ast import INF
from .escapes import OCTAL_DIGITS, CharReader, Flags
from .tree import ASSERTIONS, Tree, append_item, expanded_size, factor, single_set

_QUANT = frozenset("*+?{")  # characters that may start a quantifier
_BRACE = re.compile(r"\{([0-9]*)(?:(,)([0-9]*))?\}")  # {m} {m,} {m,n} {,n}: ASCII digits
_PLAIN_RUN = re.compile(r"[^\\^$.|?*+()\[\]{}]+")  # a run of characters none of \ ^ $ . | ? * + ( ) [ ] { }


@dataclass
class _Open:
    """A group being read: its kind (``group``, ``look``, ``behind``), offset, polarity
    (lookarounds), its flags (``(?i:...)``), and what the enclosing level had read."""

    kind: str
    at: int
    positive: bool = True
    flags: Flags | None = None
    saved: Flags = field(default_factory=Flags)
    branches: list[Tree] = field(default_factory=list)
    items: list[Tree] = field(default_factory=list)



class Parser(CharReader):
    """Reads one pattern: ``parse()`` returns its tree; ``assertions`` then says whether
    the tree holds an anchor, a word boundary or a lookaround."""

    def __init__(self, pattern: str, flavor: str, flags: Flags) -> None:
        super().__init__(pattern, flavor, flags)
        self.n_groups = 0
        self.group_names: set[str] = set()
        self.sizes: dict[int, tuple[int, Tree]] = {}  # see expanded_size
        self.max_expanded = current().max_expanded
        self.max_repeat = current().max_repeat
        self.max_alternatives = current().max_alternatives
        self._literals: dict[tuple[bool, bool], dict[str, Tree]] = {}
        # whether the tree has an anchor, a word boundary or a lookaround (without one,
        # the passes that look for them are skipped)
        self.assertions = False
        # whether a counted repeat (``{m,n}`` with a count above 1) was read: only those
        # make the expanded size exceed the number of atoms
        self.counted = False
        self.counted_total = 0  # the sizes of the counted repeats read, added up

    def skip_verbose(self) -> None:
        if not self.flags.verbose:
            return
        while self.i < len(self.p):
            c = self.p[self.i]
            if c in " \t\n\r\f\v":
                self.i += 1
            elif c == "#":
                while self.i < len(self.p) and self.p[self.i] != "\n":
                    self.i += 1
            else:
                break

    # -- grammar ----------------------------------------------------------------------
    def parse(self) -> Tree:
        self.global_flags()
        t = self.alternation()
        if self.i < len(self.p):
            raise self.error("unbalanced parenthesis ')'")
        # sums of counted repeats (a{9}b{9}...) under no quantifier; the pattern's length
        # plus the counted sizes bounds the expanded size (a nested repeat counts twice)
        if self.counted and len(self.p) + self.counted_total > self.max_expanded:
            size = expanded_size(t, self.sizes)
            if size > self.max_expanded:
                raise LimitError("max_expanded", size, self.max_expanded, "the whole pattern",
                                 detail="the counted repeats add up to this many characters")
        return t

    def global_flags(self) -> None:
        """Leading ``(?aimsux)`` groups set flags for the whole pattern."""
        while self.p.startswith("(?", self.i):
            j = self.i + 2
            while j < len(self.p) and self.p[j] in "aiLmsux":
                j += 1
            if j < len(self.p) and self.p[j] == ")" and j > self.i + 2:
                for c in self.p[self.i + 2 : j]:
                    self.set_flag(self.flags, c, True, self.i)
                self.i = j + 1
            else:
                break

    def set_flag(self, flags: Flags, c: str, on: bool, offset: int) -> None:
        if c == "i":
            flags.ignore_case = on
        elif c == "s":
            flags.dotall = on
        elif c == "x":
            flags.verbose = on
        elif c == "m":
            flags.multiline = on
        elif c == "a":
            flags.ascii = on
        elif c == "u":
            pass
        else:
            raise self.error(f"flag '{c}' is not supported", offset)

    def alternation(self) -> Tree:
        """The (sub)pattern from ``self.i`` up to an unmatched ``)`` or the end.

        Groups are opened and closed on an explicit stack, not by recursion: nesting
        deeper than ``Limits.max_nesting`` raises LimitError at the group's offset, and no
        Python recursion follows the input."""
        stack: list[_Open] = []
        branches: list[Tree] = []
        items: list[Tree] = []
        max_nesting = current().max_nesting
        while True:
            self.sequence_into(items)
            c = self.peek()
            if c == "(":
                at = self.i
                opened = self.open_group()
                if opened is None:
                    continue  # a comment
                if len(stack) >= max_nesting:
                    raise LimitError("max_nesting", f"more than {max_nesting} nested groups",
                                     max_nesting, f"offset {at} in pattern")
                opened.branches, opened.items, opened.saved = branches, items, self.flags
                if opened.flags is not None:
                    self.flags = opened.flags
                stack.append(opened)
                branches, items = [], []
                continue
            if c == "|":
                if len(branches) + 2 > self.max_alternatives:
                    raise LimitError("max_alternatives", f"more than {self.max_alternatives}",
                                     self.max_alternatives, f"offset {self.i} in pattern")
                self.i += 1
                branches.append(items[0] if len(items) == 1 else ("seq", items))
                items = []
                continue
            branches.append(items[0] if len(items) == 1 else ("seq", items))
            tree = branches[0] if len(branches) == 1 else factor(branches)
            if not stack:
                return tree
            top = stack.pop()
            self.flags = top.saved
            if not self.eat(")"):
                raise self.error("missing ), unterminated subpattern", top.at)
            atom = self.close_group(top, tree)
            branches, items = top.branches, top.items
            append_item(items, self.quantifiers(atom, top.at))

    def sequence_into(self, items: list[Tree]) -> None:
        """Append atoms (with their quantifiers) to ``items`` until ``|``, ``(``, ``)`` or
        the end."""
        p, n = self.p, len(self.p)
        while True:
            if not self.flags.verbose:
                # fast path, the same tree as atom() + quantifiers(): plain characters
                # that no quantifier follows (object keys are mostly such runs)
                m = _PLAIN_RUN.match(p, self.i)
                if m is not None:
                    j = m.end()
                    if j < n and p[j] in _QUANT:
                        j -= 1  # the last one takes the quantifier
                    lits = self.literals()
                    for c in p[self.i : j]:
                        t = lits.get(c)
                        if t is None:
                            t = lits[c] = ("set", self.literal_set(ord(c)))
                        items.append(t)
                    self.i = j
            self.skip_verbose()
            c = self.peek()
            if c == "" or c == "|" or c == ")" or c == "(":
                return
            start = self.i
            atom = self.atom()
            append_item(items, self.quantifiers(atom, start))

    def quantifiers(self, atom: Tree, start: int) -> Tree:
        quantified = False
        while True:
            self.skip_verbose()
            q_at = self.i
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, INF), "+": (1, INF), "?": (0, 1)}[c]
            elif c == "{":
                b = self.brace()
                if b is None:
                    return atom
                lo, hi = b
            else:
                return atom
            if atom[0] in ASSERTIONS and (atom[0] != "look" or self.flavor == "ecma"):
                raise self.error("nothing to repeat (an anchor cannot be quantified)", q_at)
            if quantified:
                raise self.error("multiple repeat", q_at)
            if self.peek() == "?":
                self.i += 1  # lazy: same language
            elif self.peek() == "+" and self.flavor == "python":
                raise self.error("possessive quantifiers are not supported (not regular under derivatives)", self.i)
            atom = ("rep", atom, lo, hi)
            size = 0
            if lo > 1 or (hi != INF and hi > 1):  # ``*``, ``+``, ``?`` add nothing to the
                self.counted = True                # size of their atom (see parse())
                if atom[1][0] == "set":  # one character, counted: no walk
                    size = hi if hi != INF else lo
                else:
                    size = expanded_size(atom, self.sizes)
                self.counted_total += size
            if size > self.max_expanded:
                raise LimitError("max_expanded", size, self.max_expanded, f"offset {q_at} in pattern",
                                 detail="the counted repeats multiply to this many characters")
            quantified = self.flavor == "python"

    def brace(self) -> tuple[int, int] | None:
        b = _BRACE.match(self.p, self.i)
        if b is None:
            return None
        lo_s = b[1]
        hi_s: str = b[3] if b[2] else lo_s  # group 3 takes part whenever group 2 does
        k = b.end() - 1
        if self.flavor == "ecma" and not lo_s:
            return None  # Annex B: "{" that does not start a quantifier is a literal
        if self.flavor == "python" and not lo_s and hi_s == lo_s:
            return None  # "{}" is literal
        at = self.i
        max_repeat = self.max_repeat
        for digits in (lo_s, hi_s):
            if digits and len(digits.lstrip("0")) > len(str(max_repeat)):
                raise LimitError("max_repeat", f"a {len(digits)}-digit count", max_repeat,
                                 f"offset {at} in pattern")
        self.i = k + 1
        lo = int(lo_s.lstrip("0") or "0") if lo_s else 0
        hi = INF if hi_s == "" else int(hi_s.lstrip("0") or "0")
        if hi != INF and hi < lo:
            raise self.error("min repeat greater than max repeat", at)
        if max(lo, hi) > max_repeat:
            raise LimitError("max_repeat", max(lo, hi), max_repeat, f"offset {at} in pattern")
        return lo, hi

    def atom(self) -> Tree:
        c = self.peek()
        at = self.i
        if c == "[":
            return ("set", self.char_class())
        if c == ".":
            self.i += 1
            return ("set", self.dot())
        if c == "^":
            self.i += 1
            self.assertions = True
            if self.flags.multiline:
                if self.flavor != "python":
                    raise self.error("'^' in multi-line mode is not supported", at)
                return ("behind", cs.NEWLINE, True, at)  # at the start or after a newline
            return ("bol", at)
        if c == "$":
            self.i += 1
            self.assertions = True
            if self.flags.multiline:
                if self.flavor != "python":
                    raise self.error("'$' in multi-line mode is not supported", at)
                return ("eol", "ml", at)
            return ("eol", "py" if self.flavor == "python" else "end", at)
        if c in "*+?":
            raise self.error("nothing to repeat", at)
        if c == "{" and self.flavor == "python" and self.brace_is_quantifier():
            raise self.error("nothing to repeat", at)
        if c == "\\":
            return self.escape()
        if c == ")":
            raise self.error("unbalanced parenthesis ')'", at)
        self.i += 1  # any other character (also "]" and "}") is a literal
        return ("set", self.literal_set(ord(c)))

    def brace_is_quantifier(self) -> bool:
        save = self.i
        try:
            return self.brace() is not None
        finally:
            self.i = save

    def open_group(self) -> _Open | None:
        """Read a group's opening (``(``, ``(?:``, ``(?P<name>``, ``(?=``, ``(?<!``,
        ``(?i:`` ...) and say what it is; a comment ``(?#...)`` is skipped (None)."""
        at = self.i
        self.i += 1
        flags = None
        if self.eat("?"):
            c = self.peek()
            if self.eat("P<") or (c == "<" and self.peek(1) not in "=!"):
                if c == "<":
                    self.i += 1
                end = self.p.find(">", self.i)
                name = self.p[self.i : end] if end >= 0 else ""
                if end < 0 or not name.isidentifier():
                    raise self.error("bad group name", self.i)
                if name in self.group_names:
                    raise self.error(f"redefinition of group name {name!r}", self.i)
                self.group_names.add(name)
                self.i = end + 1
                self.n_groups += 1
            elif self.eat("P="):
                raise self.error("backreferences are not supported (not regular)", at)
            elif self.eat(":"):
                pass
            elif c in ("=", "!"):
                self.i += 1
                self.assertions = True
                return _Open("look", at, c == "=")
            elif c == "<":
                negative = self.peek(1) == "!"
                self.assertions = True
                self.i += 2
                return _Open("behind", at, not negative)
            elif c == ">":
                raise self.error("atomic groups are not supported", at)
            elif c == "#":
                end = self.p.find(")", self.i)
                if end < 0:
                    raise self.error("missing ), unterminated comment", at)
                self.i = end + 1
                return None
            elif c == "(":
                raise self.error("conditional groups are not supported (not regular)", at)
            else:
                flags = self.flags.copy()
                on = True
                j = self.i
                while self.peek() and self.peek() in "aiLmsux-":
                    ch = self.p[self.i]
                    if ch == "-":
                        on = False
                    else:
                        self.set_flag(flags, ch, on, self.i)
                    self.i += 1
                if self.eat(")"):
                    raise self.error("global flags not at the start of the expression", at)
                if not self.eat(":") or self.i == j + 1:
                    raise self.error("unknown extension ?" + self.p[j : j + 1], at + 1)
        else:
            self.n_groups += 1
        return _Open("group", at, True, flags)

    def close_group(self, g: _Open, body: Tree) -> Tree:
        """The atom of a group whose body has been read (and its ``)`` eaten)."""
        if g.kind == "look":
            return ("look", g.positive, body, g.at)
        if g.kind == "behind":
            one = single_set(body)
            if one is None:
                raise self.error(
                    "lookbehind is only supported for one character (a class or a literal)", g.at
                )
            if not g.positive:  # not preceded by one of these: preceded by another, or at start
                return ("behind", cs.complement(one), True, g.at)
            return ("behind", one, False, g.at)
        if body[0] in ASSERTIONS:
            return ("seq", [body])  # a group around an anchor may be quantified
        return body

    def literals(self) -> dict[str, Tree]:
        """Character -> its literal tree under the current case flags (cached per parse)."""
        key = (self.flags.ignore_case, self.flags.ascii)
        d = self._literals.get(key)
        if d is None:
            d = self._literals[key] = {}
        return d

    def escape(self) -> Tree:
        at, c = self.escape_start()
        s = self.set_escape(c, at)
        if s is not None:
            return ("set", s)
        if c in "bB":
            self.i += 1
            self.assertions = True
            return ("wordb", c == "b", cs.class_escape("w", self.flavor, self.flags.ascii), at)
        if c == "A" and self.flavor == "python":
            self.i += 1
            self.assertions = True
            return ("bol", at)
        if c in "Zz" and self.flavor == "python":
            self.i += 1
            self.assertions = True
            return ("eol", "end", at)
        if self.flavor == "python" and c.isdigit():
            # "\0", or three octal digits: an octal escape; any other number a group reference
            if c == "0" or all(self.peek(k) in OCTAL_DIGITS for k in range(3)):
                return ("set", self.literal_set(self.octal(at)))
            raise self.error("backreferences are not supported (not regular)", at)
        return ("set", self.literal_set(self.char_escape(at)))

