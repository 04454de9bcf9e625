"""Hypothesis strategies: regex patterns (as Python ``re`` syntax) and adversarial texts.

``patterns()`` draws a random regex tree and renders it; the tree uses only what
``tether.regex`` supports (no backreferences; lookbehind of one character; assertions
only in boundedly repeated groups), so every drawn pattern must compile. Repeat bounds and nesting are small so
that Python's backtracking ``re`` (the oracle) stays fast on short texts.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import strategies as st

# characters the patterns and texts share: ASCII, Latin-1, 2/3/4-byte UTF-8, case pairs
ALPHABET = ["a", "b", "A", "B", "0", "7", " ", "\n", "\t", "-", ".", "é", "É", "ω", "Ω", "中", "😀", "_", "ſ", "K"]
_CLASS_ENDPOINTS = ["0", "9", "a", "f", "z", "A", "Z", " ", "é", "ω", "α", "中", "😀", "\x7f", "\x80"]


def _lit(c: str) -> str:
    return re.escape(c) if c != " " else "\\ "


def _class(draw: st.DrawFn) -> str:
    items = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            items.append(_lit(draw(st.sampled_from(ALPHABET))))
        elif kind == 1:
            a, b = sorted([draw(st.sampled_from(_CLASS_ENDPOINTS)) for _ in range(2)])
            items.append(f"{_lit(a)}-{_lit(b)}")
        else:
            items.append(draw(st.sampled_from(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"])))
    neg = "^" if draw(st.booleans()) else ""
    return f"[{neg}{''.join(items)}]"


@st.composite
def _atom(draw: st.DrawFn, depth: int, anchors: bool) -> str:
    choices = ["lit", "lit", "class", "dot", "esc"]
    if depth > 0:
        choices += ["group", "group"]
    if anchors:
        choices += ["look", "bol", "eol", "wordb", "behind"]
    kind = draw(st.sampled_from(choices))
    if kind == "lit":
        return _lit(draw(st.sampled_from(ALPHABET)))
    if kind == "class":
        return _class(draw)
    if kind == "dot":
        return "."
    if kind == "esc":
        return draw(st.sampled_from(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S"]))
    if kind == "bol":
        return draw(st.sampled_from(["^", "\\A"]))
    if kind == "eol":
        return draw(st.sampled_from(["$", "\\Z"]))
    if kind == "wordb":
        return draw(st.sampled_from(["\\b", "\\B"]))
    if kind == "behind":
        one = _class(draw) if draw(st.booleans()) else _lit(draw(st.sampled_from(ALPHABET)))
        return f"(?<{draw(st.sampled_from(['=', '!']))}{one})"
    if kind == "look":  # anchors, \\b and lookbehind may sit inside lookarounds too
        body = draw(_alternation(max(depth - 1, 0), anchors and draw(st.booleans())))
        return f"(?{draw(st.sampled_from(['=', '!']))}{body})"
    body = draw(_alternation(depth - 1, anchors))
    opener = draw(st.sampled_from(["(", "(?:", "(?P<g>"]))
    if opener == "(?P<g>":
        opener = f"(?P<g{draw(st.integers(0, 10**6))}>"
    return f"{opener}{body})"


def _quantifier(draw: st.DrawFn, bounded: bool = False) -> str:
    options = ["", "", "", "?", "{2}", "{0,2}", "{1,3}"]
    if not bounded:
        options += ["*", "+", "{2,}"]
    q = draw(st.sampled_from(options))
    if q and draw(st.booleans()):
        q += "?"  # lazy: same language
    return q


@st.composite
def _sequence(draw: st.DrawFn, depth: int, anchors: bool) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        a = draw(_atom(depth, anchors))
        if a[0] in "^$" or a.startswith(("\\A", "\\Z", "\\b", "\\B", "(?=", "(?!", "(?<")):
            parts.append(a)  # anchors and lookahead are not quantified
        else:
            # a group holding lookahead or Python's "$" may only be repeated a few times
            # (with lookbehind or \\b in the pattern, any assertion needs this)
            bounded = any(x in a for x in ("(?=", "(?!", "(?<", "$", "^", "\\A", "\\Z", "\\b", "\\B"))
            parts.append(a + _quantifier(draw, bounded))
    return "".join(parts)


@st.composite
def _alternation(draw: st.DrawFn, depth: int, anchors: bool) -> str:
    n = draw(st.integers(1, 3))
    return "|".join(draw(_sequence(depth, anchors)) for _ in range(n))


@st.composite
def patterns(draw: st.DrawFn, anchors: bool = True, flags: bool = True) -> str:
    """A Python ``re`` pattern string that ``tether.regex.parse`` supports."""
    body = draw(_alternation(2, anchors))
    names = itertools.count()  # group names must be unique
    body = re.sub(r"\(\?P<g\d+>", lambda m: f"(?P<g{next(names)}>", body)
    prefix = ""
    if flags and draw(st.integers(0, 4)) == 0:
        prefix = "(?" + "".join(sorted(set(draw(st.lists(st.sampled_from("ism"), min_size=1, max_size=2))))) + ")"
    return prefix + body


def _to_ecma(p: str) -> str:
    return p.replace("\\A", "^").replace("\\Z", "$").replace("(?P<", "(?<")


def ecma_patterns() -> st.SearchStrategy[str]:
    """Patterns in the ECMA-262 subset of the same trees (no inline flags, ^ $ anchors)."""
    return patterns(flags=False).map(_to_ecma)


texts = st.text(alphabet=st.sampled_from(ALPHABET), max_size=8)

invalid_utf8 = st.sampled_from(
    [b"\xff", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"a\x80b", b"\xf0\x9f\x98"]
)


# --- assertions inside lookarounds, on a small alphabet -------------------------------------

SMALL_ALPHABET = "ab\n"
_SMALL_ATOMS = ["a", "b", ".", "[ab]", "\\n", "\\w", "\\W", "[^a]"]
_ANCHORS = ["^", "$", "\\A", "\\Z", "\\b", "\\B"]


@st.composite
def _assertion_piece(draw: st.DrawFn, depth: int) -> str:
    kind = draw(st.sampled_from(["atom", "atom", "anchor", "look", "behind"] if depth > 0 else ["atom", "atom", "anchor", "behind"]))
    if kind == "atom":
        a = draw(st.sampled_from(_SMALL_ATOMS))
        return a + draw(st.sampled_from(["", "", "?", "*", "+", "{2}"]))
    if kind == "anchor":
        return draw(st.sampled_from(_ANCHORS))
    if kind == "behind":
        one = draw(st.sampled_from(["a", "b", "[ab]", "\\n", "\\w"]))
        return f"(?<{draw(st.sampled_from('=!'))}{one})"
    body = draw(_assertion_alternation(depth - 1))
    return f"(?{draw(st.sampled_from('=!'))}{body})"


@st.composite
def _assertion_alternation(draw: st.DrawFn, depth: int) -> str:
    branches = []
    for _ in range(draw(st.integers(1, 2))):
        branches.append("".join(draw(st.lists(_assertion_piece(depth), min_size=0, max_size=3))))
    return "|".join(branches)


@st.composite
def assertion_patterns(draw: st.DrawFn) -> str:
    """Python patterns rich in anchors, word boundaries and one-character lookbehinds
    *inside* lookaheads (and around them), with optional ``(?m)``/``(?s)``/``(?i)``; over
    ``SMALL_ALPHABET`` so that every short text can be tried. Groups with assertions are
    never repeated (tether refuses that beyond four copies)."""
    body = "".join(draw(st.lists(_assertion_piece(2), min_size=1, max_size=4)))
    flags = "".join(sorted(set(draw(st.lists(st.sampled_from("msi"), max_size=2)))))
    return (f"(?{flags})" if flags else "") + body
