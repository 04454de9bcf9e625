"""Parse query-language programs: the paper's clause form and the later LMQL surface.

A query program has up to five clauses (LMQL paper, Fig. 5)::

    [imports]
    [decoder]            argmax | sample(n=3, temperature=0.9) | beam(n=2) ...
    <body>               Python statements; every top-level string is a prompt statement
    [from "model"]
    [where <cond>]
    [distribute VAR over EXPR | distribution VAR in EXPR]

The decoder clause may indent the body under it (paper form) or stand alone on its line
(later LMQL form); without a decoder clause the whole text is the body ("minimal syntax").
Prompt statements may carry an inline constraint: ``"... [ANSWER]" where len(ANSWER) < 20``.

Inside a prompt string (f-string-like):

* ``[NAME]`` a hole; ``[NAME: type]`` a typed hole (``int``, ``r"regex"``, a dataclass, any
  output type ``generate`` takes, a nested query call); ``[@dec NAME]`` applies variable
  decorators;
* ``{expr}`` interpolates a Python expression; ``{:system}``/``{:user}``/``{:assistant}``
  start a chat turn;
* ``[[``, ``]]``, ``{{``, ``}}`` are literal brackets and braces.

``parse_query(text)`` returns a ``QueryAst``; every error is a ``QuerySyntaxError`` naming
line and column with a caret. Cost: linear in the text plus one ``ast.parse`` of the body.

Query text is hostile until parsed: its size is bounded by ``Limits.max_text_chars``, the
nesting of every Python expression or statement in it by ``Limits.max_nesting`` (so no
later walk of the tree can recurse without bound), null bytes and Python's own parser
giving up (``RecursionError``, ``MemoryError``) become QuerySyntaxError with a place.
A query is Python code run with the caller's rights: parse and run trusted text only.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from numbers import Integral
from typing import Literal

from tether import limits
from tether.decoding.decoders import check_bool, check_int, check_number, check_seed
from tether.errors import ArgumentError, QuerySyntaxError

DECODERS = ("argmax", "greedy", "sample", "beam", "beam_search")
WHERE_MARK = "__tether_where__"

# ---------------------------------------------------------------------------------------
# prompt strings


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Hole:
    """``[NAME]``, ``[NAME: type]`` or ``[@dec NAME: type]`` in a prompt string."""

    name: str
    type_src: str | None = None
    decorators: tuple[str, ...] = ()


@dataclass(frozen=True)
class Expr:
    """``{expr}``: a Python expression interpolated into the prompt."""

    src: str


@dataclass(frozen=True)
class Role:
    """``{:role}``: a chat-turn tag."""

    role: str


Part = Text | Hole | Expr | Role

_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def nesting_depth(tree: ast.AST) -> tuple[int, ast.AST]:
    """The depth of ``tree`` (iterative) and its deepest node."""
    best, deepest = 0, tree
    todo: list[tuple[ast.AST, int]] = [(tree, 1)]
    while todo:
        node, d = todo.pop()
        if d > best:
            best, deepest = d, node
        todo.extend((c, d + 1) for c in ast.iter_child_nodes(node))
    return best, deepest


def parse_python(src: str, mode: str = "exec", filename: str = "<query>") -> ast.AST:
    """``ast.parse`` for hostile text: every failure is a ``SyntaxError`` with a place.

    Null bytes, Python's parser running out of stack or memory, and trees nested deeper
    than ``Limits.max_nesting`` are reported as SyntaxError (callers turn it into a
    QuerySyntaxError at the right line and column).
    """
    nul = src.find("\0")
    if nul >= 0:
        line = src.count("\n", 0, nul) + 1
        raise SyntaxError("null byte in query text", (filename, line, nul - src.rfind("\n", 0, nul), src, None, None))
    try:
        tree = ast.parse(src, filename, mode=mode)
    except (RecursionError, MemoryError):
        raise SyntaxError(f"too deeply nested for Python's parser (Limits.max_nesting is "
                          f"{limits.current().max_nesting})", (filename, 1, 1, src, None, None)) from None
    except ValueError as exc:  # the parser's own refusals (older Pythons: null bytes)
        raise SyntaxError(str(exc), (filename, 1, 1, src, None, None)) from None
    depth, node = nesting_depth(tree)
    maximum = limits.current().max_nesting
    if depth > maximum:
        raise SyntaxError(
            f"nesting {depth} deeper than Limits.max_nesting={maximum}",
            (filename, getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, src, None, None))
    return tree


def _scan_balanced(s: str, i: int, close: str, stop: int | None = None) -> int:
    """Index of the ``close`` char that ends the group starting at ``s[i]`` (after the
    opener, before ``stop``), skipping nested brackets and quoted strings; -1 if none."""
    depth = 0
    pairs = {"(": ")", "[": "]", "{": "}"}
    quote = ""
    end = len(s) if stop is None else stop
    while i < end:
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if s.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif c in "'\"":
            quote = s[i : i + 3] if s[i : i + 3] in ("'''", '"""') else c
            i += len(quote)
            continue
        elif c in pairs:
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return i if c == close else -1
            depth -= 1
        i += 1
    return -1


