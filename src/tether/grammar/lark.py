"""Lark grammars (the subset llguidance and Outlines users write) → Grammar IR.

1. ``_tokenize`` splits the text into names, strings (``"..."i``), regexes
   (``/.../flags``), operators, directives and newlines; ``_Parser`` reads definitions
   (``rule: ...``, ``?rule``, ``!rule``, ``_rule``, ``TERMINAL: ...``, priorities ``.n``,
   llguidance attributes ``rule[stop="..."]``), alternatives (``|``, also on a new line),
   ``->`` aliases, groups, ``[optional]``, ``* + ?``, ``~ n``, ``~ n..m``, ``{n,m}``,
   ``"a".."z"`` ranges, and llguidance's ``&`` / prefix ``~`` on terminals, into the
   shared AST. Counts may be decimal or ``0x..``.
   Rule templates (``_separated{x, sep}: x (sep x)*``, used as ``_separated{NAME, ","}``)
   are instantiated after reading: one rule per distinct (template, arguments), within
   ``max_rules`` instances whose arguments stay within ``max_expanded`` symbols.
2. Directives: ``%import common.X [-> Y]`` and ``%import common (X, Y)`` resolve from
   tether's own copy of Lark's common terminals (``lark_common``), ``%ignore``,
   ``%json {schema}`` (embeds ``Grammar.from_json_schema``), ``%llguidance {...}``
   (options are checked, then ignored).
3. ``lower(..., mode="lexeme")``: each Lark terminal stays one IR terminal, matched
   greedily as Lark and llguidance do; then ``simplify``.

Look-around in a terminal's regex is kept where it stays inside the terminal's text (a
look-ahead no longer than what must still follow it in the terminal, a look-behind no
longer than what must precede it): there Lark's lexer and tether's whole-lexeme match
agree, and the regex layer lowers it exactly. This is decided on the whole terminal,
its definition's parts joined (``"\"" /(?<!\\)x/``: the look-behind reads the quote). One
that reads the input after or before the lexeme (``/if(?![a-z])/``) is refused, naming
the look-around, the terminal and the place. Anchors likewise: ``\\b``/``\\B`` are kept
where both characters they read lie inside the terminal; ``^ $ \\A \\Z`` (the whole
input, in Lark's lexer) are refused.

Ignored with a warning: terminal/rule priorities, ``max_tokens=``, ``temperature=``.
Refused with a GrammarError naming the place: terminal templates, parametric rules,
``%declare``, ``%override``, imports other than ``common``, look-around reading outside
the terminal, backreferences, the ``l`` regex flag, token ranges ``<[..]>``, special
tokens ``<|..|>``, ``@grammar``.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Generator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from tether.errors import GrammarError, LimitError, RegexError
from tether.grammar import bounds
from tether.grammar.ast import (
    Alt,
    Cls,
    Lit,
    Node,
    Ref,
    Rep,
    Rx,
    Seq,
    SetOp,
    alt,
    refs,
    seq,
)
from tether.grammar.ir import Grammar
from tether.grammar.lower import Lowering
from tether.grammar.simplify import did_you_mean, simplify

_TOKEN = re.compile(
    r"""
 (?P<ws>[ \t\f\r]+|\\\r?\n)
