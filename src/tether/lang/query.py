"""Queries as Python objects: ``load_query(text)``, ``run_query(text)`` and ``@query``.

``@query`` turns a Python function into a query. Its body is the query when it holds
prompt statements; a function whose body is only a docstring uses the docstring as the
query text (LMQL's ``'''lmql ...'''`` form, which also allows inline ``where``)::

    @query
    def pick(options: list):
        '''lmql
        "Pick one of {options}: [CHOICE]" where CHOICE in options
        return CHOICE
        '''

Called outside a running query, a query runs (on the model given to ``query``/``run``,
else the one its ``from`` clause names, else the embedded model) and returns a
``QueryResult``. Called inside a running query it returns a ``NestedCall``, which a
hole uses as its type (``[PLANET: pick(["Mercury", "Venus"])]``): the nested query runs
in the same trace; its return value (or, without ``return``, its text) fills the hole.

A query is Python code run with the caller's rights: load and run trusted query text
only (the server never executes query text from a request). ``limits=`` on ``run`` and
``run_query`` runs the whole query (parsing included for ``run_query``) under those
`tether.limits.Limits`; decoder arguments are checked (`ArgumentError`, `LimitError`).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import linecache
import sys
import textwrap
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.errors import ArgumentError, ModelError, QuerySyntaxError
from tether.lang.result import QueryResult
from tether.lang.runtime import ACTIVE, NestableQuery, NestedCall, Program, Runtime
from tether.lang.syntax import (
    DecoderSpec,
    QueryAst,
    check_decoder_args,
    drop_lmql_runtime_args,
    parse_body,
    parse_decoder,
    parse_query,
)
from tether.limits import Limits
from tether.limits import limits as limits_in_force

__all__ = ["ModelSpec", "Query", "arun_query", "load_query", "query", "run_query"]

_TEXT_COUNTER = 0


def _decoder(spec: DecoderSpec | str | None, extra: dict[str, Any]) -> DecoderSpec | None:
    if spec is None and not extra:
        return None
    if spec is None:
        d = DecoderSpec("argmax", {})
    elif isinstance(spec, str):
        d = parse_decoder(spec)
    elif isinstance(spec, DecoderSpec):
        if spec.method not in ("argmax", "sample", "beam"):
            raise ArgumentError("decoder", spec.method, "'argmax', 'sample' or 'beam'")
        d = DecoderSpec(spec.method, dict(spec.args))
    else:
        raise ArgumentError("decoder", spec, "None, a decoder clause such as 'beam(n=2)', or a DecoderSpec")
    d.args.update(extra)
    d.args = drop_lmql_runtime_args(d.method, d.args)
    check_decoder_args(d.method, d.args)
    return d


def _note(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass
class ModelSpec:
    """A model named the way LMQL programs name one: ``lmql.model("name", **options)``.

    ``load()`` gives the tether model of that name; a name tether cannot load (a hosted
    model, ``local:gpt2``) becomes the embedded model, and the substitution is said on
    stderr (``substituted`` tells it too). Options tether has no use for (``endpoint=``,
    ``cuda=``, ``tokenizer=``...) are kept and named in that note; ``n_ctx`` and
    ``chat_template`` are passed on to a model tether loads.
    """

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    substituted: str = ""

    def load(self, warn: Callable[[str], None] | None = None) -> Any:
        from tether.models import load_model  # noqa: PLC0415 (heavy backends load lazily)

        say = warn or _note
        ignored = sorted(self.options)
        try:
            m = load_model(self.name)
        except ModelError as exc:
            self.substituted = (f"model {self.name!r} is not one tether can load "
                                f"({exc.args[0].splitlines()[0]}); using the embedded model")
            say(f"note: {self.substituted}" + (f"; options ignored: {', '.join(ignored)}" if ignored else ""))
            return load_model("embedded")
        if ignored:
            say(f"note: lmql.model({self.name!r}): options ignored by tether: {', '.join(ignored)}")
        return m


def resolve_model(spec: Any, fallback_from: str | None = None, *, warn: Callable[[str], None] | None = None) -> Any:
    """A model object from a model, a spec string, or the ``from`` clause.

    A ``from`` clause naming a model tether cannot load (``"local:gpt2"`` in examples)
    falls back to the embedded model, with a warning; an explicit spec never falls back.
    """
    from tether.models import load_model  # noqa: PLC0415 (heavy backends load lazily)

    if isinstance(spec, ModelSpec):
        return spec.load(warn)
    if spec is not None and not isinstance(spec, str):
        return spec
    if spec is not None:
        return load_model(spec)
    if fallback_from is not None:
        try:
            return load_model(fallback_from)
        except ModelError as exc:
            (warn or (lambda m: print(m, file=sys.stderr)))(
                f"note: from {fallback_from!r}: {exc.args[0].splitlines()[0]}; using the embedded model")
    return load_model("embedded")


class Query(NestableQuery):
    """A compiled query: call it (or ``run``) with the query's arguments."""

    def __init__(self, qast: QueryAst, *, name: str = "query", params: list[str] | None = None,
                 defaults: dict[str, Any] | None = None, env: dict[str, Any] | None = None,
                 model: Any = None, decoder: DecoderSpec | str | None = None, **decoder_args: Any) -> None:
        self.qast = qast
        self.name = name
        self.params = list(params or [])
        self.defaults = dict(defaults or {})
        self.model = model
        self.decoder = _decoder(decoder, decoder_args) or qast.decoder
        self.program = Program(qast, self.params, env, name)

    def bind_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if len(args) > len(self.params):
            raise TypeError(f"query {self.name} takes {len(self.params)} arguments, got {len(args)}")
        out = dict(self.defaults)
        out.update(zip(self.params, args, strict=False))
        for k, v in kwargs.items():
            if k not in self.params:
                raise TypeError(f"query {self.name} has no parameter {k!r} (parameters: {self.params})")
            out[k] = v
        missing = [p for p in self.params if p not in out]
        if missing:
            raise TypeError(f"query {self.name} is missing arguments: {', '.join(missing)}")
        return out

    def nested(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NestedCall:
        return NestedCall(self, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if ACTIVE.get() is not None:
            return self.nested(args, kwargs)
        return self.run(*args, **kwargs)

    def run(self, *args: Any, model: Any = None, decoder: DecoderSpec | str | None = None,
            input_fn: Callable[[str], str] | None = None, max_tokens: int | None = None,
            seed: int | None = None, chat_roles: dict[str, str] | None = None,
            limits: Limits | None = None, **kwargs: Any) -> QueryResult:
        """Run the query; returns a ``QueryResult`` (``.results`` holds all n branches).

        ``decoder`` overrides the query's decoder clause (e.g. ``"beam(n=2)"``);
        ``input_fn`` answers ``await input()`` (default: the built-in ``input``);
        ``limits`` runs the query under those `tether.limits.Limits`.
        """
        if limits is not None and not isinstance(limits, Limits):
            raise ArgumentError("limits", limits, "None or a tether.limits.Limits")
        with limits_in_force(limits) if limits is not None else nullcontext():
            return self._run(args, model, decoder, input_fn, max_tokens, seed, chat_roles, kwargs)

    async def arun(self, *args: Any, model: Any = None, decoder: DecoderSpec | str | None = None,
                   input_fn: Callable[[str], str] | None = None, max_tokens: int | None = None,
                   seed: int | None = None, chat_roles: dict[str, str] | None = None,
                   limits: Limits | None = None, **kwargs: Any) -> QueryResult:
        """`run` without blocking the event loop: the same arguments and result.

        The query runs on its model's worker thread (`tether.program.aio`), queued behind
        the other async calls on that model; ``input_fn`` is called on that thread.
        """
        from tether.program.aio import run_on_model  # noqa: PLC0415

        if limits is not None and not isinstance(limits, Limits):
            raise ArgumentError("limits", limits, "None or a tether.limits.Limits")

        def resolve() -> Any:
            with limits_in_force(limits) if limits is not None else nullcontext():
                return self._model(args, model, kwargs)

        m = await asyncio.to_thread(resolve)
        return await run_on_model(m, self.run, *args, model=m, decoder=decoder, input_fn=input_fn,
                                  max_tokens=max_tokens, seed=seed, chat_roles=chat_roles, limits=limits,
                                  **kwargs)

    def _model(self, args: tuple[Any, ...], model: Any, kwargs: dict[str, Any]) -> Any:
        """The model a run uses: given, the query's, the running query's, the ``from``
        clause's, else the embedded model."""
        active = ACTIVE.get()
        m = model or self.model or (active.model if active is not None else None)
        from_clause = self.qast.model
        if m is None and self.qast.model_expr is not None:
            # ``from lmql.model("...")``, a variable, any expression: evaluated now
            line = getattr(self.qast.model_expr, "lineno", 0)
            try:
                v = eval(compile(ast.Expression(self.qast.model_expr), self.qast.filename, "eval"),  # noqa: S307
                         self.program.environment(None), self.bind_args(args, kwargs))
            except Exception as exc:
                raise ModelError(f"the from clause at line {line} of {self.qast.filename} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
            if isinstance(v, str):
                from_clause = v
            elif isinstance(v, ModelSpec) or hasattr(v, "costs"):  # a model object (any backend)
                m = v
            else:
                raise ModelError(f"the from clause at line {line} of {self.qast.filename} gave "
                                 f"{type(v).__name__}, not a model name, lmql.model(...) or a model")
        return resolve_model(m, from_clause)

    def _run(self, args: tuple[Any, ...], model: Any, decoder: DecoderSpec | str | None,
             input_fn: Callable[[str], str] | None, max_tokens: int | None, seed: int | None,
             chat_roles: dict[str, str] | None, kwargs: dict[str, Any]) -> QueryResult:
        m = self._model(args, model, kwargs)
        dec = _decoder(decoder, {}) or self.decoder or DecoderSpec("argmax", {})
        rt = Runtime(m, dec, input_fn=input_fn, max_tokens=max_tokens, seed=seed, chat_roles=chat_roles)
        bound = self.bind_args(args, kwargs)
        token = ACTIVE.set(None)
        try:
            return rt.run(self.program, bound)
        finally:
            ACTIVE.reset(token)

    def __repr__(self) -> str:
        return f"<tether query {self.name}({', '.join(self.params)})>"


def load_query(source: str | Path, *, filename: str | None = None, params: list[str] | None = None,
               env: dict[str, Any] | None = None, **options: Any) -> Query:
    """Parse and compile a query program from text or a ``.lmql`` file path.

    Free names that the body reads but never assigns are not parameters unless listed in
    ``params`` (they may also be supplied through ``env``).
    """
    if not isinstance(source, str | Path):
        raise ArgumentError("source", source, "query text (a str) or the path of a .lmql file")
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith(".lmql")
                                   and Path(source).exists()):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise QuerySyntaxError(f"query file {path} is not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise QuerySyntaxError(f"cannot read query file {path}: {exc.strerror or exc}") from None
        filename = filename or str(path)
    else:
        text = str(source)
    if filename is None or filename.startswith("<"):
        # a unique name known to linecache: tracebacks and nested @query docstrings
        # (read back from source) work for queries given as text
        global _TEXT_COUNTER
        _TEXT_COUNTER += 1
        filename = f"<query-{_TEXT_COUNTER}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    qast = parse_query(text, filename)
    name = "query" if filename.startswith("<") else Path(filename).stem
    return Query(qast, name=name, params=params, env=env, **options)


def run_query(source: str | Path, *args: Any, model: Any = None, **kwargs: Any) -> QueryResult:
    """``load_query(source).run(*args, model=model, **kwargs)``; free variables of the body
    can be passed as keyword arguments (they become parameters)."""
    run_opts = {k: kwargs.pop(k) for k in ("decoder", "input_fn", "max_tokens", "seed", "chat_roles") if k in kwargs}
    lim = kwargs.pop("limits", None)
    if lim is not None and not isinstance(lim, Limits):
        raise ArgumentError("limits", lim, "None or a tether.limits.Limits")
    with limits_in_force(lim) if lim is not None else nullcontext():
        q = load_query(source, params=list(kwargs))
        return q.run(*args, model=model, **run_opts, **kwargs)


async def arun_query(source: str | Path, *args: Any, model: Any = None, **kwargs: Any) -> QueryResult:
    """`run_query` without blocking the event loop (parsing and the run happen on worker
    threads; the run is queued on its model as `Query.arun`)."""
    run_opts = {k: kwargs.pop(k) for k in ("decoder", "input_fn", "max_tokens", "seed", "chat_roles") if k in kwargs}
    lim = kwargs.pop("limits", None)
    if lim is not None and not isinstance(lim, Limits):
        raise ArgumentError("limits", lim, "None or a tether.limits.Limits")

    def load() -> Query:
        with limits_in_force(lim) if lim is not None else nullcontext():
            return load_query(source, params=list(kwargs))

    q = await asyncio.to_thread(load)
    return await q.arun(*args, model=model, limits=lim, **run_opts, **kwargs)


_MARKERS = ("lmql", "tether", "query")


def _function_query_text(fn: Callable[..., Any]) -> tuple[str, str]:
    """(query text, filename) of a decorated function: docstring-only body → docstring.

    The text is padded with blank lines so that its line numbers are the file's: syntax
    errors and tracebacks point at the right line of the source file.
    """
    doc = fn.__doc__
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        src = None
    filename = getattr(fn.__code__, "co_filename", "<query>")
    # getsource starts at the first decorator, which is co_firstlineno: src line k is file line base + k
    base = max(getattr(fn.__code__, "co_firstlineno", 1) - 1, 0)
    pad = 0
    if src is not None:
        mod = ast.parse(src)
        fdef = next(n for n in ast.walk(mod) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
        stmts = fdef.body
        first_stmt = stmts[0]
        marked = (isinstance(first_stmt, ast.Expr) and isinstance(first_stmt.value, ast.Constant)
                  and isinstance(first_stmt.value.value, str)
                  and first_stmt.value.value.lstrip(" ").split("\n", 1)[0].strip().lower() in _MARKERS)
        # a body that is only a docstring written over several lines is the query text,
        # with or without the marker (a one-line string is a prompt statement)
        marked = marked or (len(stmts) == 1 and isinstance(first_stmt, ast.Expr)
                            and isinstance(first_stmt.value, ast.Constant) and isinstance(first_stmt.value.value, str)
                            and (first_stmt.end_lineno or first_stmt.lineno) > first_stmt.lineno)
        if not (len(stmts) == 1 and marked):
            lines = src.splitlines(keepends=True)
            first = stmts[1] if marked and len(stmts) > 1 else stmts[0]
            body = textwrap.dedent("".join(lines[first.lineno - 1 :]))
            return "\n" * (base + first.lineno - 1) + body, filename
        # the docstring as written (escapes like \n stay escapes inside query strings)
        seg = ast.get_source_segment(src, first_stmt.value)  # type: ignore[attr-defined]
        if seg:
            raw = seg.lstrip("rRuUbB")
            q = raw[:3] if raw[:3] in ('"""', "'''") else raw[:1]
            doc = raw[len(q) : len(raw) - len(q)]
            pad = base + first_stmt.lineno - 1  # the docstring's first line
    if doc is None:
        raise TypeError(f"@query function {fn.__name__} has neither a query body nor a query docstring")
    lines = doc.split("\n")
    if lines and lines[0].strip().lower() in _MARKERS:
        lines = lines[1:]
        pad += 1
    body = textwrap.dedent("\n".join(lines))
    return "\n" * pad + body.rstrip() + "\n", filename


def query(fn: Callable[..., Any] | str | None = None, /, *, model: Any = None,
          decoder: DecoderSpec | str | None = None, **decoder_args: Any) -> Any:
    """Decorator (or function) making a query from a Python function or query text.

    ``@query``, ``@query(model="embedded", decoder="beam(n=2)")`` or ``query("...text...")``.
    """
    if fn is None:
        return lambda f: query(f, model=model, decoder=decoder, **decoder_args)
    if isinstance(fn, str):
        return load_query(fn, model=model, decoder=decoder, **decoder_args)
    text, filename = _function_query_text(fn)
    sig = inspect.signature(fn)
    params = list(sig.parameters)
    defaults = {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
    qast = parse_query(text, filename)
    if qast.decoder is None and qast.model is None and qast.where is None and qast.distribute is None:
        qast.body = parse_body(text, filename=filename)
    env = dict(fn.__globals__)
    if fn.__closure__:
        env.update({k: c.cell_contents for k, c in zip(fn.__code__.co_freevars, fn.__closure__, strict=True)})
    q = Query(qast, name=fn.__name__, params=params, defaults=defaults, env=env, model=model,
              decoder=decoder, **decoder_args)
    q.__doc__ = fn.__doc__
    q.__wrapped__ = fn  # type: ignore[attr-defined]
    return q