def parse_template(s: str) -> list[Part]:
    """Split a prompt string into text, holes, interpolations and role tags.

    Raises ValueError(message, offset) on malformed holes or braces (callers turn it into
    a QuerySyntaxError at the string's position).
    """
    parts: list[Part] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            parts.append(Text("".join(buf)))
            buf.clear()

    i = 0
    while i < len(s):
        c = s[i]
        if c == "[" and s.startswith("[[", i):
            buf.append("[")
            i += 2
        elif c == "]" and s.startswith("]]", i):
            buf.append("]")
            i += 2
        elif c == "{" and s.startswith("{{", i):
            buf.append("{")
            i += 2
        elif c == "}" and s.startswith("}}", i):
            buf.append("}")
            i += 2
        elif c == "[":
            end = _scan_balanced(s, i + 1, "]")
            if end < 0:
                raise ValueError("unclosed hole '[': write '[[' for a literal bracket", i)
            flush()
            parts.append(_parse_hole(s[i + 1 : end], i))
            i = end + 1
        elif c == "{":
            end = _scan_balanced(s, i + 1, "}")
            if end < 0:
                raise ValueError("unclosed '{': write '{{' for a literal brace", i)
            inner = s[i + 1 : end]
            flush()
            if inner.startswith(":"):
                role = inner[1:].strip()
                if not _NAME.fullmatch(role):
                    raise ValueError(f"bad role tag {{{inner}}}", i)
                parts.append(Role(role))
            else:
                if not inner.strip():
                    raise ValueError("empty interpolation '{}'", i)
                try:
                    parse_python(inner.strip(), "eval")
                except SyntaxError as exc:
                    raise ValueError(f"bad expression in '{{...}}': {exc.msg}", i + 1) from None
                parts.append(Expr(inner.strip()))
            i = end + 1
        else:
            buf.append(c)
            i += 1
    flush()
    return parts


def _parse_hole(inner: str, offset: int) -> Hole:
    body = inner.strip()
    decorators: list[str] = []
    while body.startswith("@"):
        m = re.match(r"@\s*([A-Za-z_][\w.]*(?:\([^)]*\))?)\s*", body)
        if not m:
            raise ValueError("bad decorator in hole", offset + 1)
        decorators.append(m.group(1))
        body = body[m.end() :]
    name, _, type_src = body.partition(":")
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"bad hole name {name!r}: expected [NAME] or [NAME: type] (write '[[' for '[')",
            offset + 1,
        )
    tsrc = type_src.strip() or None
    if tsrc is not None:
        try:
            parse_python(tsrc, "eval")
        except SyntaxError as exc:
            raise ValueError(f"bad hole type {tsrc!r}: {exc.msg}", offset + 1) from None
    return Hole(name, tsrc, tuple(decorators))


# ---------------------------------------------------------------------------------------
# clauses


@dataclass
class DecoderSpec:
    """The decoder clause: ``argmax``, ``sample(n=..., temperature=...)``, ``beam(n=...)``."""

    method: Literal["argmax", "sample", "beam"] = "argmax"
    args: dict[str, object] = field(default_factory=dict)

    @property
    def n(self) -> int:
        n = self.args.get("n", 1)  # an int: the decoder clause's arguments are checked
        return int(n) if isinstance(n, Integral) else 1


