"""The Lark reader's tokenizer: names, strings (``"..."i``), regexes (``/.../flags``),
operators, directives (``%json``/``%regex``/``%llguidance`` take a JSON value, ``%lark`` a
braced grammar), numbers and newlines; string escapes as Lark reads them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tether.errors import GrammarError, LimitError
from tether.grammar import bounds
from tether.limits import current as current_limits

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


@dataclass
class Tok:
    kind: str
    value: str
    pos: int
    data: object = None


def tokenize(text: str, source: str) -> list[Tok]:
    out: list[Tok] = []
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
            out.append(Tok(kind, val, pos))
            j = m.end()
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if val == "%lark":
                end = _matching_brace(text, j, source)
                out.append(Tok("lark", text[j + 1 : end], j + 1))
                pos = end + 1
                continue
            try:
                data, end = json.JSONDecoder().raw_decode(text, j)
            except json.JSONDecodeError as exc:
                raise GrammarError(f"invalid JSON after {val}: {exc.msg}", text, exc.pos, source) from None
            except RecursionError:  # the decoder's own depth guard: past any sane depth
                raise LimitError("max_json_depth", "deeper than the JSON decoder allows",
                                 current_limits().max_json_depth, bounds.place(text, j, source)) from None
            out.append(Tok("json", text[j:end], j, data))
            pos = end
            continue
        if kind not in ("ws", "comment"):
            out.append(Tok(kind, val, pos))
        pos = m.end()
    out.append(Tok("eof", "", len(text)))
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


def unescape(body: str, text: str, pos: int, source: str) -> str:
    """A Lark string's body with its escapes replaced (unknown escapes kept as written)."""
    return bounds.unescape(body, text, pos, source, _STR_ESC, keep_unknown=True,
                           invalid="lexer error: invalid escape '{}' in string")
