"""Compile a query body into a Python generator function.

Each prompt statement becomes a sequence of ``yield`` events that the runtime answers::

    "Q: [JOKE]\\nA: {x.upper()}"   ──►   yield ("text", "Q: ")
                                        JOKE = yield from __tether_hole__("JOKE", None, (), 0, "\\nA: ", locals())
                                        yield ("text", "\\nA: ")
                                        yield ("text", __tether_str__(x.upper()))

``await input()`` becomes ``(yield ("input", ...))`` and any other ``await e`` becomes
``(yield ("await", e))``; the end of the body (and every ``return``) yields
``("end", locals())`` so the runtime sees the final variables. Strings inside nested
``def``/``class`` bodies are left alone (docstrings, nested queries). The body keeps the
user's line numbers, so Python tracebacks point into the query text.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from tether.errors import QuerySyntaxError
from tether.lang.syntax import (
    WHERE_MARK,
    Expr,
    Hole,
    Role,
    Text,
    parse_python,
    parse_template,
    prompt_string,
)

HOLE_FN = "__tether_hole__"
STR_FN = "__tether_str__"


@dataclass
class CompiledBody:
    """The generator function's code plus what the runtime needs to interpret its events.

    Attributes:
        code: a module code object defining ``__tether_query__(params...)``.
        inline_where: per prompt-statement id, its inline ``where`` expression.
        hole_names: every hole name in the body (to tell future holes apart).
    """

    code: Any
    inline_where: dict[int, ast.expr] = field(default_factory=dict)
    hole_names: frozenset[str] = frozenset()
    stmt_holes: dict[int, frozenset[str]] = field(default_factory=dict)


def copy_ast(tree: ast.AST) -> ast.AST:
    """A deep copy of an AST without recursion (``copy.deepcopy`` recurses several frames
    per level of the tree)."""
    root = type(tree)()
    todo: list[tuple[ast.AST, ast.AST]] = [(tree, root)]
    while todo:
        src, dst = todo.pop()
        for name in (*src._fields, *src._attributes):
            if not hasattr(src, name):
                continue
            v = getattr(src, name)
            if isinstance(v, ast.AST):
                c = type(v)()
                todo.append((v, c))
                setattr(dst, name, c)
            elif isinstance(v, list):
                out: list[Any] = []
                for x in v:
                    if isinstance(x, ast.AST):
                        c = type(x)()
                        todo.append((x, c))
                        out.append(c)
                    else:
                        out.append(x)
                setattr(dst, name, out)
            else:
                setattr(dst, name, v)
    return root


def _y(value: ast.expr) -> ast.Expr:
    return ast.Expr(ast.Yield(value))


def _tuple(*elts: ast.expr) -> ast.Tuple:
    return ast.Tuple(list(elts), ast.Load())


def _const(v: Any) -> ast.Constant:
    return ast.Constant(v)


def _relocate(tree: ast.AST, ref: ast.AST) -> None:
    """Give every node of ``tree`` the position of ``ref`` (tracebacks point at the prompt)."""
    for sub in ast.walk(tree):
        if "lineno" in sub._attributes:
            for a in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                setattr(sub, a, getattr(ref, a, 1 if "line" in a else 0))


class _Transformer(ast.NodeTransformer):
    def __init__(self, filename: str) -> None:
        self.inline_where: dict[int, ast.expr] = {}
        self.hole_names: set[str] = set()
        self.stmt_holes: dict[int, frozenset[str]] = {}
        self.filename = filename

    # do not descend into nested scopes: their strings are not prompts
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return node

    def visit_Await(self, node: ast.Await) -> ast.AST:
        inner = self.visit(node.value)
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "input":
            args = inner.args[0] if inner.args else _const("")
            return ast.copy_location(ast.Yield(_tuple(_const("input"), args)), node)
        return ast.copy_location(ast.Yield(_tuple(_const("await"), inner)), node)

    def visit_Return(self, node: ast.Return) -> ast.AST | list[ast.stmt]:
        value = self.visit(node.value) if node.value is not None else _const(None)
        tmp = ast.Name("__tether_ret__", ast.Store())
        out = [
            ast.Assign([tmp], value),
            _y(_tuple(_const("end"), ast.Call(ast.Name("locals", ast.Load()), [], []), ast.Name("__tether_ret__", ast.Load()),
                      _const(node.value is not None))),
            ast.Return(ast.Name("__tether_ret__", ast.Load())),
        ]
        for s in out:
            _relocate(s, node)
        return out

    def visit_Expr(self, node: ast.Expr) -> ast.AST | list[ast.stmt]:
        ps = prompt_string(node)
        if ps is None:
            return self.generic_visit(node)
        text, str_node = ps
        stmt_id = len(self.inline_where)
        if isinstance(node.value, ast.IfExp) and isinstance(node.value.orelse, ast.Name) and node.value.orelse.id == WHERE_MARK:
            self.inline_where[stmt_id] = node.value.test
        else:
            self.inline_where[stmt_id] = None  # type: ignore[assignment]
        parts = parse_template(text)
        out: list[ast.stmt] = []
        for k, part in enumerate(parts):
            if isinstance(part, Text):
                out.append(_y(_tuple(_const("text"), _const(part.text))))
            elif isinstance(part, Role):
                out.append(_y(_tuple(_const("role"), _const(part.role))))
            elif isinstance(part, Expr):
                e = self.visit(parse_python(part.src, "eval").body)  # type: ignore[attr-defined]
                call = ast.Call(ast.Name(STR_FN, ast.Load()), [e], [])
                out.append(_y(_tuple(_const("text"), call)))
            elif isinstance(part, Hole):
                self.hole_names.add(part.name)
                post = ""
                for nxt in parts[k + 1 :]:
                    if isinstance(nxt, Text):
                        post = nxt.text
                    break
                typ = self.visit(parse_python(part.type_src, "eval").body) if part.type_src else _const(None)  # type: ignore[attr-defined]
                decs = _tuple(*[parse_python(d, "eval").body for d in part.decorators])  # type: ignore[attr-defined]
                call = ast.Call(
                    ast.Name(HOLE_FN, ast.Load()),
                    [_const(part.name), typ, decs, _const(stmt_id), _const(post),
                     ast.Call(ast.Name("locals", ast.Load()), [], [])],
                    [],
                )
                out.append(ast.Assign([ast.Name(part.name, ast.Store())], ast.YieldFrom(call)))
        self.stmt_holes[stmt_id] = frozenset(p.name for p in parts if isinstance(p, Hole))
        for s in out:
            _relocate(s, node)
        return out or [ast.copy_location(ast.Pass(), node)]


def compile_body(body: ast.Module, params: list[str], defaults: dict[str, object] | None = None,
                 filename: str = "<query>", text: str = "") -> CompiledBody:
    """Turn a parsed body into ``def __tether_query__(params): <generator body>``.

    Raises QuerySyntaxError (line:column in ``text``) for bodies Python's compiler refuses
    (e.g. a hole inside a comprehension, ``return`` with a value in a generator's ``finally``).
    """
    body = copy_ast(body)  # type: ignore[assignment]
    tr = _Transformer(filename)
    new_body: list[ast.stmt] = []
    for stmt in body.body:
        r = tr.visit(stmt)
        new_body.extend(r if isinstance(r, list) else [r])
    end = _y(_tuple(_const("end"), ast.Call(ast.Name("locals", ast.Load()), [], []), _const(None)))
    last_line = max([getattr(n, "end_lineno", 1) or 1 for n in ast.walk(body)] + [1])
    ref = ast.Pass(lineno=last_line, col_offset=0, end_lineno=last_line, end_col_offset=0)
    _relocate(end, ref)
    new_body.append(end)
    start = ast.Expr(ast.Yield(_tuple(_const("start"),)))
    _relocate(start, ast.Pass(lineno=1, col_offset=0, end_lineno=1, end_col_offset=0))
    new_body.insert(0, start)
    args = ast.arguments(
        posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None, kwonlyargs=[],
        kw_defaults=[], kwarg=None, defaults=[],
    )
    fn = ast.FunctionDef("__tether_query__", args, new_body, [], None)
    mod = ast.Module([fn], [])
    ast.fix_missing_locations(mod)
    try:
        code = compile(mod, filename, "exec", dont_inherit=True)
    except (RecursionError, MemoryError):
        raise QuerySyntaxError(f"the query body of {filename} is too deeply nested to compile") from None
    except SyntaxError as exc:
        offset = -1
        if text and exc.lineno:
            starts = [0, *(i + 1 for i, c in enumerate(text) if c == "\n")]
            offset = starts[min(exc.lineno, len(starts)) - 1] + max((exc.offset or 1) - 1, 0)
        raise QuerySyntaxError(f"invalid query body: {exc.msg}", text, min(offset, len(text)), filename) from None
    return CompiledBody(code, tr.inline_where, frozenset(tr.hole_names), tr.stmt_holes)