DECODER_ARGS = ("n", "temperature", "seed", "max_len", "max_tokens", "stop_on_masked", "engine", "batch",
                "close_on_budget", "stop_outside", "healing")


# LMQL decoder keywords that tune LMQL's own runtime (output, batching, caching): accepted,
# ignored, and said so on stderr
LMQL_RUNTIME_ARGS = ("verbose", "chunksize", "openai_chunksize", "cache", "show_speculative", "certificate",
                     "step_budget", "top_logprobs", "api_key", "is_async")


def drop_lmql_runtime_args(method: str, args: dict[str, object]) -> dict[str, object]:
    """``args`` without LMQL's runtime-tuning keywords (noted on stderr when present)."""
    ignored = sorted(k for k in args if k in LMQL_RUNTIME_ARGS)
    if ignored:
        import sys  # noqa: PLC0415

        print(f"note: {method}({', '.join(k + '=...' for k in ignored)}): LMQL runtime options ignored by tether",
              file=sys.stderr)
    return {k: v for k, v in args.items() if k not in LMQL_RUNTIME_ARGS}


def check_decoder_args(method: str, args: dict[str, object]) -> None:
    """Check a decoder clause's keywords: known names, right types, ranges and limits.

    Raises ArgumentError (a ValueError) or LimitError naming the keyword.
    """
    for k, v in args.items():
        if k not in DECODER_ARGS:
            raise ArgumentError(f"{method}({k}=...)", v, f"a known decoder keyword: one of {', '.join(DECODER_ARGS)}")
        if k == "n":
            check_int(f"{method}(n=...)", v, minimum=1, limit="max_n")
            if method == "argmax" and v != 1:
                raise ArgumentError("argmax(n=...)", v, "1 (use sample(n=...) or beam(n=...) for more)")
        elif k == "temperature":
            check_number(f"{method}(temperature=...)", v, 0.0)
        elif k == "seed":
            check_seed(v, f"{method}(seed=...)")
        elif k in ("max_len", "max_tokens"):
            check_int(f"{method}({k}=...)", v, minimum=1, limit="max_tokens")
        else:
            check_bool(f"{method}({k}=...)", v)


@dataclass
class QueryAst:
    """A parsed query: clause texts, the body as a Python module AST, and positions."""

    source: str
    body: ast.Module
    decoder: DecoderSpec | None = None
    model: str | None = None
    where: ast.expr | None = None
    distribute: tuple[str, ast.expr] | None = None
    filename: str = "<query>"
    prelude: str = ""  # Python written before the decoder clause (imports, definitions)
    model_expr: ast.expr | None = None  # a ``from`` clause that is a Python expression


def _err(msg: str, text: str, offset: int, filename: str) -> QuerySyntaxError:
    return QuerySyntaxError(msg, text, offset, filename)


def _line_offsets(text: str) -> list[int]:
    offs = [0]
    for line in text.splitlines(keepends=True):
        offs.append(offs[-1] + len(line))
    return offs


_CLAUSE = re.compile(r"^(from|where|distribute|distribution|FROM|WHERE|DISTRIBUTE|DISTRIBUTION)\b(.*)$")


def _decoder_head(line: str) -> re.Match[str] | None:
    return re.match(r"^(argmax|greedy|sample|beam_search|beam|ARGMAX|GREEDY|SAMPLE|BEAM_SEARCH|BEAM"
                    r"|best_k|beam_var|var|beam_sample|BEST_K|BEAM_VAR|VAR|BEAM_SAMPLE)\b\s*(\(.*\))?\s*(.*)$", line)