|(?P<comment>//[^\n]*|\#[^\n]*)
|(?P<nl>\n)
|(?P<string>"(?:[^"\\\n]|\\.)*"i?)
|(?P<regex>/(?!/)(?:\\.|[^/\\\n])*/[a-zA-Z]*)
|(?P<directive>%[a-z_]+)
|(?P<name>[_A-Za-z][_A-Za-z0-9]*)
|(?P<number>-?[0-9][_A-Za-z0-9]*)
|(?P<op>\.\.|->|::|<\[|<\||[:|()\[\]*+?~{},.&@<>=!])
""",
    re.VERBOSE,
)

_STR_ESC = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b",
            "0": "\0", "\\": "\\", '"': '"'}
_ATTRS = {"stop", "max_tokens", "lazy", "capture", "temperature", "suffix", "stop_capture"}
_LLG_OPTIONS = {"no_forcing", "allow_invalid_utf8", "allow_initial_skip", "ignore_once"}


@dataclass
class _Tok:
    kind: str
    value: str
    pos: int
    data: object = None


def _tokenize(text: str, source: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            c = text[pos]
            if c == '"':
                raise GrammarError("lexer error: unterminated string (missing closing '\"')", text, pos, source)
            if c == "/":
                raise GrammarError("lexer error: unterminated regex (missing closing '/')", text, pos, source)
            raise GrammarError(f"lexer error: unexpected character {c!r}", text, pos, source)
        kind = m.lastgroup or ""
        val = m.group()
        if kind == "directive" and val in ("%json", "%regex", "%llguidance", "%lark"):
            out.append(_Tok(kind, val, pos))
            j = m.end()
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if val == "%lark":
                end = _matching_brace(text, j, source)
                out.append(_Tok("lark", text[j + 1 : end], j + 1))
                pos = end + 1
                continue
            try:
                data, end = json.JSONDecoder().raw_decode(text, j)
            except json.JSONDecodeError as exc:
                raise GrammarError(f"invalid JSON after {val}: {exc.msg}", text, exc.pos, source) from None
            except RecursionError:  # the decoder's own depth guard: past any sane depth
                raise LimitError("max_json_depth", "deeper than the JSON decoder allows",
                                 bounds.current().max_json_depth, bounds.place(text, j, source)) from None
            out.append(_Tok("json", text[j:end], j, data))
            pos = end
            continue
        if kind not in ("ws", "comment"):
            out.append(_Tok(kind, val, pos))
        pos = m.end()
    out.append(_Tok("eof", "", len(text)))
    return out


def _matching_brace(text: str, j: int, source: str) -> int:
    """Offset of the ``}`` closing the ``{`` at ``j`` (strings and regexes skipped)."""
    if j >= len(text) or text[j] != "{":
        raise GrammarError("expected '{' after %lark", text, j, source)
    depth, i = 0, j
    while i < len(text):
        c = text[i]
        if c in "\"/":
            m = re.compile(r'"(?:[^"\\\n]|\\.)*"|/(?:\\.|[^/\\\n])*/').match(text, i)
            if m:
                i = m.end()
                continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise GrammarError("unclosed %lark { ... }: missing '}'", text, j, source)


def _unescape(body: str, text: str, pos: int, source: str) -> str:
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
                raise GrammarError(f"lexer error: invalid escape '\\{e}{digits}' in string", text, pos + i, source)
            out.append(bounds.code_point(digits, text, pos + i, source))
            i += 2 + n
        elif e in _STR_ESC:
            out.append(_STR_ESC[e])
            i += 2
        else:  # Lark keeps unknown escapes as written
            out.append("\\" + e)
            i += 2
    return "".join(out)


def check_regex(
    pattern: str, flags: str, text: str, pos: int, source: str, flavor: Literal["python", "ecma"] = "python",
    *, whole_terminal: bool = True, anchors: bool = False,
) -> None:
    """Raise GrammarError (at the regex's place in ``text``) if tether cannot use
    ``pattern`` as a terminal: backreferences, a syntax error, or a look-around that
    reads outside the terminal's own text (see `_lookaround_outside`). With
    ``whole_terminal=False`` the pattern is one part of a Lark terminal definition, and
    where its look-arounds read is decided on the whole terminal (`_check_terminal_looks`).
    ``anchors`` (Lark) treats the anchors as assertions too (see `_lookaround_outside`)."""
    looks = _lookaround_offsets(pattern)
    asserts = _lookaround_offsets(pattern, anchors=anchors)
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
        bad = _lookaround_outside(pattern, flags, anchors)
        if bad is not None:
            index, message = bad
            off = asserts[index] if index < len(asserts) else 0
            raise GrammarError(f"invalid regex: {message}",
                               text, pos + 1 + off, source)


_LOOK_OPEN = ("(?=", "(?!", "(?<=", "(?<!")


def _lookaround_offsets(pattern: str, anchors: bool = False) -> list[int]:
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


def _lookaround_outside(pattern: str, flags: str, anchors: bool = False) -> tuple[int, str] | None:
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


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.toks = _tokenize(text, source)
        self.i = 0
        self.depth = 0
        self.nesting = bounds.Depth(text, source)
        self.rules: dict[str, Node] = {}
        self.terms: dict[str, Node] = {}
        self.positions: dict[str, int] = {}
        self.attrs: dict[str, dict[str, object]] = {}
        self.ignore: list[Node] = []
        self.imports: dict[str, tuple[str, int]] = {}  # local name → (common name, pos)
        self.warnings: list[str] = []
        self.embedded: dict[str, Grammar] = {}
        self.templates: dict[str, _Template] = {}
        self.in_terminal = False  # reading a terminal definition's body
        self.looks: list[tuple[int, str, str]] = []  # (offset, pattern, flags): regexes in terminals with look-around
        self.usages: dict[str, _Usage] = {}  # placeholder name → a template use, resolved later

    # -- token helpers
    def peek(self, k: int = 0) -> _Tok:
        j = self.i
        n = 0
        while True:
            t = self.toks[j]
            if t.kind == "nl" and self.depth > 0:
                j += 1
                continue
            if n == k:
                return t
            n += 1
            j += 1

    def next(self) -> _Tok:
        while self.toks[self.i].kind == "nl" and self.depth > 0:
            self.i += 1
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, msg: str, pos: int) -> GrammarError:
        return GrammarError(msg, self.text, pos, self.source)

    def expect(self, value: str, what: str) -> _Tok:
        t = self.next()
        if t.value != value or t.kind not in ("op",):
            shown = t.value if t.kind != "eof" else "end of grammar"
            shown = "newline" if t.kind == "nl" else shown
            raise self.error(f"expected {what}, got {shown!r}", t.pos)
        return t

    def skip_nl(self) -> None:
        while self.toks[self.i].kind == "nl":
            self.i += 1

    # -- grammar
    def parse(self) -> None:
        self.skip_nl()
        while self.peek().kind != "eof":
            t = self.peek()
            if t.kind == "directive":
                self.directive()
            elif t.kind == "name" or (t.kind == "op" and t.value in "?!"):
                self.definition()
            else:
                raise self.error(f"expected a rule or terminal definition, got {t.value!r}", t.pos)
            t = self.next()
            if t.kind not in ("nl", "eof"):
                raise self.error(f"unexpected {t.value!r}: expected the end of the definition", t.pos)
            self.skip_nl()

    def definition(self) -> None:
        t = self.next()
        start = t.pos
        if t.kind == "op":  # ?rule / !rule
            t = self.next()
            if t.kind != "name":
                raise self.error("expected a rule name", t.pos)
        name = t.value
        is_term = name.lstrip("_")[:1].isupper()
        p = self.peek()
        if p.value == "::":
            raise self.error(f"parametric rules ('{name}::...') are not supported", p.pos)
        params: tuple[str, ...] | None = None
        if p.value == "{":
            if is_term:
                raise self.error(f"terminal templates ('{name}{{...}}') are not supported: only rules "
                                 "take parameters", p.pos)
            params = self.template_params(name)
        attrs: dict[str, object] = {}
        if p.value == "[":
            attrs = self.attributes(name)
        if self.peek().value == ".":
            self.next()
            num = self.next()
            if num.kind != "number":
                raise self.error("expected a priority number after '.'", num.pos)
            msg = f"priority of '{name}' is ignored (tether's lexer has no priorities)"
            self.warnings.append(msg)
            warnings.warn(msg, stacklevel=4)
        self.expect(":", f"':' after '{name}'")
        self.in_terminal = is_term
        try:
            body = self.expansions()
        finally:
            self.in_terminal = False
        if params is not None:
            if name in self.templates or name in self.rules:
                raise self.error(f"duplicate rule '{name}'", start)
            self.templates[name] = _Template(params, body, start)
            self.positions[name] = start
            return
        table = self.terms if is_term else self.rules
        if name in table or name in self.imports or name in self.templates:
            kind = "terminal" if is_term else "rule"
            raise self.error(f"duplicate {kind} '{name}'", start)
        table[name] = body
        self.positions[name] = start
        if attrs:
            self.attrs[name] = attrs

    def template_params(self, name: str) -> tuple[str, ...]:
        """``{a, b}`` after a rule name: the template's parameters (rule names)."""
        self.next()  # {
        self.depth += 1
        params: list[str] = []
        while True:
            t = self.next()
            if t.kind != "name" or t.value[:1].isupper() or t.value.lstrip("_")[:1].isupper():
                raise self.error(f"expected a parameter name (a rule name) in template '{name}'", t.pos)
            if t.value in params:
                raise self.error(f"duplicate parameter '{t.value}' in template '{name}'", t.pos)
            params.append(t.value)
            sep = self.next()
            if sep.value == "}":
                break
            if sep.value != ",":
                raise self.error(f"expected ',' or '}}' in the parameters of '{name}'", sep.pos)
        self.depth -= 1
        return tuple(params)

    def attributes(self, name: str) -> dict[str, object]:
        self.next()  # [
        out: dict[str, object] = {}
        while True:
            key = self.next()
            if key.kind != "name":
                raise self.error("expected an attribute name", key.pos)
            if key.value not in _ATTRS:
                raise self.error(f"Unknown attribute '{key.value}' on '{name}'", key.pos)
            val: object = True
            if self.peek().value == "=":
                self.next()
                v = self.next()
                if v.kind == "string":
                    val = _unescape(v.value[1:-1] if not v.value.endswith("i") else v.value[1:-2], self.text, v.pos, self.source)
                elif v.kind == "number":
                    try:
                        val = int(v.value, 0) if len(v.value) <= 30 else None
                    except ValueError:
                        val = None
                    if val is None:
                        raise self.error(f"invalid number {v.value[:40]!r}", v.pos)
                    if self.peek().value == "." and self.peek(1).kind == "number":  # 1.5
                        self.next()
                        frac = self.next()
                        try:
                            val = float(f"{v.value}.{frac.value}")
                        except ValueError:
                            raise self.error(f"invalid number {v.value[:20]}.{frac.value[:20]}", v.pos) from None
                elif v.kind in ("regex", "name"):
                    val = (v.kind, v.value, v.pos)
                else:
                    raise self.error(f"Expected token: a value for '{key.value}'", v.pos)
            if key.value == "max_tokens" and not isinstance(val, int):
                raise self.error("Expected token: max_tokens= needs a number", key.pos)
            if key.value == "temperature" and not isinstance(val, int | float):
                raise self.error("Expected token: temperature= needs a number", key.pos)
            out[key.value] = val
            t = self.next()
            if t.value == "]":
                return out
            if t.value != ",":
                raise self.error("Expected token ',' or ']' in attributes", t.pos)

    def directive(self) -> None:
        t = self.next()
        d = t.value
        if d == "%ignore":
            self.in_terminal = True  # %ignore takes terminals: no rule templates there
            try:
                node = self.expansions()
            finally:
                self.in_terminal = False
            self.ignore.append(node)
        elif d == "%import":
            self.import_()
        elif d == "%llguidance":
            data = self.next().data
            if not isinstance(data, dict) or any(
                k not in _LLG_OPTIONS or not isinstance(v, bool) for k, v in data.items()
            ):
                raise self.error("failed to parse %llguidance declaration: expected "
                                 f"boolean options among {sorted(_LLG_OPTIONS)}", t.pos)
            self.warnings.append("%llguidance options are ignored")
        elif d in ("%declare", "%override", "%extend"):
            raise self.error(f"{d} is not supported", t.pos)
        else:
            raise self.error(f"unknown directive {d}", t.pos)

    def import_(self) -> None:
        first = self.next()
        if first.value == ".":
            raise self.error("relative imports are not supported; only %import common.X", first.pos)
        if first.kind != "name" or first.value != "common":
            raise self.error(f"only %import common.X is supported, not '{first.value}'", first.pos)
        t = self.next()
        if t.value == ".":
            name = self.next()
            if name.kind != "name":
                raise self.error("expected a name after 'common.'", name.pos)
            local = name.value
            if self.peek().value == "->":
                self.next()
                local = self.next().value
            self._import_one(name.value, local, name.pos)
        elif t.value == "(":
            self.depth += 1
            while True:
                name = self.next()
                self._import_one(name.value, name.value, name.pos)
                sep = self.next()
                if sep.value == ")":
                    break
                if sep.value != ",":
                    raise self.error("expected ',' or ')' in the import list", sep.pos)
            self.depth -= 1
        else:
            raise self.error("expected '.' or '(' after %import common", t.pos)

    def _import_one(self, name: str, local: str, pos: int) -> None:
        common = _common_terms()
        if name not in common:
            raise self.error(
                f"Unknown common terminal '{name}'" + did_you_mean(name, set(common)).replace("\n", " "), pos
            )
        if local in self.terms or local in self.rules:
            raise self.error(f"duplicate terminal '{local}' (imported)", pos)
        self.imports[local] = (name, pos)
        self.terms[local] = common[name]
        self.positions[local] = pos

    # -- expressions (generators driven by ``bounds.run``: nesting costs no stack)
    def expansions(self) -> Node:
        return bounds.run(self._expansions())  # type: ignore[no-any-return]

    def at_end(self) -> bool:
        t = self.peek()
        return t.kind in ("eof", "nl") or t.value in ("|", ")", "]", "->")

    def _expansions(self) -> Gen:
        start = self.peek().pos
        alts = [(yield self._alias())]
        while True:
            t = self.peek()
            if t.value == "|":
                self.next()
                alts.append((yield self._alias()))
                continue
            # a newline followed by '|' continues the definition
            j = self.i
            while self.toks[j].kind == "nl":
                j += 1
            if j > self.i and self.toks[j].value == "|":
                self.i = j + 1
                alts.append((yield self._alias()))
                continue
            break
        return alt(alts, start)

    def _alias(self) -> Gen:
        node = yield self._conjunction()
        if self.peek().value == "->":
            self.next()
            n = self.next()
            if n.kind != "name":
                raise self.error("expected an alias name after '->'", n.pos)
        return node

    def _conjunction(self) -> Gen:
        start = self.peek().pos
        parts = [(yield self._sequence())]
        while self.peek().value == "&":
            self.next()
            parts.append((yield self._sequence()))
        if len(parts) == 1:
            return parts[0]
        return SetOp("and", tuple(parts), pos=start)

    def _sequence(self) -> Gen:
        start = self.peek().pos
        items: list[Node] = []
        while not self.at_end() and self.peek().value not in ("&",):
            items.append((yield self._postfix()))
        return seq(items, start)

    def _postfix(self) -> Gen:
        t = self.peek()
        if t.value == "~" and t.kind == "op":  # llguidance: negation of a terminal
            self.next()
            self.nesting.enter(t.pos)
            inner = yield self._postfix()
            self.nesting.leave()
            return SetOp("not", (inner,), pos=t.pos)
        node = yield self._atom()
        hi: int | None
        while True:
            p = self.peek()
            if p.value in ("*", "+", "?") and p.kind == "op":
                self.next()
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[p.value]
                node = Rep(node, lo, hi, pos=p.pos)
            elif p.value == "~" and self.peek(1).kind == "number":
                self.next()
                lo = self._count(self.next())
                hi = lo
                if self.peek().value == "..":
                    self.next()
                    hi = self._count(self.next())
                self._check_range(lo, hi, p.pos)
                node = Rep(node, lo, hi, pos=p.pos)
            elif p.value == "{":
                nxt = self.peek(1)
                if nxt.kind != "number" and nxt.value != ",":
                    raise self.error("'{' here is neither a repetition {n,m} nor a template use "
                                     "(a template is used right after its name: name{arg, ...})", p.pos)
                self.next()
                lo = 0
                if self.peek().kind == "number":
                    lo = self._count(self.next())
                hi = lo
                if self.peek().value == ",":
                    self.next()
                    hi = self._count(self.next()) if self.peek().kind == "number" else None
                self.expect("}", "'}' to close the repetition")
                self._check_range(lo, hi, p.pos)
                node = Rep(node, lo, hi, pos=p.pos)
            else:
                return node

    def _count(self, t: _Tok) -> int:
        if t.kind != "number":
            raise self.error("expected a number", t.pos)
        if t.value.startswith("-"):
            raise self.error(f"repetition count must be >= 0 (got {t.value[:40]})", t.pos)
        return bounds.count(t.value, self.text, t.pos, self.source)

    def _check_range(self, lo: int, hi: int | None, pos: int) -> None:
        if lo < 0:
            raise self.error(f"repetition range start must be >= 0 (got {lo})", pos)
        if hi is not None and hi < lo:
            raise self.error(f"repetition range end must be >= start (got {lo}..{hi})", pos)

    def _atom(self) -> Gen:
        t = self.next()
        if t.kind == "op" and t.value in ("(", "["):
            self.depth += 1
            self.nesting.enter(t.pos)
            inner = yield self._expansions()
            self.nesting.leave()
            self.depth -= 1
            close = ")" if t.value == "(" else "]"
            nt = self.next()
            if nt.value != close:
                raise self.error(f"expected '{close}' to close the '{t.value}' opened here", t.pos)
            return inner if t.value == "(" else Rep(inner, 0, 1, pos=t.pos)
        if t.kind == "string":
            lit = self.string(t)
            if self.peek().value == "..":
                self.next()
                t2 = self.next()
                if t2.kind != "string":
                    raise self.error("expected a string after '..'", t2.pos)
                end = self.string(t2)
                if len(lit.text) != 1:
                    raise self.error("range start must be a single character", t.pos)
                if len(end.text) != 1:
                    raise self.error("range end must be a single character", t2.pos)
                if ord(end.text) < ord(lit.text):
                    raise self.error("invalid range order: end is before start", t.pos)
                return Cls(((ord(lit.text), ord(end.text)),), pos=t.pos)
            return lit
        if t.kind == "regex":
            return self.regex(t)
        if t.kind == "name":
            if self.peek().value == "::":
                raise self.error(f"parametric rules ('{t.value}::...') are not supported", t.pos)
            if self.peek().value == "{" and self.peek(1).kind != "number" and self.peek(1).value not in (",", "}"):
                return (yield self._template_use(t))
            return Ref(t.value, pos=t.pos)
        if t.kind == "directive" and t.value == "%json":
            data = self.next().data
            return self.json_schema(data, t.pos)
        if t.kind == "directive" and t.value == "%lark":
            lark_tok = self.next()
            return self.nested_lark(lark_tok.value, lark_tok.pos)
        if t.kind == "directive" and t.value == "%regex":
            return self.substring_regex(self.next().data, t.pos)
        if t.kind == "directive" and t.value == "%if":
            raise self.error("'%if' conditions (parametric rules) are not supported", t.pos)
        if t.value == "<[":
            raise self.error("token ranges <[...]> are not supported (tether constrains text, not token ids)", t.pos)
        if t.value == "<|":
            raise self.error("special tokens <|...|> are not supported in grammars", t.pos)
        if t.value == "@":
            raise self.error("@grammar references are not supported", t.pos)
        shown = "end of line" if t.kind in ("nl", "eof") else repr(t.value)
        raise self.error(f"expected an expression, got {shown}", t.pos)

    def _template_use(self, name: _Tok) -> Gen:
        """``name{arg, ...}``: a placeholder reference, instantiated by `expand_templates`."""
        if name.value[:1].isupper() or name.value.lstrip("_")[:1].isupper():
            raise self.error(f"terminal templates ('{name.value}{{...}}') are not supported: only rules "
                             "take parameters", name.pos)
        if self.in_terminal:
            raise self.error(f"rule template '{name.value}' used in a terminal or %ignore (templates make "
                             "rules, which terminals cannot use)", name.pos)
        open_ = self.next()  # {
        self.depth += 1
        self.nesting.enter(open_.pos)
        args: list[Node] = []
        while True:
            args.append((yield self._postfix()))
            sep = self.next()
            if sep.value == "}":
                break
            if sep.value != ",":
                raise self.error(f"expected ',' or '}}' in the arguments of template '{name.value}'", sep.pos)
        self.nesting.leave()
        self.depth -= 1
        key = f"{name.value}{{#{len(self.usages)}}}"  # braces: never a Lark name
        self.usages[key] = _Usage(name.value, tuple(args), name.pos)
        return Ref(key, pos=name.pos)

    def expand_templates(self) -> None:
        """Replace every template use by a reference to its instance: one rule per
        distinct (template, arguments), the template's body with its parameters replaced
        by the arguments. Instances using templates are expanded from a worklist;
        ``max_rules`` bounds the number of instances and ``max_expanded`` the size of
        each instance's arguments (templates that grow their arguments stop there)."""
        if not self.usages:
            return
        lim = bounds.current()
        instances: dict[tuple[str, tuple[Node, ...]], str] = {}
        todo: list[tuple[str, _Template, dict[str, Node]]] = []

        def instance(use: _Usage, args: tuple[Node, ...]) -> Ref:
            tpl = self.templates.get(use.template)
            if tpl is None:
                known = set(self.templates)
                if use.template in self.rules:
                    raise self.error(f"'{use.template}' is a rule, not a template: it takes no arguments", use.pos)
                raise self.error(f"unknown template '{use.template}'" + did_you_mean(use.template, known), use.pos)
            if len(args) != len(tpl.params):
                raise self.error(f"template '{use.template}' takes {len(tpl.params)} arguments "
                                 f"({', '.join(tpl.params)}), got {len(args)}", use.pos)
            for a in args:
                _bounded_size(a, lim.max_expanded, self.text, use.pos, self.source)
            key = (use.template, args)
            name = instances.get(key)
            if name is None:
                if len(instances) >= lim.max_rules:
                    raise LimitError("max_rules", len(instances) + 1, lim.max_rules,
                                     bounds.place(self.text, use.pos, self.source),
                                     detail="instances of rule templates")
                name = f"{use.template}__{len(instances) + 1}"
                while name in self.rules or name in self.terms or name in self.templates:
                    name += "_"
                instances[key] = name
                self.rules[name] = seq([])  # placeholder until its body is built
                self.positions[name] = tpl.pos
                todo.append((name, tpl, dict(zip(tpl.params, args, strict=True))))
            return Ref(name, pos=use.pos)

        def subst(node: Node, mapping: dict[str, Node]) -> Gen:
            if isinstance(node, Ref):
                use = self.usages.get(node.name)
                if use is not None:
                    args = []
                    for a in use.args:
                        args.append((yield subst(a, mapping)))
                    return instance(use, tuple(args))
                return mapping.get(node.name, node)
            if isinstance(node, Seq | Alt):
                items = []
                for it in node.items:
                    items.append((yield subst(it, mapping)))
                return seq(items, node.pos) if isinstance(node, Seq) else alt(items, node.pos)
            if isinstance(node, Rep):
                return Rep((yield subst(node.item, mapping)), node.lo, node.hi, pos=node.pos)
            if isinstance(node, SetOp):
                args2 = []
                for a in node.args:
                    args2.append((yield subst(a, mapping)))
                return SetOp(node.op, tuple(args2), node.max_reps, pos=node.pos)
            return node

        for name in [n for n in self.rules if n not in self.embedded]:
            self.rules[name] = bounds.run(subst(self.rules[name], {}))
        while todo:
            name, tpl, mapping = todo.pop()
            self.rules[name] = bounds.run(subst(tpl.body, mapping))

    def string(self, t: _Tok) -> Lit:
        v = t.value
        ic = v.endswith("i")
        body = v[1:-2] if ic else v[1:-1]
        return Lit(_unescape(body, self.text, t.pos + 1, self.source), ignore_case=ic, pos=t.pos)

    def regex(self, t: _Tok) -> Node:
        v = t.value
        end = v.rfind("/")
        pattern, flags = v[1:end], v[end + 1 :]
        for f in flags:
            if f == "l":
                raise self.error("the l-flag is not supported in regexes", t.pos + end + 1)
            if f not in "imsxu":
                raise self.error(f"unknown regex flag '{f}'", t.pos + end + 1)
        pattern = pattern.replace("\\/", "/")
        check_regex(pattern, flags, self.text, t.pos, self.source, whole_terminal=not self.in_terminal,
                    anchors=True)
        if self.in_terminal and _lookaround_offsets(pattern, anchors=True):
            self.looks.append((t.pos, pattern, flags))
        return Rx(pattern, "".join(sorted(set(flags) - {"u"})), pos=t.pos)

    def substring_regex(self, data: object, pos: int) -> Node:
        """llguidance's ``%regex {"substring_words"|"substring_chars"|"substring_chunks": ...}``:
        one lexeme matching any contiguous part of the text (whole words / any characters /
        whole chunks), including the empty one."""
        if not isinstance(data, dict):
            raise self.error("failed to parse %regex: expected a JSON object", pos)
        fields = {"substring_words", "substring_chars", "substring_chunks"}
        for k in data:
            if k not in fields:
                raise self.error(f"unknown field '{k}' in %regex (expected one of {sorted(fields)})", pos)
        if not data:
            raise self.error("no fields set on %regex", pos)
        if len(data) > 1:
            raise self.error("only one field can be set on %regex", pos)
        (key, value), = data.items()
        if key == "substring_chunks":
            if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
                raise self.error("failed to parse %regex: substring_chunks needs a list of strings", pos)
            firsts, rests = list(value), list(value)
        else:
            if not isinstance(value, str):
                raise self.error(f"failed to parse %regex: {key} needs a string", pos)
            if key == "substring_chars":
                firsts = rests = list(value)
            else:  # words: a part starts and ends at word boundaries
                parts = re.findall(r"\s+|\S+", value)
                idx = [i for i, w in enumerate(parts) if not w.isspace()]
                firsts = [parts[i] for i in idx]
                rests = firsts[:1] + ["".join(parts[idx[k - 1] + 1 : idx[k] + 1]) for k in range(1, len(idx))]
        from tether.grammar.ast import EPS
        from tether.grammar.regexgen import to_regex

        def tail(k: int) -> Node:  # (rests[k] (rests[k+1] ...)?)?
            node: Node = EPS
            for j in range(len(rests) - 1, k - 1, -1):
                node = Rep(seq([Lit(rests[j]), node]), 0, 1)
            return node

        node = alt([EPS] + [seq([Lit(firsts[i]), tail(i + 1)]) for i in range(len(firsts))])
        return Rx(to_regex(node, lambda r: EPS), pos=pos)

    def nested_lark(self, inner: str, pos: int) -> Node:
        """llguidance's ``%lark { grammar }``: a Lark grammar embedded as one rule."""
        level = _LARK_NESTING.get() + 1
        cap = min(self.nesting.maximum, _LARK_BLOCKS)
        if level > cap:
            raise LimitError("max_nesting", level, cap, bounds.place(self.text, pos, self.source),
                             detail=f"%lark blocks nest at most {_LARK_BLOCKS} deep")
        token = _LARK_NESTING.set(level)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = from_lark(inner, source=self.source)
        except GrammarError as exc:
            off = pos
            if exc.line:
                lines = inner.split("\n")
                off = pos + sum(len(x) + 1 for x in lines[: exc.line - 1]) + exc.column - 1
            raise self.error(f"in %lark grammar: {exc.reason}", off) from None
        finally:
            _LARK_NESTING.reset(token)
        name = f"__lark{len(self.embedded) + 1}"
        self.embedded[name] = g
        return Ref(name, pos=pos)

    def json_schema(self, data: object, pos: int) -> Node:
        try:
            g = Grammar.from_json_schema(data)
        except (GrammarError, LimitError):
            raise
        except Exception as exc:  # SchemaError, missing json_schema module, ...
            raise self.error(f"failed to compile JSON schema: {exc}", pos) from None
        name = f"__json{len(self.embedded) + 1}"
        self.embedded[name] = g
        return Ref(name, pos=pos)


Gen = Generator[Any, Any, Node]


@dataclass(frozen=True)
class _Template:
    """A rule template ``name{a, b}: body``."""

    params: tuple[str, ...]
    body: Node
    pos: int


@dataclass(frozen=True)
class _Usage:
    """A use ``name{arg, ...}`` of a template, before instantiation."""

    template: str
    args: tuple[Node, ...]
    pos: int


def _bounded_size(node: Node, maximum: int, text: str, pos: int, source: str) -> int:
    """The number of AST nodes in ``node``, counted up to ``maximum`` (LimitError past it:
    the cost of this walk and of hashing the node stays within the limit)."""
    n, stack = 0, [node]
    while stack:
        x = stack.pop()
        n += 1
        if n > maximum:
            raise LimitError("max_expanded", f"more than {maximum} symbols", maximum,
                             bounds.place(text, pos, source), detail="arguments of a rule template")
        if isinstance(x, Seq | Alt):
            stack.extend(x.items)
        elif isinstance(x, Rep):
            stack.append(x.item)
        elif isinstance(x, SetOp):
            stack.extend(x.args)
    return n
_COMMON: dict[str, Node] | None = None
_LARK_BLOCKS = 8  # %lark inside %lark: each level is a whole front end on the stack
_LARK_NESTING: ContextVar[int] = ContextVar("tether_lark_nesting", default=0)


def _common_terms() -> dict[str, Node]:
    """The bundled common terminals, each with its references inlined."""
    global _COMMON
    if _COMMON is None:
        from tether.grammar.lark_common import COMMON

        p = _Parser(COMMON, "common.lark")
        p.parse()
        defs = p.terms

        def inline(n: Node) -> Node:
            if isinstance(n, Ref):
                return inline(defs[n.name])
            if isinstance(n, SetOp):
                return SetOp(n.op, tuple(inline(a) for a in n.args), n.max_reps)
            if isinstance(n, Rep):
                return Rep(inline(n.item), n.lo, n.hi)
            from tether.grammar.ast import Alt, Seq

            if isinstance(n, Seq):
                return Seq(tuple(inline(i) for i in n.items))
            if isinstance(n, Alt):
                return Alt(tuple(inline(i) for i in n.items))
            return n

        _COMMON = {k: inline(v) for k, v in defs.items()}
    return _COMMON


def parse_lark(text: str, *, source: str = "") -> _Parser:
    """Read Lark ``text`` (syntax only). Raises GrammarError with line:column, LimitError
    past the active `tether.limits.Limits`."""
    bounds.check_text(text, source)
    p = _Parser(text, source)
    p.parse()
    p.expand_templates()
    user_terms = {k: v for k, v in p.terms.items() if k not in p.imports}
    bounds.check_rules({**p.rules, **user_terms}, text, source, p.positions)
    return p


def from_lark(text: str, *, start: str = "start", source: str = "") -> Grammar:
    """Build a Grammar from Lark ``text`` (see the module docstring).

    Raises:
        GrammarError: syntax errors, unknown names, duplicate definitions, circular
            terminals, unsupported features, bad regexes, rules that never finish.
    """
    p = parse_lark(text, source=source)
    if start not in p.rules:
        if not p.rules and not p.terms:
            raise GrammarError("the grammar has no rules")
        raise GrammarError(f"no start rule: the grammar has no '{start}' rule" + did_you_mean(start, set(p.rules)))
    known = set(p.rules) | set(p.terms) | set(p.embedded)
    for name, body in list(p.rules.items()) + list(p.terms.items()):
        is_term = name in p.terms
        if name in p.imports:
            continue
        for r in sorted(refs(body), key=lambda r: r.pos):
            if r.name not in known:
                raise GrammarError(f"unknown name '{r.name}'" + did_you_mean(r.name, known), text, r.pos, source)
            if is_term and r.name in p.embedded:
                raise GrammarError(f"%json cannot be used in terminals ('{name}')", text, r.pos, source)
            if is_term and r.name in p.rules:
                raise GrammarError(f"terminal '{name}' cannot use rule '{r.name}' (rules cannot be used in terminals)",
                                   text, r.pos, source)
    for node in p.ignore:
        for r in refs(node):
            if r.name not in p.terms:
                raise GrammarError(f"%ignore needs terminals; '{r.name}' is not a terminal", text, r.pos, source)
    _check_cycles(p, text, source)
    for body in p.rules.values():
        _check_setops(body, p, text, source)
    # attributes on rules (llguidance): the rule becomes one terminal with lexer options
    rules = dict(p.rules)
    for name in p.embedded:
        rules[name] = seq([])  # placeholder, replaced by the embedded grammar below
    lw = Lowering(rules, start, mode="lexeme", terminals=p.terms, text=text, source=source)
    attr_terms = {}
    for name, attrs in p.attrs.items():
        if name in p.rules:
            attr_terms[name] = _attr_terminal(lw, name, attrs, p, text, source)
    lw.rules = {k: v for k, v in rules.items() if k not in attr_terms}
    for name, t in attr_terms.items():
        lw.grammar.add_rule(name, t)
    g = lw.run()
    for node in p.ignore:
        node_ne = lw.nonempty(node)
        if node_ne is None:
            continue
        t = lw.terminal(node_ne, node.name if isinstance(node, Ref) else None)
        if t.name not in g.ignore:
            g.ignore.append(t.name)
    if p.looks:
        _check_terminal_looks(g, p, text, source)
    for name, sub in p.embedded.items():
        from tether.grammar.compose import embed_into

        g.rules = [r for r in g.rules if r.lhs != name]
        embed_into(g, sub, name)
    g.warnings += p.warnings
    g.lowering = lw.decisions
    return simplify(g, text=text, source=source, positions=p.positions, warn_unreachable=set())


def _check_terminal_looks(g: Grammar, p: _Parser, text: str, source: str) -> None:
    """Every lexeme class of ``g`` (before embedded grammars join it) keeps its
    look-arounds inside its own text: decided on the terminal's whole regex, where the
    parts of a Lark terminal definition are joined (``"\"" /(?<!\\)x/`` reads the quote,
    which is part of the lexeme). A look-around that reads outside is refused at the
    regex part holding it."""
    for t in g.terminals.values():
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
            if not _lookaround_offsets(pattern, anchors=True):
                continue
            bad = _lookaround_outside(pattern, "", anchors=True)
            if bad is None:
                continue
            # the part of the definition that reads outside (one exists: a look-around
            # inside its own part is inside the terminal)
            for pos, part, flags in p.looks:
                part_bad = _lookaround_outside(part, flags, anchors=True)
                if part_bad is not None and part in pattern:
                    index, message = part_bad
                    offs = _lookaround_offsets(part, anchors=True)
                    raise GrammarError(f"invalid regex: {message}; "
                                       f"in terminal '{t.name}'", text, pos + 1 + (offs[index] if index < len(offs) else 0),
                                       source)
            raise GrammarError(f"invalid regex: {bad[1]}; in terminal '{t.name}'",
                               text, p.looks[0][0], source)


def _attr_terminal(lw: Lowering, name: str, attrs: dict[str, object], p: _Parser, text: str, source: str):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from tether.grammar.ir import T

    body = p.rules[name]
    for r in refs(body):
        if r.name in p.rules:
            raise GrammarError(f"rule '{name}' has lexer attributes, so it cannot use rule '{r.name}'",
                               text, r.pos, source)
    stop = attrs.get("stop")
    stop_node: Node | None = None
    if isinstance(stop, tuple):  # stop=/regex/ or stop=TERMINAL
        kind, value, pos = stop
        if kind == "regex":
            stop_node = p.regex(_Tok("regex", str(value), int(pos)))
        elif value in p.terms:
            stop_node = Ref(str(value), pos=int(pos))
        else:
            raise GrammarError(f"stop= on '{name}' names '{value}', which is not a terminal",
                               text, int(pos), source)
        stop = None
    for k in ("max_tokens", "temperature"):
        if k in attrs:
            msg = f"{k}= on '{name}' is ignored (token-level limits belong to the decoder)"
            p.warnings.append(msg)
    ne = lw.nonempty(body)
    if ne is None:
        raise GrammarError(f"rule '{name}' matches only the empty string", text, p.positions[name], source)
    if stop_node is not None:  # value (not containing the stop) then the stop; lazy
        ne = seq([SetOp("and", (ne, SetOp("except", (stop_node,)))), stop_node])
    t = lw.terminal(ne, name.upper())
    term = lw.grammar.terminals[t.name]
    lazy = bool(attrs.get("lazy", False)) or stop is not None or stop_node is not None
    new = replace(term, stop=stop if isinstance(stop, str) and stop else None, lazy=lazy)
    lw.grammar.terminals[t.name] = new
    return T(t.name)


def _check_cycles(p: _Parser, text: str, source: str) -> None:
    """Refuse circular terminals (depth-first, with an explicit stack), then bound what
    inlining the terminals into one another makes: nesting (``max_nesting``) and size
    (``max_expanded``)."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    for root in p.terms:
        if root in state or root in p.imports:
            continue
        state[root] = 1
        stack: list[tuple[str, list[Ref]]] = [(root, refs(p.terms[root]))]
        while stack:
            name, todo = stack[-1]
            if not todo:
                state[name] = 2
                stack.pop()
                continue
            r = todo.pop()
            if r.name not in p.terms:
                continue
            s = state.get(r.name)
            if s == 1:
                raise GrammarError(f"circular reference in terminal '{r.name}'", text, r.pos, source)
            if s is None:
                state[r.name] = 1
                stack.append((r.name, refs(p.terms[r.name])))
    lim = bounds.current()
    for name, (depth, size) in bounds.inlined_sizes(p.terms).items():
        if depth > lim.max_nesting:
            raise LimitError("max_nesting", depth, lim.max_nesting,
                             bounds.place(text, p.positions.get(name, -1), source),
                             detail=f"terminal '{name}' with the terminals it uses inlined")
        if size > lim.max_expanded:
            raise LimitError("max_expanded", size, lim.max_expanded,
                             bounds.place(text, p.positions.get(name, -1), source),
                             detail=f"terminal '{name}' with the terminals it uses inlined")


def _check_setops(node: Node, p: _Parser, text: str, source: str) -> None:
    """``&`` and prefix ``~`` build terminals: as in llguidance they are refused in rules
    (write ``ST: A & B`` and use ``ST``)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, SetOp):
            op = "&" if n.op == "and" else "~"
            raise GrammarError(f"{op} is only supported for terminals, not rules: define a terminal "
                               f"(e.g. ST: A {op} B) and use it", text, n.pos, source)
        if hasattr(n, "items"):
            stack.extend(n.items)
        elif isinstance(n, Rep):
            stack.append(n.item)
