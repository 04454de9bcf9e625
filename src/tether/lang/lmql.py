"""LMQL's Python surface on tether: what ``import lmql`` gives inside a query program.

The public home is `tether.compat.lmql` (which re-exports this module and can install it
as ``lmql`` for programs written against LMQL); inside a running query ``import lmql``
and ``from lmql import F`` always give this module, whatever else is installed.

* ``query`` — ``@lmql.query`` (also ``@lmql.query(model=..., decoder=...)`` and
  ``async def``): calling it outside a query returns the query's ``return`` value, or the
  `QueryResult` when the body returns nothing (a list of results for ``sample(n)`` /
  ``beam(n)`` with n > 1); an ``async def`` query returns a coroutine for ``await``;
  inside a query it is a nested query;
* ``run`` (``async``) / ``run_sync`` — run query text, free variables as keywords;
* ``F(template, constraints)`` — a one-prompt query as a function of its ``{names}``:
  returns the value of its last hole;
* ``model(name, **options)`` — a `ModelSpec`: a name tether cannot load becomes the
  embedded model, said on stderr;
* ``decorators.pre`` / ``post`` / ``streaming`` — variable decorators with LMQL's
  ``(variable, context)`` / ``(value, context)`` signatures (one argument works too);
* ``generate_sync`` / ``generate`` — plain completion with a token budget;
* ``LMQLResult`` — `QueryResult`.

LMTP (LMQL's model-serving protocol), ``lmql serve-model`` and hosted model names have
no analogue here: see docs/lmql.md for what is substituted.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from tether.errors import ArgumentError, TetherError
from tether.lang.query import ModelSpec, Query, load_query, resolve_model
from tether.lang.query import query as _tether_query
from tether.lang.result import QueryResult
from tether.lang.runtime import (
    ACTIVE,
    Context,
    NestableQuery,
    NestedCall,
    Variable,
    post,
    pre,
    streaming,
)
from tether.lang.surface import Surface, register
from tether.lang.syntax import Expr, Hole, parse_python, parse_template

__all__ = ["F", "LMQLResult", "LMQLUnsupportedError", "ModelSpec", "Variable", "decorators", "generate", "generate_sync", "model",
           "query", "query_builtins", "run", "run_sync"]

LMQLResult = QueryResult
decorators = types.SimpleNamespace(pre=pre, post=post, streaming=streaming)
context_type = Context


def lmql_value(result: QueryResult) -> Any:
    """What an LMQL query call returns: its ``return`` value, else the result (all
    branches as a list when the decoder keeps several)."""
    if result.returned:
        return result.return_value
    if len(result.results) > 1:
        return list(result.results)
    return result


class LMQLQuery(NestableQuery):
    """A `Query` called the LMQL way (see the module docstring)."""

    def __init__(self, q: Query, is_async: bool = False) -> None:
        self.query = q
        self.is_async = is_async
        self.__name__ = q.name
        self.__doc__ = q.__doc__
        self.__wrapped__ = getattr(q, "__wrapped__", None)

    @property
    def program(self) -> Any:  # nested use: a hole typed by this query
        return self.query.program

    def bind_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        return self.query.bind_args(args, kwargs)

    @property
    def name(self) -> str:
        return self.query.name

    def nested(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NestedCall:
        return self.query.nested(args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if ACTIVE.get() is not None:
            return self.query(*args, **kwargs)  # a NestedCall
        if self.is_async:
            async def _run() -> Any:
                return lmql_value(self.query.run(*args, **kwargs))

            return _run()
        return lmql_value(self.query.run(*args, **kwargs))

    def run(self, *args: Any, **kwargs: Any) -> QueryResult:
        """The tether `QueryResult` of a run (keywords as `Query.run`)."""
        return self.query.run(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<lmql query {self.query.name}({', '.join(self.query.params)})>"


def query(fn: Callable[..., Any] | str | None = None, /, *, model: Any = None, decoder: Any = None,
          **decoder_args: Any) -> Any:
    """``@lmql.query`` / ``@lmql.query(model=lmql.model("..."), decoder="argmax")`` /
    ``lmql.query("query text")``."""
    if fn is None:
        return lambda f: query(f, model=model, decoder=decoder, **decoder_args)
    # LMQL's keyword form (decoder="sample", n=2, temperature=0.7) is tether's too
    q = _tether_query(fn, model=model, decoder=decoder, **decoder_args)
    return LMQLQuery(q, inspect.iscoroutinefunction(fn) if callable(fn) else False)


def _free_names(template: str) -> list[str]:
    """Names a template's ``{expressions}`` read (the F function's parameters)."""
    holes = {p.name for p in parse_template(template) if isinstance(p, Hole)}
    out: list[str] = []
    for p in parse_template(template):
        if isinstance(p, Expr):
            for node in ast.walk(parse_python(p.src, "eval")):
                if (isinstance(node, ast.Name) and node.id not in holes and node.id not in out
                        and not hasattr(builtins, node.id)):
                    out.append(node.id)
    return out


def F(template: str, constraints: str | None = None, *, model: Any = None, decoder: Any = None) -> Callable[..., Any]:  # noqa: N802 - LMQL's name
    """A one-prompt query as a Python function: ``F("Summarize: {text}[S]", "len(TOKENS(S)) < 20")``.

    The function takes the template's ``{names}`` as keywords (or positionally, in order
    of first use) and returns the value of the template's last hole.
    """
    if not isinstance(template, str):
        raise ArgumentError("template", template, "a prompt template string such as 'Q: {q} A:[ANSWER]'")
    if constraints is not None and not isinstance(constraints, str):
        raise ArgumentError("constraints", constraints, "None or a where-clause string")
    holes = [p.name for p in parse_template(template) if isinstance(p, Hole)]
    if not holes:
        raise ArgumentError("template", template, "a template with at least one [HOLE]")
    text = repr(template) + (f" where {constraints}" if constraints else "") + "\n"
    text += f"return {holes[-1]}\n"
    q = load_query(text, params=_free_names(template), model=model, decoder=decoder)
    return LMQLQuery(q)


async def run(source: str, *args: Any, **kwargs: Any) -> Any:
    """Run query text (``await lmql.run(...)``); see `run_sync`."""
    return run_sync(source, *args, **kwargs)


def run_sync(source: str, *args: Any, model: Any = None, decoder: Any = None, **kwargs: Any) -> Any:
    """Run query text; free variables of the body come as keywords. Returns the value
    as an ``@lmql.query`` call does."""
    from tether.lang.query import run_query  # noqa: PLC0415

    opts = {"decoder": decoder} if decoder is not None else {}
    return lmql_value(run_query(source, *args, model=model, **opts, **kwargs))


def model(name: str, **options: Any) -> ModelSpec:
    """``lmql.model("name", **options)``: see `ModelSpec`."""
    if not isinstance(name, str):
        raise ArgumentError("model", name, "a model name string")
    return ModelSpec(name, dict(options))


def generate_sync(prompt: str, max_tokens: int = 32, model: Any = None, **options: Any) -> str:
    """Plain completion of ``prompt`` (argmax, or sampling with ``temperature=``)."""
    from tether.program import generate as _generate  # noqa: PLC0415

    m = resolve_model(model)
    temperature = options.pop("temperature", None)
    if options:
        raise ArgumentError("generate", sorted(options), "no other keywords (max_tokens, model, temperature)")
    g = _generate(m, prompt, None, max_tokens=max_tokens,
                  decoder="sample" if temperature else "argmax", temperature=temperature or None)
    return str(g.text)


async def generate(prompt: str, max_tokens: int = 32, model: Any = None, **options: Any) -> str:
    """``await lmql.generate(...)``: see `generate_sync`."""
    return generate_sync(prompt, max_tokens, model, **options)


_BUILTINS: dict[str, Any] | None = None


def query_builtins() -> dict[str, Any]:
    """The builtins of a query program: Python's, with ``import lmql`` resolving to
    this module (so LMQL programs import tether's surface, never a real LMQL)."""
    global _BUILTINS
    if _BUILTINS is None:
        real_import = builtins.__import__
        me = sys.modules[__name__]

        def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:  # noqa: A002
            if level == 0 and name == "lmql.decorators" and fromlist:
                return decorators
            if level == 0 and (name == "lmql" or name.startswith("lmql.")):
                return me
            return real_import(name, globals, locals, fromlist, level)

        _BUILTINS = {**vars(builtins), "__import__": _import}
    return _BUILTINS


# query programs see this module as ``lmql`` (the runtime reads it from `tether.lang.surface`)
register(Surface(sys.modules[__name__], query_builtins))


class LMQLUnsupportedError(TetherError, AttributeError):
    """A part of LMQL's Python API tether has no analogue for (named, with the line)."""


_UNSUPPORTED = {
    "serve": "LMTP model serving (`lmql serve-model`) has no analogue: tether loads models in-process",
    "serve_model": "LMTP model serving has no analogue: tether loads models in-process",
    "lmtp": "the LMTP protocol has no analogue: tether loads models in-process",
    "constraint": "custom constraint classes are not supported: use a Python function in the where clause "
                  "(checked on values, not masked)",
    "score": "lmql.score is not supported: use distribution clauses (`distribution X in [...]`)",
    "score_sync": "lmql.score_sync is not supported: use distribution clauses (`distribution X in [...]`)",
    "set_default_model": "set a default with Query.run(model=...) or a from clause",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    frame = sys._getframe(1)
    where = f" ({frame.f_code.co_filename}:{frame.f_lineno})"
    reason = _UNSUPPORTED.get(name, "not part of tether's LMQL surface (see docs/lmql.md)")
    raise LMQLUnsupportedError(f"lmql.{name}{where}: {reason}")