def parse_decoder(src: str, text: str = "", offset: int = 0, filename: str = "<query>") -> DecoderSpec:
    """Parse ``argmax``/``sample(n=2, temperature=0.7)``/``beam(n=3)`` (keyword args only)."""
    try:
        node = parse_python(src.strip(), "eval").body  # type: ignore[attr-defined]
    except SyntaxError as exc:
        raise _err(f"bad decoder clause: {exc.msg}", text or src, offset, filename) from None
    if isinstance(node, ast.Name):
        name, kw = node.id, []
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name, kw = node.func.id, node.keywords
        if node.args:
            raise _err("decoder arguments must be keywords, e.g. beam(n=3)", text or src, offset, filename)
    else:
        raise _err("expected a decoder: argmax, sample(...) or beam(...)", text or src, offset, filename)
    name = name.lower() if name.isupper() else name  # ARGMAX, SAMPLE(n=2): the paper's upper case
    method = {"greedy": "argmax", "beam_search": "beam"}.get(name, name)
    if method in ("best_k", "beam_var", "var", "beam_sample"):
        raise _err(f"unknown decoder {name!r}: LMQL's {name} decoder is not supported by tether; "
                   "use argmax, sample(n=...) or beam(n=...)", text or src, offset, filename)
    if method not in ("argmax", "sample", "beam"):
        raise _err(f"unknown decoder {name!r}; expected argmax, sample or beam", text or src, offset, filename)
    args: dict[str, object] = {}
    for k in kw:
        if k.arg is None or k.arg in args:
            raise _err("decoder arguments must be distinct keywords, e.g. beam(n=3)", text or src, offset, filename)
        try:
            args[str(k.arg)] = ast.literal_eval(k.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise _err(f"decoder argument {k.arg!r} must be a constant", text or src, offset, filename) from None
    args = drop_lmql_runtime_args(method, args)
    try:
        check_decoder_args(method, args)
    except ArgumentError as exc:  # (a LimitError goes out as it is: it names the limit)
        raise _err(f"bad decoder clause: {exc}", text or src, offset, filename) from None
    return DecoderSpec(method, args)  # type: ignore[arg-type]


def parse_query(text: str, filename: str = "<query>") -> QueryAst:
    """Parse a query program (either surface) into a ``QueryAst``.

    Raises QuerySyntaxError with line:column and a caret on any syntax problem, and
    LimitError for a text longer than ``Limits.max_text_chars``.
    """
    if not isinstance(text, str):
        raise QuerySyntaxError(f"query text must be a string, not {type(text).__name__}")
    limits.check("max_text_chars", len(text), f"query text {filename}")
    nul = text.find("\0")
    if nul >= 0:
        raise _err("null byte in query text", text, nul, filename)
    lines = text.splitlines(keepends=True)
    offs = _line_offsets(text)
    n = len(lines)
    # 1. find top-level (column 0) clause lines
    decoder: DecoderSpec | None = None
    body_start, body_end = 0, n
    prelude: list[str] = []
    i = 0
    # Python before a decoder clause (imports, @query definitions, helpers): the first
    # column-0 decoder line whose preceding text is complete Python
    j = _prelude_end(lines)
    if j < n and _decoder_head(lines[j].rstrip("\n")) and not lines[j][0].isspace():
        m = _decoder_head(lines[j].rstrip("\n"))
        assert m is not None
        rest = m.group(3)
        head = lines[j][: len(lines[j].rstrip("\n")) - len(rest)].strip()
        # "argmax" alone, or the old one-line form "argmax "..."" (rest starts a string)
        if not rest or rest[0] in "\"'" or rest.startswith("#"):
            decoder = parse_decoder(head, text, offs[j], filename)
            prelude = lines[:j]
            i = j + 1
            body_start = i
            if rest and rest[0] in "\"'":
                # body begins on the decoder line: blank out the decoder head, keep columns
                lines = [*lines[:j], " " * len(head) + lines[j][len(head):], *lines[j + 1 :]]
                body_start = j
    # clauses after the body
    clauses: list[tuple[str, int, str]] = []  # (keyword, line index, rest of line)
    k = body_start
    while k < n:
        line = lines[k]
        if line[:1] and not line[0].isspace():
            m = _CLAUSE.match(line.rstrip("\n"))
            if m and not (m.group(1).lower() == "from" and re.match(r"^\s*[\w.]+\s+import\b", m.group(2))):
                if body_end == n:
                    body_end = k
                clauses.append((m.group(1), k, m.group(2)))
        k += 1
    # clause texts: from the keyword to the next clause
    model: str | None = None
    model_expr: ast.expr | None = None
    where: ast.expr | None = None
    distribute: tuple[str, ast.expr] | None = None
    for ci, (kw_written, li, _rest) in enumerate(clauses):
        kw = kw_written.lower()
        end = clauses[ci + 1][1] if ci + 1 < len(clauses) else n
        start_off = offs[li] + len(kw)
        chunk = text[start_off : offs[end]]
        src = textwrap.dedent(" " * 0 + chunk).strip()
        pad = chunk.find(src[:1]) if src else 0
        at = start_off + max(pad, 0)
        if kw == "from":
            if not src:
                raise _err('expected a model after from, e.g. from "embedded"', text, at, filename)
            expr = _parse_expr(src, text, at, filename, "from clause")
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                model = expr.value
            elif isinstance(expr, ast.Constant):
                raise _err("the model in the from clause must be a string or an expression giving a model",
                           text, at, filename)
            else:  # lmql.model("...", ...), a variable, any expression: evaluated when the query runs
                model_expr = expr
        elif kw == "where":
            where = _parse_expr(src, text, at, filename, "where clause")
        else:  # distribute VAR over EXPR | distribution VAR in EXPR
            m = re.match(r"^([A-Za-z_]\w*)\s+(over|in|OVER|IN)\s+(.*)$", src, re.S)
            if not m:
                raise _err(f"expected '{kw} VAR {'over' if kw == 'distribute' else 'in'} EXPR'", text, at, filename)
            expr = _parse_expr(m.group(3).strip(), text, at + m.start(3), filename, f"{kw} clause")
            distribute = (m.group(1), expr)
    # 2. body text: dedent (paper form indents it under the decoder), keep line numbers
    body_lines = lines[body_start:body_end]
    body_txt = "".join(body_lines)
    ded = textwrap.dedent(body_txt)
    indent = _common_indent(body_lines)
    ded, inline_dist = split_inline_distribution(ded)
    if inline_dist is not None:
        if distribute is not None:
            raise _err("two distribution clauses", text, offs[body_start + inline_dist[2]], filename)
        row = body_start + inline_dist[2]
        at = offs[row] + indent + inline_dist[3]
        distribute = (inline_dist[0], _parse_expr(inline_dist[1], text, at, filename, "distribution clause"))
    body = parse_body(ded, text=text, line0=body_start, col0=indent, filename=filename)
    return QueryAst(text, body, decoder, model, where, distribute, filename, "".join(prelude), model_expr)


_PRELUDE_TRIES = 16


def _prelude_end(lines: list[str]) -> int:
    """Index of the first column-0 decoder line that Python text may precede (imports,
    definitions, ``@query`` functions); ``len(lines)`` when there is none."""
    tries = 0
    for j, line in enumerate(lines):
        if not line[:1] or line[0].isspace() or line.startswith("#"):
            continue
        m = _decoder_head(line.rstrip("\n"))
        if m is None or (m.group(3) and m.group(3)[0] not in "\"'#"):
            continue
        if j == 0 or not "".join(lines[:j]).strip():
            return j
        tries += 1
        if tries > _PRELUDE_TRIES:
            break
        try:
            pre = parse_python("".join(lines[:j]), "exec")
        except SyntaxError:
            continue
        # definitions and imports only: a prompt statement or a call means the body began
        if all(not isinstance(st, ast.Expr) for st in pre.body):  # type: ignore[attr-defined]
            return j
        break
    return len(lines)


def split_inline_distribution(src: str) -> tuple[str, tuple[str, str, int, int] | None]:
    """Find ``"... [X]" distribution X in EXPR`` (or ``distribute X over EXPR``) written
    after a prompt statement; blank it out of ``src`` (same columns).

    Returns (src, (var, expr text, line index, column of the expression) or None).
    """
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src, None
    prev_string, depth, stmt_start = False, 0, True
    for k, tok in enumerate(toks):
        tt, s = tok.type, tok.string
        if tt in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tt in (tokenize.NEWLINE, tokenize.ENDMARKER):
            prev_string, stmt_start = False, True
            continue
        if tt == tokenize.OP and s in "([{":
            depth += 1
        elif tt == tokenize.OP and s in ")]}":
            depth -= 1
        if (tt == tokenize.NAME and s.lower() in ("distribution", "distribute") and prev_string and depth == 0
                and k + 2 < len(toks) and toks[k + 1].type == tokenize.NAME
                and toks[k + 2].string.lower() in ("in", "over")):
            row, col = tok.start
            end = next((t.start for t in toks[k:] if t.type in (tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.COMMENT)),
                       (row, len(src)))
            lines = src.splitlines(keepends=True)
            if end[0] != row:  # a clause over several lines: leave it to the parser
                return src, None
            line = lines[row - 1]
            ecol = toks[k + 2].end[1]
            expr = line[ecol : end[1]]
            lines[row - 1] = line[:col] + " " * (end[1] - col) + line[end[1]:]
            lead = len(expr) - len(expr.lstrip())
            return "".join(lines), (toks[k + 1].string, expr.strip(), row - 1, ecol + lead)
        prev_string = tt == tokenize.STRING and (stmt_start or prev_string) and depth == 0
        stmt_start = tt == tokenize.OP and s == ":" and depth == 0
    return src, None


def _common_indent(lines: list[str]) -> int:
    ind = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    return min(ind) if ind else 0


def _parse_expr(src: str, text: str, at: int, filename: str, what: str) -> ast.expr:
    """Parse a clause's expression; its line numbers are the query text's."""
    try:
        expr: ast.expr = parse_python("(" + src + "\n)", "eval").body  # type: ignore[attr-defined]
        ast.increment_lineno(expr, text.count("\n", 0, at))
        return expr
    except SyntaxError as exc:
        off = at
        if exc.lineno is not None and exc.offset is not None:
            sub = src.splitlines(keepends=True)
            ln = exc.lineno - 1
            col = exc.offset - (2 if exc.lineno == 1 else 1)
            off = at + sum(len(x) for x in sub[:ln]) + max(col, 0)
            # the clause text was dedented: map back approximately by searching the line
        raise _err(f"invalid syntax in {what}: {exc.msg}", text, min(off, len(text)), filename) from None


def rewrite_inline_where(src: str) -> str:
    """Turn ``"..." where COND`` statements into ``"..." if   COND else MARK`` (same columns).

    Python cannot parse the inline ``where``; this keeps every column of the source so
    errors and AST positions still point into the user's text.
    """
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src  # let ast.parse report the problem
    lines = src.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (row, col, length, replacement)
    stmt_start = True
    prev_string = False
    pending_where: tuple[int, int] | None = None
    depth = 0
    last_end = (1, 0)
    for tok in toks:
        tt, s = tok.type, tok.string
        if tt in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tt == tokenize.NEWLINE or tt == tokenize.ENDMARKER:
            if pending_where is not None:
                row, col = last_end  # after the condition, before any comment
                edits.append((row, col, 0, f" else {WHERE_MARK}"))
                pending_where = None
            stmt_start, prev_string = True, False
            continue
        if tt == tokenize.OP and s in "([{":
            depth += 1
        elif tt == tokenize.OP and s in ")]}":
            depth -= 1
        if tt == tokenize.STRING and (stmt_start or prev_string) and depth == 0:
            prev_string = True
        elif tt == tokenize.NAME and s == "where" and prev_string and depth == 0 and pending_where is None:
            row, col = tok.start
            edits.append((row, col, 5, "if   "))
            pending_where = (row, col)
            prev_string = False
        else:
            prev_string = False
        stmt_start = tt == tokenize.OP and s == ":" and depth == 0
        last_end = tok.end
    for row, col, length, rep in sorted(edits, reverse=True):
        ln = lines[row - 1]
        lines[row - 1] = ln[:col] + rep + ln[col + length :]
    return "".join(lines)


_HOLE_HEAD = re.compile(r"\[\s*(?:@[^\]\[:]*?\s+)*[A-Za-z_]\w*\s*:")


def fix_hole_quotes(src: str) -> str:
    """Let a typed hole use the quote of its own prompt string: ``"[NAME: r"[a-z]+"]"``.

    Python would end the prompt string at the hole's first quote; inside a one-line
    string, a hole type's quotes equal to the string's delimiter are swapped for the other
    kind (same columns). A hole using both kinds of quote is left as written.
    """
    if '"' not in src and "'" not in src:
        return src
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "#":
            nl = src.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if c not in "\"'":
            i += 1
            continue
        if src.startswith(c * 3, i):  # triple-quoted: no conflict possible; skip it
            end = src.find(c * 3, i + 3)
            while end > 0 and src[end - 1] == "\\":
                end = src.find(c * 3, end + 1)
            i = n if end < 0 else end + 3
            continue
        q, alt = c, "'" if c == '"' else '"'
        i += 1
        eol = src.find("\n", i)
        eol = n if eol < 0 else eol
        unclosed = False  # a hole closes on its line; one failed scan means none later does
        while i < n and src[i] != q and src[i] != "\n":
            if src[i] == "\\":
                i += 2
                continue
            if src[i] == "[" and not unclosed and not src.startswith("[[", i) and _HOLE_HEAD.match(src, i):
                end = _scan_balanced(src, i + 1, "]", eol)
                unclosed = end < 0
                seg = src[i : end] if end > 0 else ""
                if q in seg and alt not in seg:
                    for k in range(i, end):
                        if src[k] == q:
                            out[k] = alt
                    i = end
                    continue
            i += 1
        i += 1
    return "".join(out)


def parse_body(src: str, *, text: str | None = None, line0: int = 0, col0: int = 0,
               filename: str = "<query>") -> ast.Module:
    """Parse a (dedented) query body into a Python AST with inline ``where`` rewritten.

    ``line0``/``col0`` map positions back into ``text`` for error messages; the returned
    AST's line numbers are shifted by ``line0``.
    """
    text = src if text is None else text
    rewritten = rewrite_inline_where(fix_hole_quotes(src))
    try:
        mod = parse_python(rewritten, "exec", filename)
        assert isinstance(mod, ast.Module)
    except SyntaxError as exc:
        offs = _line_offsets(text)
        ln = (exc.lineno or 1) - 1 + line0
        col = (exc.offset or 1) - 1 + (col0 if text is not src else 0)
        off = offs[min(ln, len(offs) - 1)] + col
        raise _err(f"invalid syntax: {exc.msg}", text, min(off, len(text)), filename) from None
    if line0:
        ast.increment_lineno(mod, line0)
    # validate prompt strings now, so template errors surface at parse time
    for node in _prompt_scope(mod):
        s = prompt_string(node)
        if s is not None:
            check_template(s[0], s[1], text, filename, line0=0, col0=col0 if text is not src else 0)
    return mod


def _prompt_scope(tree: ast.AST) -> list[ast.AST]:
    """Nodes of the query body itself: not inside nested functions, classes or lambdas
    (their strings are docstrings or nested queries, parsed when those run)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                todo.append(child)
    return out


def prompt_string(node: ast.AST) -> tuple[str, ast.AST] | None:
    """If ``node`` is a prompt statement (``Expr`` of a str, or the rewritten inline-where
    form), return (string, string node)."""
    if not isinstance(node, ast.Expr):
        return None
    v = node.value
    if isinstance(v, ast.IfExp) and isinstance(v.orelse, ast.Name) and v.orelse.id == WHERE_MARK:
        v = v.body
    if isinstance(v, ast.Constant) and isinstance(v.value, str):
        return v.value, v
    return None


def check_template(s: str, node: ast.AST, text: str, filename: str, line0: int = 0, col0: int = 0) -> list[Part]:
    try:
        return parse_template(s)
    except ValueError as exc:
        msg, rel = exc.args[0], exc.args[1] if len(exc.args) > 1 else 0
        offs = _line_offsets(text)
        lineno = getattr(node, "lineno", 1) - 1 + line0
        col = getattr(node, "col_offset", 0) + col0
        base = offs[min(lineno, len(offs) - 1)] + col
        # point inside the literal when it is a one-line string without escapes
        seg = text[base : base + len(s) + 8]
        q = 1 if seg[:1] in "\"'" else (3 if seg[:3] in ('"""', "'''") else 0)
        inner = base + q + rel if "\n" not in s and "\\" not in seg[: q + rel + 1] else base
        raise _err(msg, text, min(inner, len(text)), filename) from None
