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
            index, message = bad
            off = asserts[index] if index < len(asserts) else 0
            raise GrammarError(f"invalid regex: {message}",
                               text, pos + 1 + off, source)


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
    (its index among the look-arounds, left to right; the reason), or None. With
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

    Widths come from Python's own regex parser (the pattern already passed tether's,
    which bounds its nesting)."""
    import re._constants as sc  # noqa: PLC0415
    import re._parser as sp  # noqa: PLC0415

    try:
        tree = sp.parse(pattern, re.X if "x" in flags else 0)
    except (re.error, RecursionError, OverflowError):
        return (0, "look-around is not supported here: the pattern could not be analysed")
    found: list[tuple[int, str] | None] = []

    def width(sub: Any, items: list[Any]) -> tuple[int, int]:
        return sp.SubPattern(sub.state, items).getwidth()  # type: ignore[no-any-return]

    def walk(sub: Any, before: int, after: int) -> None:
        items = list(sub)
        mins = [width(sub, [it])[0] for it in items]
        for k, (op, av) in enumerate(items):
            b = before + sum(mins[:k])
            a = after + sum(mins[k + 1 :])
            if op in (sc.ASSERT, sc.ASSERT_NOT):
                direction, body = av
                longest = body.getwidth()[1]
                index = len(found)
                shown = ("(?=" if op is sc.ASSERT else "(?!") if direction == 1 else \
                    ("(?<=" if op is sc.ASSERT else "(?<!")
                if direction == 1 and longest > a:
                    found.append((index, f"look-around is not supported here: the look-ahead '{shown}...)' reads past the end of the terminal "
                                         "(the text after a lexeme is not part of it: tether cannot "
                                         "represent this exactly)"))
                elif direction != 1 and longest > b:
                    found.append((index, f"look-around is not supported here: the look-behind '{shown}...)' reads before the start of the "
                                         "terminal (the text before a lexeme is not part of it: tether "
                                         "cannot represent this exactly)"))
                else:
                    found.append(None)
                walk(body, b if direction == 1 else 0, 0)  # nested look-arounds: conservatively
            elif op is sc.AT and anchors:
                if av in (sc.AT_BOUNDARY, sc.AT_NON_BOUNDARY):
                    shown = "\\b" if av is sc.AT_BOUNDARY else "\\B"
                    found.append(None if b >= 1 and a >= 1 else (
                        len(found), f"anchor not supported here: the word boundary '{shown}' reads a character outside the terminal "
                                    "(the text around a lexeme is not part of it: tether cannot represent "
                                    "this exactly)"))
                else:
                    shown = {sc.AT_BEGINNING: "^", sc.AT_BEGINNING_STRING: "\\A", sc.AT_END: "$",
                             sc.AT_END_STRING: "\\Z"}.get(av, str(av))
                    found.append((len(found), f"anchor not supported here: '{shown}' refers to the whole input in Lark's lexer, "
                                              "not to the terminal: tether cannot represent this exactly"))
            elif op is sc.SUBPATTERN:
                walk(av[3], b, a)
            elif op is sc.BRANCH:
                for alt_ in av[1]:
                    walk(alt_, b, a)
            elif op in (sc.MAX_REPEAT, sc.MIN_REPEAT, sc.POSSESSIVE_REPEAT):
                walk(av[2], b, a)
            elif op is sc.ATOMIC_GROUP:
                walk(av, b, a)
            elif op is sc.GROUPREF_EXISTS:
                for part in av[1:]:
                    if part is not None:
                        walk(part, b, a)

    try:
        walk(tree, 0, 0)
    except RecursionError:
        return (0, "look-around is not supported here: the pattern is nested too deeply to analyse")
    return next((f for f in found if f is not None), None)


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
                    index, message = part_bad
                    offs = lookaround_offsets(part, anchors=True)
                    raise GrammarError(f"invalid regex: {message}; "
                                       f"in terminal '{t.name}'", text, pos + 1 + (offs[index] if index < len(offs) else 0),
                                       source)
            raise GrammarError(f"invalid regex: {bad[1]}; in terminal '{t.name}'",
                               text, looks[0][0], source)
    return notes
