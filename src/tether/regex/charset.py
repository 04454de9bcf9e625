"""Sets of Unicode code points and their UTF-8 byte automata.

1. A ``CharSet`` is a sorted tuple of disjoint, non-adjacent inclusive ranges
   ``(lo, hi)`` of code points; set algebra works on the ranges directly.
2. The predefined classes (``\\d \\w \\s`` for Python and ECMA-262, ``.``) and the case
   folding of Python's ``re`` are computed once, lazily, from the interpreter's own tables.
3. ``utf8_sequences`` splits a range set into byte-range sequences (the classic
   utf8-ranges construction): each code point of the set is encoded by exactly one
   sequence, and no byte string outside the set's UTF-8 encodings is.

Surrogates (U+D800..U+DFFF) have no UTF-8 encoding and are never part of a compiled set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache, lru_cache

CharSet = tuple[tuple[int, int], ...]

MAX_CP = 0x10FFFF
SURROGATES: CharSet = ((0xD800, 0xDFFF),)
ALL: CharSet = ((0, MAX_CP),)
EMPTY_SET: CharSet = ()


def normalize(ranges: Iterable[tuple[int, int]]) -> CharSet:
    """Sort and merge overlapping or adjacent ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def union(*sets: CharSet) -> CharSet:
    return normalize(r for s in sets for r in s)


def complement(s: CharSet) -> CharSet:
    out, prev = [], 0
    for lo, hi in s:
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CP:
        out.append((prev, MAX_CP))
    return tuple(out)


def intersect(a: CharSet, b: CharSet) -> CharSet:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def difference(a: CharSet, b: CharSet) -> CharSet:
    return intersect(a, complement(b))


def contains(s: CharSet, cp: int) -> bool:
    import bisect

    i = bisect.bisect_right(s, (cp, MAX_CP + 1)) - 1
    return i >= 0 and s[i][0] <= cp <= s[i][1]


def of_chars(text: str) -> CharSet:
    return normalize((ord(c), ord(c)) for c in text)


# --- predefined classes ---------------------------------------------------------------


@cache
def _all_chars() -> str:
    return "".join(map(chr, range(MAX_CP + 1)))


@cache
def python_class(name: str) -> CharSet:
    """Code points Python's ``re`` (str patterns, Unicode mode) puts in ``\\d \\w \\s``.

    Computed by letting ``re`` scan every code point once (C speed, about 0.1 s each).
    """
    return tuple((m.start(), m.end() - 1) for m in re.finditer(f"\\{name}+", _all_chars()))


ASCII_DIGIT: CharSet = ((0x30, 0x39),)
ASCII_WORD: CharSet = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
ASCII_SPACE: CharSet = ((0x09, 0x0D), (0x20, 0x20))
# ECMA-262 WhiteSpace and LineTerminator code points
ECMA_SPACE: CharSet = normalize(
    [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
     (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
     (0xFEFF, 0xFEFF)]
)
ECMA_LINE_TERMINATORS: CharSet = normalize([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])
NEWLINE: CharSet = ((0x0A, 0x0A),)


def class_escape(letter: str, flavor: str, ascii_only: bool = False) -> CharSet:
    """The set for ``\\d \\w \\s`` (lowercase letter) in ``flavor``; uppercase negates."""
    low = letter.lower()
    if flavor == "ecma" or ascii_only:
        base = {"d": ASCII_DIGIT, "w": ASCII_WORD, "s": ECMA_SPACE if flavor == "ecma" else ASCII_SPACE}[low]
    else:
        base = python_class(low)
    return complement(base) if letter.isupper() else base


# --- case folding (Python ``re`` semantics) -------------------------------------------------


@cache
def _case_tables() -> tuple[dict[int, int], dict[int, list[int]], dict[int, tuple[int, ...]]]:
    """(lower map for cased code points, inverse of lower, extra equivalences)."""
    import _sre

    try:
        from re._casefix import _EXTRA_CASES as extra
    except ImportError:  # pragma: no cover - older interpreters
        extra = {}
    lower: dict[int, int] = {}
    inverse: dict[int, list[int]] = {}
    for cp in range(0x1F000):
        lo = _sre.unicode_tolower(cp)
        if lo != cp:
            lower[cp] = lo
            inverse.setdefault(lo, []).append(cp)
    return lower, inverse, dict(extra)


def casefold_set(s: CharSet, ascii_only: bool = False) -> CharSet:
    """All code points that ``re`` with IGNORECASE matches against the class ``s``.

    Model: a character ``ch`` matches iff ``lower(ch)`` is in ``F``, where ``F`` is the
    lowered class plus ``re``'s extra case equivalences.
    """
    if ascii_only:
        extra_r = []
        for lo, hi in intersect(s, ((0x41, 0x5A), (0x61, 0x7A))):
            extra_r.append((lo ^ 0x20, hi ^ 0x20))
        return union(s, tuple(extra_r))
    lower, inverse, extra = _case_tables()
    uppers = _uppers()
    cased_in_s = intersect(s, uppers)
    folded = {lower[c] for lo, hi in cased_in_s for c in range(lo, hi + 1)}
    f = union(difference(s, uppers), normalize((c, c) for c in folded))
    more = [k for i in extra if contains(f, i) for k in extra[i]]
    f = union(f, normalize((c, c) for c in more))
    # characters that are their own lowercase match iff they are in F; others iff lower is.
    result = difference(f, uppers)
    add: list[tuple[int, int]] = []
    for lo, hi in f:
        for low_cp in _keys_in_range(inverse, lo, hi):
            add.extend((c, c) for c in inverse[low_cp])
    return union(result, normalize(add))


@lru_cache(maxsize=1 << 16)
def casefold_char(cp: int, ascii_only: bool = False) -> CharSet:
    """``casefold_set`` of the one code point ``cp`` (cached: literals repeat)."""
    return casefold_set(((cp, cp),), ascii_only)


@cache
def _uppers() -> CharSet:
    return normalize((c, c) for c in _case_tables()[0])


@cache
def _sorted_keys(n: int) -> list[int]:  # n only busts the cache when the tables change
    _, inverse, _ = _case_tables()
    return sorted(inverse)


def _keys_in_range(inverse: dict[int, list[int]], lo: int, hi: int) -> list[int]:
    import bisect

    keys = _sorted_keys(len(inverse))
    return keys[bisect.bisect_left(keys, lo) : bisect.bisect_right(keys, hi)]


# --- UTF-8 -------------------------------------------------------------------------------

_LENGTH_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CP))


