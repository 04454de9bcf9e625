"""Regexes in Lark terminals (and GBNF/KBNF ones): what tether can use as a terminal,
and look-arounds and anchors judged on the whole terminal.

A look-around (or ``\\b``/``\\B``) that stays inside the terminal's text is kept (the
regex layer lowers it exactly); one that reads the input before or after the lexeme,
and ``^ $ \\A \\Z`` (the whole input in Lark's lexer), are refused with the place.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from tether.errors import GrammarError, LimitError, RegexError
from tether.grammar.ir import Grammar
from tether.regex.ast import INF
from tether.regex.tree import Tree as RegexTree
from tether.regex.tree import fold_trie


def check_regex(
    pattern: str, flags: str, text: str, pos: int, source: str, flavor: Literal["python", "ecma"] = "python",
    *, whole_terminal: bool = True, anchors: bool = False,
) -> None:
    """Raise GrammarError (at the regex's place in ``text``) if tether cannot use
    ``pattern`` as a terminal: backreferences, a syntax error, or a look-around that
    reads outside the terminal's own text (see `lookaround_outside`). With
    ``whole_terminal=False`` the pattern is one part of a Lark terminal definition, and
    where its look-arounds read is decided on the whole terminal (`check_terminal_looks`).
    ``anchors`` (Lark) treats the anchors as assertions too (see `lookaround_outside`)."""
    looks = lookaround_offsets(pattern)
    asserts = lookaround_offsets(pattern, anchors=anchors)
    for m in re.finditer(r"\\.|\(\?P=", pattern):
        tok = m.group()
        if tok == "(?P=" or re.fullmatch(r"\\[1-9]", tok):
            raise GrammarError("invalid regex: backreferences are not supported", text, pos + 1 + m.start(), source)
    if looks and flavor != "python":
        raise GrammarError("invalid regex: look-around is not supported (tether regexes are regular)",
                           text, pos + 1 + looks[0], source)
    try:
        from tether import regex as _rx

        _rx.parse(pattern, flavor=flavor, ignore_case="i" in flags, dotall="s" in flags)
    except RegexError as exc:
        off = exc.offset if exc.offset >= 0 else 0
        what = "look-around is not supported here: " if looks and "assertion" in exc.reason else ""
        raise GrammarError(f"invalid regex: {what}{exc.reason}", text, pos + 1 + off, source) from None
    except LimitError:
        raise
    except Exception:  # the regex layer is unavailable or incomplete: fall back to `re`
        try:
            re.compile(pattern)
        except re.error as exc:
            off = exc.pos or 0
            raise GrammarError(f"invalid regex: {exc.msg}", text, pos + 1 + off, source) from None
    if asserts and whole_terminal:
        bad = lookaround_outside(pattern, flags, anchors)
        if bad is not None:
            off, message = bad
            raise GrammarError(f"invalid regex: {message}", text, pos + 1 + off, source)


_LOOK_OPEN = ("(?=", "(?!", "(?<=", "(?<!")


def lookaround_offsets(pattern: str, anchors: bool = False) -> list[int]:
    """Offsets of the look-around groups of ``pattern`` (with ``anchors``, also of
    ``^ $ \\A \\Z \\b \\B``), left to right; escapes and character classes skipped."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if anchors and pattern[i + 1 : i + 2] in ("A", "Z", "b", "B"):
                out.append(i)
            i += 2
        elif c == "[":
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
        else:
            if (c == "(" and pattern.startswith(_LOOK_OPEN, i)) or (anchors and c in "^$"):
                out.append(i)
            i += 1
    return out


def lookaround_outside(pattern: str, flags: str, anchors: bool = False) -> tuple[int, str] | None:
    """The first look-around of ``pattern`` that may read outside the terminal's text:
    (its offset in ``pattern``; the reason), or None. With
    ``anchors`` (Lark terminals), the anchors count as assertions too: ``\\b``/``\\B`` read
    a character on each side (kept where both lie inside the terminal), while ``^ $ \\A
    \\Z`` refer to the whole input in Lark's lexer and are refused.

    tether matches a terminal on its own text (the regex layer lowers look-arounds
    exactly for a whole-text match), while Lark's lexer lets a look-ahead read the input
    after the lexeme and a look-behind the input before it. The two agree exactly when
    every look-around stays inside the lexeme: a look-ahead whose longest match is no
    longer than the shortest text the pattern can still match after it, a look-behind no
    longer than the shortest text before it. Those are accepted; the others are refused
    (e.g. ``/if(?![a-z])/``: the look-ahead reads the next token).

    Widths come from the regex layer's parse tree (the parser that compiles the pattern);
    the walk uses an explicit stack (nesting is bounded by the parser's ``max_nesting``)."""
    from tether import regex as rx  # noqa: PLC0415
    from tether.errors import TetherError  # noqa: PLC0415

    try:
        tree, has_assertions = rx.parse_tree(pattern, flavor="python", ignore_case="i" in flags,
                                             dotall="s" in flags, verbose="x" in flags)
    except TetherError:
        return (0, "look-around is not supported here: the pattern could not be analysed")
    if not has_assertions:
        return None
    found: list[tuple[int, str]] = []
    widths = _Widths()
    # (tree, shortest text of the terminal before it, shortest text after it)
    stack: list[tuple[RegexTree, int, int]] = [(tree, 0, 0)]
    while stack:
        t, before, after = stack.pop()
        k = t[0]
        if k == "seq":
            mins = [widths.of(x)[0] for x in t[1]]
            total = sum(mins)
            done = 0
            for x, m in zip(t[1], mins, strict=True):
                stack.append((x, before + done, after + total - done - m))
                done += m
        elif k in ("alt", "rep"):
            stack.extend((x, before, after) for x in (t[1] if k == "alt" else [t[1]]))
        elif k == "look":
            longest = widths.of(t[2])[1]
            if longest is None or longest > after:
                shown = "(?=" if t[1] else "(?!"
                found.append((t[3], f"look-around is not supported here: the look-ahead '{shown}...)' reads "
                                    "past the end of the terminal (the text after a lexeme is not part of it: "
                                    "tether cannot represent this exactly)"))
            stack.append((t[2], before, 0))  # nested look-arounds: judged conservatively
        elif k == "behind":
            if before < 1:
                shown = "(?<!" if t[2] else "(?<="
                found.append((t[3], f"look-around is not supported here: the look-behind '{shown}...)' reads "
                                    "before the start of the terminal (the text before a lexeme is not part of "
                                    "it: tether cannot represent this exactly)"))
        elif k == "wordb" and anchors:
            if before < 1 or after < 1:
                shown = "\\b" if t[1] else "\\B"
                found.append((t[3], f"anchor not supported here: the word boundary '{shown}' reads a character "
                                    "outside the terminal (the text around a lexeme is not part of it: tether "
                                    "cannot represent this exactly)"))
        elif k in ("bol", "eol") and anchors:
            at = t[-1]
            shown = pattern[at : at + 2] if pattern[at : at + 1] == "\\" else pattern[at : at + 1]
            found.append((at, f"anchor not supported here: '{shown}' refers to the whole input in Lark's lexer, "
                              "not to the terminal: tether cannot represent this exactly"))
    return min(found) if found else None


class _Widths:
    """Shortest and longest text (None: unbounded) of regex-layer trees, memoized."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[int, int | None]] = {}
        self._keep: list[RegexTree] = []

    def of(self, t: RegexTree) -> tuple[int, int | None]:
        got = self._memo.get(id(t))
        if got is not None:
            return got
        # children first, without recursion
        order: list[RegexTree] = []
        stack = [t]
        while stack:
            x = stack.pop()
            if id(x) in self._memo:
                continue
            order.append(x)
            k = x[0]
            if k in ("seq", "alt"):
                stack.extend(x[1])
            elif k == "rep":
                stack.append(x[1])
        for x in reversed(order):
            self._memo[id(x)] = self._one(x)
            self._keep.append(x)
        return self._memo[id(t)]

    def _one(self, x: RegexTree) -> tuple[int, int | None]:
        k = x[0]
        if k == "set":
            return (1, 1)
        if k in ("seq", "alt"):
            parts = [self._memo[id(c)] for c in x[1]]
            if not parts:
                return (0, 0)
            highs = [h for _, h in parts]
            if k == "seq":
                return (sum(lo for lo, _ in parts), None if None in highs else sum(h for h in highs if h is not None))
            return (min(lo for lo, _ in parts), None if None in highs else max(h for h in highs if h is not None))
        if k == "trie":
            def step(_s: object, rest: tuple[int, int]) -> tuple[int, int]:
                return (rest[0] + 1, rest[1] + 1)

            def union(parts: list[tuple[int, int]]) -> tuple[int, int]:  # a trie is finite
                return (min(p[0] for p in parts), max(p[1] for p in parts))

            return fold_trie(x[1], step, union, (0, 0))
        if k == "rep":
            lo, hi = self._memo[id(x[1])]
            top = x[3]
            if hi == 0:
                return (0, 0)
            return (x[2] * lo, None if hi is None or top == INF else top * hi)
        return (0, 0)  # an assertion reads no text


def check_terminal_looks(g: Grammar, looks: list[tuple[int, str, str]], text: str, source: str) -> list[str]:
    """Every lexeme class of ``g`` (before embedded grammars join it) keeps its
    look-arounds inside its own text: decided on the terminal's whole regex, where the
    parts of a Lark terminal definition are joined (``"\"" /(?<!\\)x/`` reads the quote,
    which is part of the lexeme). A negative look-ahead after the lexeme that the
    lexer's longest match already enforces (``lookahead.decided_by_longest_match``) is
    dropped, and a note returned for ``Grammar.lowering``. Any other look-around that
    reads outside is refused at the regex part holding it (``looks``: (offset, pattern,
    flags) of the regex parts with look-arounds, as the reader found them)."""
    from tether.grammar.lark.longest_match import decided_by_longest_match  # noqa: PLC0415

    notes: list[str] = []
    memo: dict[str, Any] = {}  # the grammar's facts, built once
    for t in list(g.terminals.values()):
        patterns: list[str] = []
        if t.regex is not None:
            patterns.append(t.regex)
        elif t.expr is not None:  # a set operation: each regex operand on its own
            stack: list[object] = [t.expr]
            while stack:
                x = stack.pop()
                if isinstance(x, tuple):
                    stack.extend(x[1:])
                elif isinstance(x, str):
                    patterns.append(x)
        for pattern in patterns:
            if not lookaround_offsets(pattern, anchors=True):
                continue
            bad = lookaround_outside(pattern, "", anchors=True)
            if bad is None:
                continue
            decided = decided_by_longest_match(g, t.name, pattern, memo) if t.regex == pattern else None
            if decided is not None:
                notes.append(f"terminal {t.name}: its look-ahead after the lexeme is exact as lowered, "
                             f"at every use ({'; '.join(decided)})")
                continue
            # the part of the definition that reads outside (one exists: a look-around
            # inside its own part is inside the terminal)
            for pos, part, flags in looks:
                part_bad = lookaround_outside(part, flags, anchors=True)
                if part_bad is not None and part in pattern:
                    off, message = part_bad
                    raise GrammarError(f"invalid regex: {message}; in terminal '{t.name}'",
                                       text, pos + 1 + off, source)
            raise GrammarError(f"invalid regex: {bad[1]}; in terminal '{t.name}'",
                               text, looks[0][0], source)
    return notes
