"""Regex syntax (Python ``re`` and ECMA-262) → byte-level ``Node``.

1. A recursive-descent parser turns the pattern into a small parse tree whose leaves are
   code point sets (``CharSet``) and anchors; case folding, ``.``, ``\\d \\w \\s`` are
   resolved per flavor while parsing.
2. Code point sets become UTF-8 byte automata (``charset.utf8_sequences``).
3. Anchors are lowered exactly with two marker bytes that never occur in UTF-8:
   ``^``/``\\A`` match a begin marker, ``$``/``\\Z``/``\\z`` an end marker. The pattern is
   wrapped for the requested semantics (fullmatch, or search: any text may surround an
   unanchored side), then the begin marker is removed by a left derivative, the end marker
   by a right quotient, and markers left in the middle (which no text can match) are
   stripped from every byte set.

Lookahead ``(?=X)`` / ``(?!X)`` is lowered exactly with intersection and complement (see
``_Lowering``); so is Python's ``$``, which may match before a final newline. Assertions
about the previous character (lookbehind of one character, ``\\b \\B``, multi-line ``^``)
are lowered over texts annotated with marker bytes that are erased afterwards (see
``_Annotation``). Rejected with ``RegexError`` naming the offset: backreferences, longer
lookbehind, atomic groups and possessive quantifiers, conditionals, ECMA multi-line
anchors, and assertions inside a group repeated without a small bound. Lazy quantifiers
denote the same language as greedy ones.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from ..errors import LimitError, RegexError, limited
from ..limits import check, check_deadline, current, deadline
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
    _bytes,
    alt,
    byte_range,
    complement,
    concat,
    derivative,
    hide,
    intersect,
    repeat,
    star,
)

Flavor = Literal["python", "ecma"]
FLAVORS = ("python", "ecma")

BEGIN, END = 0xFE, 0xFF  # marker bytes: never part of valid UTF-8
_MARKERS_MASK = (1 << BEGIN) | (1 << END)


def check_flavor(flavor: str) -> None:
    if flavor not in FLAVORS:
        raise RegexError(f"flavor must be one of {FLAVORS}; got {limited(flavor)}")


_SPECIAL = frozenset("\\^$.|?*+()[]{}")  # characters atom() does not read as plain literals
_QUANT = frozenset("*+?{")  # characters that may start a quantifier
_BRACE = re.compile(r"\{([0-9]*)(?:(,)([0-9]*))?\}")  # {m} {m,} {m,n} {,n}: ASCII digits
_PLAIN_RUN = re.compile(r"[^\\^$.|?*+()\[\]{}]+")  # a run of characters not in _SPECIAL


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
class _Flags:
    ignore_case: bool = False
    dotall: bool = False
    verbose: bool = False
    multiline: bool = False
    ascii: bool = False

    def copy(self) -> _Flags:
        return _Flags(self.ignore_case, self.dotall, self.verbose, self.multiline, self.ascii)


# parse tree: ("set", CharSet) | ("seq", [t]) | ("alt", [t]) | ("rep", t, lo, hi)
#             | ("trie", root, edges) (an alternation of set sequences, see _factor)
#             | ("bol", offset) | ("eol", "end" | "py" | "ml", offset)
#             | ("look", positive, t, offset)
Tree = tuple  # type: ignore[type-arg]

_PY_SIMPLE = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
_ECMA_SIMPLE = {"f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_HEX = "0123456789abcdefABCDEF"


@dataclass
class _Open:
    """A group being read: its kind (``group``, ``look``, ``behind``), offset, polarity
    (lookarounds), its flags (``(?i:...)``), and what the enclosing level had read."""

    kind: str
    at: int
    positive: bool = True
    flags: _Flags | None = None
    saved: _Flags = field(default_factory=_Flags)
    branches: list[Tree] = field(default_factory=list)
    items: list[Tree] = field(default_factory=list)


# ("trie", root, edges): an alternation of sequences of sets, left-factored. A trie node is
# [ends here?, {set: child}]; it denotes the union of the set sequences along its paths.
_TRIE_MIN = 8  # alternations with at least this many such branches are factored
TrieNode = list  # type: ignore[type-arg]


def _counted(t: Tree) -> tuple[Tree, int, int]:
    """``(X, lo, hi)`` of ``X{lo,hi}``; any other tree is ``X{1,1}``."""
    if t[0] == "rep":
        return t[1], t[2], t[3]
    return t, 1, 1


def _append(items: list[Tree], t: Tree) -> None:
    """Append ``t`` to a sequence, merging a counted repeat with a neighbour repeating the
    same assertion-free tree: ``X{a,b}X{c,d}`` is ``X{a+c,b+d}`` (``a?a?a?`` is
    ``a{0,3}``: one counter instead of a chain whose derivatives list every suffix).
    Plain runs (``aa``) stay literals."""
    if items and (t[0] == "rep" or items[-1][0] == "rep"):
        x, lo, hi = _counted(t)
        y, lo2, hi2 = _counted(items[-1])
        if x == y and not any(z[0] in _ASSERTIONS for z, _ in _walk(x)):
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


def _factor(branches: list[Tree]) -> Tree:
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


def _trie_node(root: TrieNode, char: Callable[[cs.CharSet], Node]) -> Node:
    """The node of a trie (children first, without recursion); ``char`` lowers a set."""
    order = []
    stack = [root]
    while stack:
        n = stack.pop()
        order.append(n)
        stack.extend(n[1].values())
    built: dict[int, Node] = {}
    for n in reversed(order):
        parts = [concat(char(k), built[id(c)]) for k, c in n[1].items()]
        if n[0]:
            parts.append(EPSILON)
        built[id(n)] = alt(*parts)
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
        return t[1]  # type: ignore[no-any-return]
    if k == "rep":
        return [t[1]]
    if k == "look":
        return [t[2]]
    return []


def _expanded_size(t: Tree, memo: dict[int, tuple[int, Tree]]) -> int:
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


class _Parser:
    def __init__(self, pattern: str, flavor: str, flags: _Flags) -> None:
        self.p, self.flavor, self.i = pattern, flavor, 0
        self.flags = flags
        self.n_groups = 0
        self.group_names: set[str] = set()
        self.sizes: dict[int, tuple[int, Tree]] = {}  # see _expanded_size
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

    # -- helpers ----------------------------------------------------------------------
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
            size = _expanded_size(t, self.sizes)
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

    def set_flag(self, flags: _Flags, c: str, on: bool, offset: int) -> None:
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
            tree = branches[0] if len(branches) == 1 else _factor(branches)
            if not stack:
                return tree
            top = stack.pop()
            self.flags = top.saved
            if not self.eat(")"):
                raise self.error("missing ), unterminated subpattern", top.at)
            atom = self.close_group(top, tree)
            branches, items = top.branches, top.items
            _append(items, self.quantifiers(atom, top.at))

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
            _append(items, self.quantifiers(atom, start))

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
            if atom[0] in _ASSERTIONS and (atom[0] != "look" or self.flavor == "ecma"):
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
                    size = _expanded_size(atom, self.sizes)
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
        hi_s: str | None = b[3] if b[2] else lo_s
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
        hi = INF if hi_s == "" else int(hi_s.lstrip("0") or "0")  # type: ignore[union-attr]
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
            one = _single_set(body)
            if one is None:
                raise self.error(
                    "lookbehind is only supported for one character (a class or a literal)", g.at
                )
            if not g.positive:  # not preceded by one of these: preceded by another, or at start
                return ("behind", cs.complement(one), True, g.at)
            return ("behind", one, False, g.at)
        if body[0] in _ASSERTIONS:
            return ("seq", [body])  # a group around an anchor may be quantified
        return body

    def literals(self) -> dict[str, Tree]:
        """Character -> its literal tree under the current case flags (cached per parse)."""
        key = (self.flags.ignore_case, self.flags.ascii)
        d = self._literals.get(key)
        if d is None:
            d = self._literals[key] = {}
        return d

    # -- sets ----------------------------------------------------------------------------
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
        at = self.i
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.error("bad escape (end of pattern)", at)
        if c in "dwsDWS":
            self.i += 1
            return cs.class_escape(c, self.flavor, self.flags.ascii)
        if c in "pP" and self.flavor == "ecma":
            return self.property_escape(at)
        if c == "b":
            self.i += 1
            return 8
        if self.flavor == "python" and c in "01234567":
            j = self.i
            while self.i < len(self.p) and self.i - j < 3 and self.p[self.i] in "01234567":
                self.i += 1
            v = int(self.p[j : self.i], 8)
            if v > 0o377:
                raise self.error("octal escape value outside of range 0-0o377", at)
            return v
        if self.flavor == "python" and c.isdigit():
            raise self.error(f"bad escape \\{c}", at)
        if c == "B" and self.flavor == "python":
            raise self.error("bad escape \\B", at)
        if c == "-" :
            self.i += 1
            return 45
        return self.char_escape(at)

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

    def hex_digits(self, n: int, at: int) -> int:
        digits = self.p[self.i : self.i + n]
        if len(digits) != n or any(d not in _HEX for d in digits):
            raise self.error(f"incomplete escape (expected {n} hex digits)", at)
        self.i += n
        return int(digits, 16)

    def escape(self) -> Tree:
        at = self.i
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.error("bad escape (end of pattern)", at)
        if c in "dwsDWS":
            self.i += 1
            return ("set", cs.class_escape(c, self.flavor, self.flags.ascii))
        if c in "pP" and self.flavor == "ecma":
            return ("set", self.property_escape(at))
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
            if c == "0":
                j = self.i
                while self.i < len(self.p) and self.i - j < 3 and self.p[self.i] in "01234567":
                    self.i += 1
                return ("set", self.literal_set(int(self.p[j : self.i], 8)))
            if (
                c in "01234567"
                and self.peek(1) in tuple("01234567")
                and self.peek(2) in tuple("01234567")
                and self.peek(1)
                and self.peek(2)
            ):
                v = int(self.p[self.i : self.i + 3], 8)
                if v > 0o377:
                    raise self.error("octal escape value outside of range 0-0o377", at)
                self.i += 3
                return ("set", self.literal_set(v))
            raise self.error("backreferences are not supported (not regular)", at)
        return ("set", self.literal_set(self.char_escape(at)))


# --- lowering --------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def charset_node(s: cs.CharSet) -> Node:
    """Byte-level node matching exactly the UTF-8 encodings of the code points in ``s``."""
    seqs = cs.utf8_sequences(s)
    return alt(*[concat(*[byte_range(lo, hi) for lo, hi in seq]) for seq in seqs])


_ASSERTIONS = ("bol", "eol", "look", "behind", "wordb")


def _single_set(t: Tree) -> cs.CharSet | None:
    """The code points of a tree matching exactly one character, else None."""
    if t[0] == "set":
        return t[1]  # type: ignore[no-any-return]
    if t[0] == "trie":
        return _trie_single_set(t[1])
    if t[0] == "seq" and len(t[1]) == 1:
        return _single_set(t[1][0])
    if t[0] == "alt":
        parts = [_single_set(x) for x in t[1]]
        if all(p is not None for p in parts):
            return cs.union(*parts)  # type: ignore[arg-type]
    return None


def _walk(t: Tree, into_looks: bool = True) -> Iterator[tuple[Tree, bool]]:
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


def _needs_annotation(t: Tree) -> bool:
    """Whether ``t`` asserts something about the previous character, or has an anchor
    inside a lookaround (lowered exactly only over annotated texts: there the text has
    exactly one begin and one end marker, where plain lowering lets the number of
    markers vary, which a negative lookaround could exploit)."""
    for x, inside in _walk(t):
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


def _behind_sets(t: Tree, out: list[cs.CharSet]) -> list[cs.CharSet]:
    for x, _ in _walk(t):
        if x[0] == "behind":
            out.append(x[1])
        elif x[0] == "wordb":
            out.append(x[2])
    return out


class _Annotation:
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
        self.any_marker = _bytes(self.block_mask | 1 << BEGIN)
        self.start = _bytes(1 << BEGIN)
        self.end = _bytes(1 << END)
        self.hidden = self.block_mask | 1 << BEGIN | 1 << END
        chars = alt(*[concat(charset_node(b), _bytes(1 << self.MARKERS[i])) for i, b in enumerate(blocks)])
        self.well_formed = concat(self.start, star(chars), self.end)

    def markers(self, s: cs.CharSet, start: bool) -> Node:
        """Markers meaning "the previous character is in ``s``" (or "at the start")."""
        m = sum(1 << self.MARKERS[i] for i, b in enumerate(self.blocks) if cs.intersect(b, s))
        return _bytes(m | (1 << BEGIN if start else 0))


def _empty_only(t: Tree) -> bool:
    """Whether ``t`` can only match the empty text (anchors, lookarounds, empty groups)."""
    for x, _ in _walk(t, False):
        k = x[0]
        if k == "set" and x[1] != ():
            return False  # a non-empty set matches a character
        if k == "trie" and x[1][1]:
            return False  # a word of at least one character
    return True


def _lenient_empty(t: Tree) -> bool:
    """``_empty_only``, and no assertion in ``t`` tells the end of the text from just
    before a final newline (so a Python ``$`` before ``t`` may take that newline):
    ``\\Z``/``\\z`` and lookarounds can."""
    for x, _ in _walk(t, False):
        k = x[0]
        if k == "look" or (k == "eol" and x[1] == "end"):
            return False
    return _empty_only(t)


def _needs_context(t: Tree) -> bool:
    """Whether lowering ``t`` needs its continuation (lookahead, Python's ``$``)."""
    for x, _ in _walk(t, False):
        k = x[0]
        if k == "look" or (k == "eol" and x[1] in ("py", "ml")):
            return True
    return False


_UNROLL_LIMIT = 4  # a group with lookaround may be repeated at most this many times


class _Lowering:
    """Parse tree → node, in continuation-passing style where lookahead needs it.

    ``lower_k(t, k)`` is the language of ``t`` followed by ``k``; a lookahead ``(?=X)``
    becomes ``(X·Σ*) ∩ k`` and ``(?!X)`` becomes ``~(X·Σ*) ∩ k``, which is exact.
    Anchors consume marker bytes (see ``_compile``).
    """

    def __init__(
        self, pattern: str, search: bool, empty_text: bool = False, ann: _Annotation | None = None
    ) -> None:
        self.pattern, self.search, self.ann = pattern, search, ann
        self.python_flavor = False
        self.anchors = False
        # empty_text: lower for the empty text only, where every anchor holds (all
        # anchors become ε); used to decide whether "" matches
        self.begin = EPSILON if empty_text else _bytes(1 << BEGIN)
        self.end = EPSILON if empty_text else _bytes(1 << END)

    def needs_context(self, t: Tree) -> bool:
        if self.ann is None:
            return _needs_context(t)
        k = t[0]  # annotated: every assertion is a lookahead at the markers
        if k in _ASSERTIONS:
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
                tail_empty = at_end and all(_lenient_empty(y) for y in items[i + 1 :])
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
                    _offset_of(inner),
                )
            inner_end = at_end and _empty_only(inner)
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
            return intersect(alt(concat(_bytes(1 << 10), ANYTHING), concat(end, ANYTHING)), k)
        # Python's "$": at the end of the text, or before a final newline there
        if at_end:
            return concat(alt(end, concat(_bytes(1 << 10), end)) if self.search else end, k)
        return intersect(concat(alt(EPSILON, _bytes(1 << 10)), end, ANYTHING), k)


    def assertion(self, t: Tree) -> Node:
        """Annotated mode: what the rest of the annotated text must start with."""
        ann = self.ann
        assert ann is not None
        kind, m, end = t[0], ann.any_marker, ann.end
        newline = _bytes(1 << 10)
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