def _encode(cp: int, n: int) -> list[int]:
    if n == 1:
        return [cp]
    out = []
    for _ in range(n - 1):
        out.append(0x80 | (cp & 0x3F))
        cp >>= 6
    lead = {2: 0xC0, 3: 0xE0, 4: 0xF0}[n]
    out.append(lead | cp)
    return out[::-1]


def _split(lo: int, hi: int, n: int, out: list[tuple[tuple[int, int], ...]]) -> None:
    """Append byte-range sequences for [lo, hi], all encoded with ``n`` bytes."""
    if n == 1:
        out.append(((lo, hi),))
        return
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m != 0:
                _split(lo, lo | m, n, out)
                _split((lo | m) + 1, hi, n, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, n, out)
                _split(hi & ~m, hi, n, out)
                return
    a, b = _encode(lo, n), _encode(hi, n)
    out.append(tuple(zip(a, b, strict=True)))


def utf8_sequences(s: CharSet) -> list[tuple[tuple[int, int], ...]]:
    """Byte-range sequences whose union is exactly the UTF-8 encodings of ``s``."""
    s = difference(s, SURROGATES)
    out: list[tuple[tuple[int, int], ...]] = []
    for lo, hi in s:
        for n, (blo, bhi) in enumerate(_LENGTH_BOUNDS, start=1):
            a, b = max(lo, blo), min(hi, bhi)
            if a <= b:
                _split(a, b, n, out)
    return out


# --- Unicode general categories (ECMA-262 \p{...}) ------------------------------------------

_CATEGORY_NAMES = {
    "Lu": "Uppercase_Letter", "Ll": "Lowercase_Letter", "Lt": "Titlecase_Letter",
    "Lm": "Modifier_Letter", "Lo": "Other_Letter", "Mn": "Nonspacing_Mark",
    "Mc": "Spacing_Mark", "Me": "Enclosing_Mark", "Nd": "Decimal_Number",
    "Nl": "Letter_Number", "No": "Other_Number", "Pc": "Connector_Punctuation",
    "Pd": "Dash_Punctuation", "Ps": "Open_Punctuation", "Pe": "Close_Punctuation",
    "Pi": "Initial_Punctuation", "Pf": "Final_Punctuation", "Po": "Other_Punctuation",
    "Sm": "Math_Symbol", "Sc": "Currency_Symbol", "Sk": "Modifier_Symbol",
    "So": "Other_Symbol", "Zs": "Space_Separator", "Zl": "Line_Separator",
    "Zp": "Paragraph_Separator", "Cc": "Control", "Cf": "Format", "Cs": "Surrogate",
    "Co": "Private_Use", "Cn": "Unassigned",
}
_GROUP_NAMES = {
    "L": "Letter", "LC": "Cased_Letter", "M": "Mark", "N": "Number", "P": "Punctuation",
    "S": "Symbol", "Z": "Separator", "C": "Other",
}
# lenient aliases seen in JSON Schema patterns (the JSON-Schema-Test-Suite expects
# \p{digit} to mean decimal digits)
_ALIASES = {"digit": "Nd", "Digit": "Nd", "punct": "P", "Combining_Mark": "M"}


@cache
def _category_ranges() -> dict[str, CharSet]:
    import unicodedata

    ranges: dict[str, list[tuple[int, int]]] = {}
    start, prev_cat = 0, unicodedata.category("\0")
    for cp in range(1, MAX_CP + 2):
        cat = unicodedata.category(chr(cp)) if cp <= MAX_CP else ""
        if cat != prev_cat:
            ranges.setdefault(prev_cat, []).append((start, cp - 1))
            start, prev_cat = cp, cat
    return {k: tuple(v) for k, v in ranges.items()}


def general_category(name: str) -> CharSet | None:
    """Code points of a Unicode General_Category given by short or long name (or a
    one-letter group like ``L``); None if the name is unknown."""
    name = name.removeprefix("General_Category=").removeprefix("gc=")
    name = _ALIASES.get(name, name)
    long_to_short = {v: k for k, v in {**_CATEGORY_NAMES, **_GROUP_NAMES}.items()}
    name = long_to_short.get(name, name)
    table = _category_ranges()
    if name in _CATEGORY_NAMES:
        return table.get(name, ())
    if name == "LC":
        return union(*(table.get(c, ()) for c in ("Lu", "Ll", "Lt")))
    if name in _GROUP_NAMES:
        return union(*(table.get(c, ()) for c in _CATEGORY_NAMES if c[0] == name))
    if name == "Any":
        return ALL
    if name in ("ASCII",):
        return ((0, 0x7F),)
    return None