def _offset_of(t: Tree) -> int:
    """The offset of the first assertion in ``t`` (-1 if none)."""
    for x, _ in _walk(t, False):
        if x[0] in ("bol", "look", "behind", "wordb"):
            return int(x[-1])
        if x[0] == "eol":
            return int(x[2])
    return -1


def _fixpoint_union(node: Node, step) -> Node:  # type: ignore[no-untyped-def]
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


def map_masks(node: Node, f, memo: dict[Node, Node] | None = None) -> Node:  # type: ignore[no-untyped-def]
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
        r = _bytes(f(node.args[0]))
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


ANY_CHAR = charset_node(cs.ALL)  # one valid UTF-8 encoded code point


# (pattern, flavor, ignore_case, dotall, search, the limits checked) -> node. Nodes are immutable and
# interned, so a cached result is the node compiling again would build; patterns recur
# across grammars (JSON strings, numbers, whitespace, formats). Successes only; the
# oldest half is dropped when full.
_COMPILED: dict[tuple[str, str, bool, bool, bool, int, int, int, int, int], Node] = {}
_COMPILED_MAX = 20_000


def _compile(pattern: str, flavor: str, ignore_case: bool, dotall: bool, search: bool) -> Node:
    check_flavor(flavor)
    if not isinstance(pattern, str):
        raise RegexError(f"pattern must be str; got {type(pattern).__name__}")
    lim = current()  # the limits a pattern is checked against are part of the key
    key = (pattern, flavor, bool(ignore_case), bool(dotall), search,
           lim.max_text_chars, lim.max_nesting, lim.max_repeat, lim.max_expanded,
           lim.max_alternatives)
    node = _COMPILED.get(key)
    if node is None:
        check("max_text_chars", len(pattern), "regex pattern")
        try:
            with deadline("regex"):
                node = _compile_uncached(pattern, flavor, ignore_case, dotall, search)
        except RecursionError:
            # not reached within the default limits (nesting is bounded by max_nesting and
            # the passes walk sequences without recursion); a last guard for raised limits
            raise LimitError("max_nesting", "a pattern nested too deeply to lower",
                             current().max_nesting, "regex pattern") from None
        if len(_COMPILED) >= _COMPILED_MAX:
            for k in list(_COMPILED)[: _COMPILED_MAX // 2]:
                del _COMPILED[k]
        _COMPILED[key] = node
    return node


def _compile_uncached(pattern: str, flavor: str, ignore_case: bool, dotall: bool, search: bool) -> Node:
    parser = _Parser(pattern, flavor, _Flags(ignore_case=ignore_case, dotall=dotall))
    tree = parser.parse()
    if parser.assertions and _needs_annotation(tree):
        return _compile_annotated(tree, pattern, flavor, search)
    low = _Lowering(pattern, search)
    if not parser.assertions or not _needs_context(tree):
        body = low.lower(tree)
        if not low.anchors:
            return concat(star(ANY_CHAR), body, star(ANY_CHAR)) if search else body
    # The text is read as BEGIN^i · text · END^j: each "^" consumes one BEGIN, each "$"
    # one END, so repeated anchors ("^^", "$$") need no special case. The wrapper
    # consumes the markers (and, for search, any text on an unanchored side); the result
    # keeps the texts for which some i, j work: left derivatives by BEGIN and right
    # quotients by END, unioned to a fixpoint. Markers left inside (an anchor in the
    # middle, which no text can satisfy) are then removed from every byte set.
    begin, end = _bytes(1 << BEGIN), _bytes(1 << END)
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
    if not n.nullable and _Lowering(pattern, search, True).lower_k(tree, EPSILON, True).nullable:
        n = alt(n, EPSILON)
    return n


def _compile_annotated(tree: Tree, pattern: str, flavor: str, search: bool) -> Node:
    """Patterns asserting about the previous character (lookbehind, ``\\b``, multi-line
    ``^``): lower over annotated texts (see ``_Annotation``), then erase the markers."""
    ann = _Annotation(_behind_sets(tree, []), pattern)
    low = _Lowering(pattern, search, ann=ann)
    low.python_flavor = flavor == "python"
    m = ann.any_marker
    tail = concat(m, ann.end)
    if search:
        step = star(concat(m, ANY_CHAR))
        full = concat(step, low.lower_k(tree, concat(step, tail), True))
    else:
        full = low.lower_k(tree, tail, True)
    return hide(intersect(ann.well_formed, full), ann.hidden)


def parse(
    pattern: str,
    *,
    flavor: Flavor = "python",
    ignore_case: bool = False,
    dotall: bool = False,
) -> Node:
    """Compile ``pattern`` to a node matching exactly the UTF-8 texts it *fully* matches.

    ``re.fullmatch(pattern, text)`` succeeds iff ``text.encode()`` is in the language
    (``flavor="python"``); ``flavor="ecma"`` follows ECMA-262 (``\\d \\w`` ASCII, ``.`` stops
    at any line terminator, Annex B leniency). Anchors at the ends are allowed.

    Cost: parsing and lowering on the first call; results are cached by (pattern,
    flavor, flags), so a pattern seen before (in any grammar of the process) is a dict
    lookup.

    Raises:
        RegexError: bad syntax or a non-regular feature; the message names the offset.
    """
    return _compile(pattern, flavor, ignore_case, dotall, False)


def search(
    pattern: str,
    *,
    flavor: Flavor = "ecma",
    ignore_case: bool = False,
    dotall: bool = False,
) -> Node:
    """A node for the texts in which ``pattern`` matches *somewhere* (``re.search``).

    This is what a JSON Schema ``pattern`` means (hence ``flavor="ecma"`` by default):
    unanchored sides may be surrounded by any text, ``^``/``$`` pin the match to an end.
    Cached as ``parse``.

    Raises:
        RegexError: as ``parse``.
    """
    return _compile(pattern, flavor, ignore_case, dotall, True)
