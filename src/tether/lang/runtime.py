"""Run compiled queries: the interaction trace, holes, branches and their services.

A branch (``Execution``) drives one instance of the query's generator: text events extend
the trace, hole events pause it until the runtime decodes the hole. All that a branch's
future depends on is the list of answers it was given (hole values, user input), so a
branch is *re-played* from that list to fork it — the paper's assumption that program
code is pure and deterministic.

Holes are decoded through `tether.decoding` (``branches.py``: argmax and sample(n)
branches in lockstep, scripted beam search over control flow); black-box models (no
logits) send each hole to their server (``remote.py``).

Costs follow the paper (Tables 3–4): the backend counts model calls (forward passes);
decoding counts one generate call per decoded hole (or per scored ``distribute`` value),
billable prompt tokens at its start and the tokens it generated.
"""

from __future__ import annotations

import abc
import ast
import builtins
import contextvars
import dataclasses
import functools
import inspect
import sys
import types
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tether import limits
from tether.decoding.decoders import check_int, check_seed
from tether.decoding.logits import model_call
from tether.decoding.options import Settings
from tether.decoding.sampling import argmax, log_softmax
from tether.decoding.scoring import score_tokens
from tether.errors import ConstraintError, ModelError, TetherError, limited
from tether.grammar import Grammar
from tether.lang.branches import run_beam, run_lockstep
from tether.lang.compiler import HOLE_FN, STR_FN, CompiledBody, compile_body
from tether.lang.decorators import call_decorator
from tether.lang.holes import VocabInfo
from tether.lang.remote import decode_hole_remote
from tether.lang.result import HoleRecord, QueryResult, Segment
from tether.lang.semantics import (
    builtin_name,
    check_constraint,
    conjuncts,
    constraint_place,
    mentions,
)
from tether.lang.surface import surface
from tether.lang.syntax import DecoderSpec, QueryAst, check_decoder_args
from tether.program.generate import compile_output
from tether.program.outputs import OutputSpec, output_spec, regex_grammar, triggered_spec

if TYPE_CHECKING:
    from tether.lang.query import Query

ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("tether_lang_active", default=None)

DEFAULT_MAX_TOKENS = 128


@dataclass
class Variable:
    """What a ``pre`` decorator receives: the hole about to be decoded."""

    name: str
    scope: dict[str, Any]


def pre(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a *pre* variable decorator: called with a ``Variable`` before the
    hole is decoded; returning anything but that variable supplies the hole's value."""
    fn.__tether_pre__ = True  # type: ignore[attr-defined]
    return fn


def post(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a *post* decorator (the default): rewrites the decoded value."""
    return fn


def streaming(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a *streaming* decorator: called with the hole's text so far (and the
    ``context``, when it takes two arguments) after every decoded token (argmax and
    sample(n); beam(n) calls it once with the final value)."""
    fn.__tether_streaming__ = True  # type: ignore[attr-defined]
    return fn


class Context:
    """LMQL's program state inside a running query, visible as ``context``.

    ``context.prompt`` is the interaction trace so far; ``context.variables`` the holes
    decoded so far (last value of each); ``context.get_var(name)`` one of them.
    """

    def __init__(self, execution: Execution) -> None:
        self._ex = execution

    @property
    def prompt(self) -> str:
        return self._ex.trace()

    @property
    def variables(self) -> dict[str, Any]:
        return {h.name: h.value for h in self._ex.holes}

    def get_var(self, name: str) -> Any:
        return self.variables.get(name)

    @property
    def model(self) -> Any:
        return self._ex.rt.model

    def __repr__(self) -> str:
        return f"<query context: {len(self.prompt)} characters of prompt>"


@dataclass
class HoleRequest:
    """A hole the program waits on: name, constraint, conversion of the decoded text."""

    name: str
    constraint: ast.expr | None
    scope: dict[str, Any]
    future: frozenset[str]
    post_text: str
    query: str
    convert: Callable[[str], Any]
    support: list[Any] | None = None
    streams: tuple[Callable[..., Any], ...] = ()
    context: Any = None
    spec: OutputSpec | None = None  # a typed hole's lowered output (its type, AFTER triggers)
    output: Any = None  # the type itself (for a black-box model's server)
    after: Any = None  # AFTER(V, triggers)


class NestableQuery(abc.ABC):
    """A query object a running query can call or use as a hole type (``[X: q]``): `Query`,
    and LMQL's query objects (``lmql.py``). The runtime knows queries by this base alone."""

    @abc.abstractmethod
    def nested(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NestedCall:
        """This query called with ``args``/``kwargs`` inside a running query."""


@dataclass
class NestedCall:
    """A query called inside a running query: used as a hole type or awaited."""

    query: Query
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def generator(self, context: Any = None) -> Generator[Any, Any, Any]:
        return self.query.program.generator(self.query.bind_args(self.args, self.kwargs), context)


# ---------------------------------------------------------------------------------------
# typed holes


def _typed(name: str, tp: Any) -> tuple[list[ast.expr], Any]:
    """Constraint conjuncts for a hole type, and the typed output to lower (None: none).

    ``str`` (or no type) is free text; a string is a regex (``[X: r"[a-z]+"]``, a
    ``REGEX`` conjunct, with Follow semantics); any other type (``int``, ``float``,
    ``bool``, a dataclass, a Pydantic model, ``list[str]``, ``Literal[...]``...) is an
    output lowered by `tether.program.outputs.output_spec`, as ``generate`` lowers it."""
    if tp is None or tp is str:
        return [], None
    if isinstance(tp, str):  # [X: r"regex"]
        return [ast.Call(ast.Name("REGEX", ast.Load()), [ast.Name(name, ast.Load()), ast.Constant(tp)], [])], None
    return [], tp


_LOWERED: dict[Any, OutputSpec] = {}
_LOWERED_MAX = 256


def _lower(name: str, output: Any, after: Any) -> OutputSpec:
    """A typed hole's output (and its ``AFTER`` triggers) lowered with generation's
    defaults (closed objects, bounded numbers, compact JSON): the same `output_spec` /
    `triggered_spec` as ``generate``. Cached by type (and triggers) where they hash."""
    key: Any = (output, after if isinstance(after, str) else tuple(after) if isinstance(after, list | tuple) else None)
    if isinstance(after, dict):
        key = None
    else:
        try:
            hash(key)
        except TypeError:
            key = None
    spec = _LOWERED.get(key) if key is not None else None
    if spec is not None:
        return spec
    try:
        spec = output_spec(output) if after is None else triggered_spec(after, output)
    except TetherError as exc:
        shown = "" if output is None else f": {limited(getattr(output, '__name__', output), 100)}"
        raise ConstraintError(f"hole [{name}{shown}]: {exc}") from exc
    if key is not None:
        if len(_LOWERED) >= _LOWERED_MAX:
            _LOWERED.clear()
        _LOWERED[key] = spec
    return spec


def _typed_value(spec: OutputSpec, text: str) -> Any:
    """The value a typed hole wrote; None when its text does not parse (an incomplete
    hole). A single leading space (a number after ``"A:"``) is not part of the value."""
    if spec.kind != "triggered" and text.startswith(" "):
        text = text[1:]
    try:
        return spec.parse(text)
    except Exception:  # noqa: BLE001 -- incomplete or invalid text: no value
        return None


def _after_in_constraint(c: ast.expr, name: str, scope: dict[str, Any], env: dict[str, Any],
                         filename: str) -> tuple[bool, Any]:
    """``AFTER(V, triggers)`` → (True, triggers), else (False, None)."""
    if not (isinstance(c, ast.Call) and builtin_name(c.func) == "after" and len(c.args) == 2
            and isinstance(c.args[0], ast.Name) and c.args[0].id == name):
        return False, None
    try:
        return True, eval(compile(ast.Expression(c.args[1]), "<where>", "eval"), env, scope)  # noqa: S307
    except Exception as exc:  # noqa: BLE001 -- user code in the constraint
        raise ConstraintError(f"the triggers of `{_shown(c)}`{constraint_place(c, filename)} could not be "
                              f"evaluated: {type(exc).__name__}: {limited(str(exc), 200)}") from None


def _type_in_constraint(c: ast.expr, name: str, scope: dict[str, Any], env: dict[str, Any]) -> Any:
    """``type(V) is T`` / ``type(V) == T`` → T, else None."""
    if (isinstance(c, ast.Compare) and len(c.ops) == 1 and isinstance(c.ops[0], ast.Is | ast.Eq)
            and isinstance(c.left, ast.Call) and isinstance(c.left.func, ast.Name) and c.left.func.id == "type"
            and len(c.left.args) == 1 and isinstance(c.left.args[0], ast.Name) and c.left.args[0].id == name):
        try:
            return eval(compile(ast.Expression(c.comparators[0]), "<where>", "eval"), env, scope)  # noqa: S307
        except Exception:
            return None
    return None


# ---------------------------------------------------------------------------------------
# programs


def _fmt(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


class Program:
    """A compiled query body with its clauses (where, distribute) and globals."""

    def __init__(self, qast: QueryAst, params: list[str], env: dict[str, Any] | None = None,
                 name: str = "query") -> None:
        self.qast = qast
        self.name = name
        self.params = params
        self.body: CompiledBody = compile_body(qast.body, params, filename=qast.filename, text=qast.source)
        self.where = qast.where
        self.distribute = qast.distribute
        self.base_env = env or {}
        self.check_static()

    def check_static(self) -> None:
        """Constraints that could never apply are errors, not silently dropped: a ``where``
        conjunct must mention a hole of the query (an inline one, a hole of its own
        prompt statement), ``distribute`` must name a hole, and the built-ins must be
        called with the right arguments (`check_constraint`)."""
        holes, fname = self.body.hole_names, self.qast.filename
        for c in conjuncts(self.where):
            check_constraint(c, None, holes, None, fname)
            if not any(mentions(c, h) for h in holes):
                raise ConstraintError(
                    f"the constraint `{_shown(c)}`{constraint_place(c, fname)} mentions no hole of the query "
                    f"(holes: {', '.join(sorted(holes)) or 'none'})")
        for stmt_id, inline in self.body.inline_where.items():
            own = self.body.stmt_holes.get(stmt_id, frozenset())
            for c in conjuncts(inline):
                check_constraint(c, None, holes, None, fname)
                if not any(mentions(c, h) for h in own):
                    raise ConstraintError(
                        f"the constraint `{_shown(c)}`{constraint_place(c, fname)} mentions no hole of its prompt "
                        f"(holes there: {', '.join(sorted(own)) or 'none'})")
        if self.distribute is not None and self.distribute[0] not in holes:
            raise ConstraintError(f"distribute names {self.distribute[0]!r}, which is no hole of the query "
                                  f"(holes: {', '.join(sorted(holes)) or 'none'})")

    def environment(self, context: Any = None) -> dict[str, Any]:
        """The globals a run of the query sees: ``lmql`` (tether's LMQL surface, also what
        ``import lmql`` gives inside the query), ``context``, the caller's names, the prelude."""
        lmql = surface()
        env: dict[str, Any] = {"__builtins__": lmql.builtins(), "__name__": f"tether.query.{self.name}"}
        env.update({"lmql": lmql.module, "tether": lmql.module, "context": context})
        env.update({k: v for k, v in self.base_env.items() if k != "context"})
        env[STR_FN] = _fmt
        if self.qast.prelude.strip():
            exec(compile(self.qast.prelude, self.qast.filename, "exec", dont_inherit=True), env)  # noqa: S102
        return env

    def generator(self, args: dict[str, Any], context: Any = None) -> Generator[Any, Any, Any]:
        env = self.environment(context)
        env[HOLE_FN] = functools.partial(self._hole, env)
        exec(self.body.code, env)  # noqa: S102
        return env["__tether_query__"](**args)  # type: ignore[no-any-return]

    def request(self, env: dict[str, Any], name: str, tp: Any, stmt_id: int, post_text: str,
                scope: dict[str, Any]) -> HoleRequest:
        cs = [c for c in conjuncts(self.where) if mentions(c, name)]
        inline = self.body.inline_where.get(stmt_id)
        cs += [c for c in conjuncts(inline) if mentions(c, name)]
        keep = []
        after: Any = None
        for c in cs:
            is_after, triggers = _after_in_constraint(c, name, scope, env, self.qast.filename)
            if is_after:
                if after is not None:
                    raise ConstraintError(f"hole [{name}] has more than one AFTER(...) constraint"
                                          f"{constraint_place(c, self.qast.filename)}: give one trigger, a list or a dict")
                after = triggers
                continue
            t = _type_in_constraint(c, name, scope, env)
            if t is not None:
                tp = t if tp is None else tp
            else:
                keep.append(c)
        extra, output = _typed(name, tp)
        keep += extra
        spec = _lower(name, output, after) if output is not None or after is not None else None
        convert: Callable[[str], Any] = (lambda s: s) if spec is None else functools.partial(_typed_value, spec)
        constraint: ast.expr | None
        if not keep:
            constraint = None
        elif len(keep) == 1:
            constraint = keep[0]
        else:
            constraint = ast.BoolOp(ast.And(), keep)
        support = None
        if self.distribute is not None and self.distribute[0] == name:
            support = list(eval(compile(ast.Expression(self.distribute[1]), "<distribute>", "eval"), env, scope))  # noqa: S307
        # constraints see the program's globals (functions, imports) and its locals
        sc = {k: v for k, v in {**env, **scope}.items() if not k.startswith("__")}
        if constraint is not None:
            _check_names(constraint, name, sc, self.body.hole_names, self.qast.filename)
            check_constraint(constraint, name, self.body.hole_names | {name}, sc, self.qast.filename)
        return HoleRequest(name, constraint, sc, self.body.hole_names, post_text, self.name, convert, support,
                           spec=spec, output=output, after=after)

    def _hole(self, env: dict[str, Any], name: str, tp: Any, decorators: tuple[Any, ...], stmt_id: int, post_text: str,
              scope: dict[str, Any]) -> Generator[Any, Any, Any]:
        pres = [d for d in decorators if getattr(d, "__tether_pre__", False)]
        streams = tuple(d for d in decorators if getattr(d, "__tether_streaming__", False))
        posts = [d for d in decorators if not getattr(d, "__tether_pre__", False) and d not in streams]
        context = env.get("context")
        value: Any = None
        supplied = False
        for d in pres:
            var = Variable(name, scope)
            r = call_decorator(d, var, context)
            if r is not var and not isinstance(r, Variable):
                value = yield ("supplied", name, r, self.name)
                supplied = True
                break
        if not supplied:
            if isinstance(tp, NestableQuery):
                tp = tp.nested((), {})
            if isinstance(tp, NestedCall):
                yield ("nested_begin", name)
                ret = yield from tp.generator(context)
                value = yield ("nested_end", name, ret, tp.query.name)
            else:
                req = self.request(env, name, tp, stmt_id, post_text, scope)
                req.streams, req.context = streams, context
                value = yield ("hole", req)
        for d in posts:
            value = call_decorator(d, value, context)
        if posts:
            yield ("rewrite", name, value)
        return value


_LMQL_NAMES = {"stops_at", "stops_before", "stop_at", "stop_before", "len", "words", "sentences", "characters", "tokens",
               "int", "regex", "type", "after"}


def _shown(c: ast.expr) -> str:
    try:
        s = ast.unparse(c)
    except (RecursionError, ValueError):
        s = "..."
    return s if len(s) <= 100 else s[:97] + "..."


def _check_names(expr: ast.expr, var: str, scope: dict[str, Any], holes: frozenset[str], filename: str = "") -> None:
    """A where-clause name that is nothing (not a hole, variable, built-in) is a typo:
    say so (ConstraintError) rather than silently dropping the constraint."""
    import difflib  # noqa: PLC0415

    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            n = node.id
            if (n == var or n in holes or n in scope or hasattr(builtins, n)
                    or n.lower() in _LMQL_NAMES):
                continue
            known = [*sorted(_LMQL_NAMES), "STOPS_AT", "STOPS_BEFORE", "TOKENS", "WORDS", "INT", "REGEX", "AFTER",
                     *scope, *holes]
            hint = difflib.get_close_matches(n, known, n=1)
            raise ConstraintError(f"name {n!r} in the constraint `{_shown(expr)}` of hole [{var}]"
                                  f"{constraint_place(node, filename)} is not defined"
                                  + (f"; did you mean {hint[0]!r}?" if hint else ""))


def _clean_vars(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if k.startswith("__") or isinstance(v, types.ModuleType | types.FunctionType | type | types.BuiltinFunctionType):
            continue
        if isinstance(v, NestableQuery | Context | types.SimpleNamespace):
            continue
        out[k] = v
    return out


class Execution:
    """One branch: a live generator, its trace segments and the answers it was given."""

    def __init__(self, program: Program, args: dict[str, Any], rt: Runtime, replay: list[Any] | None = None) -> None:
        self.program, self.args, self.rt = program, args, rt
        self.context = Context(self)
        self.returned = False  # the body ran ``return <value>``
        self.segments: list[Segment] = []
        self.holes: list[HoleRecord] = []
        self.answers: list[Any] = []
        self.replay: deque[Any] = deque(replay or [])
        self.pending: HoleRequest | None = None
        self.done = False
        self.variables: dict[str, Any] = {}
        self.return_value: Any = None
        self.nested: list[int] = []
        self.logprob = 0.0
        self.distributions: dict[str, dict[str, float]] = {}
        self.gen = program.generator(args, self.context)
        self._run(None, first=True)

    def trace(self) -> str:
        return "".join(s.text for s in self.segments)

    def chat_messages(self) -> tuple[list[dict[str, str]], dict[str, str]] | None:
        """The trace as chat turns (closed turns, open turn) when it has role tags."""
        if not any(s.kind == "role" for s in self.segments):
            return None
        msgs: list[dict[str, str]] = []
        role, buf = "", list[str]()
        for seg in self.segments:
            if seg.kind == "role":
                if buf and "".join(buf).strip():
                    msgs.append({"role": role or "system", "content": "".join(buf).strip()})
                role, buf = seg.name, []
            else:
                buf.append(seg.text)
        return msgs, {"role": role, "content": "".join(buf).lstrip()}

    def fork(self, answer: Any) -> Execution:
        """A copy of this branch given ``answer`` for its pending hole (re-played)."""
        e = Execution(self.program, self.args, self.rt, [*self.answers, answer])
        e.logprob = self.logprob
        return e

    def resume(self, rec: HoleRecord) -> None:
        assert self.pending is not None
        self._record(rec)
        self.pending = None
        self._run(rec.value)

    def _record(self, rec: HoleRecord) -> None:
        self.answers.append(rec)
        self.holes.append(rec)
        self.segments.append(Segment("hole", rec.text, rec.name))
        self.logprob += rec.logprob
        if rec.distribution is not None:
            self.distributions[rec.name] = rec.distribution

    def _answer(self, make: Callable[[], Any]) -> Any:
        if self.replay:
            return self.replay.popleft()
        return make()

    def _run(self, send: Any, first: bool = False) -> None:
        while True:
            try:
                ev = next(self.gen) if first else self.gen.send(send)
            except StopIteration as stop:
                self.done = True
                if self.return_value is None:
                    self.return_value = stop.value
                return
            first = False
            send = None
            kind = ev[0]
            if kind == "start":
                continue
            if kind == "text":
                if ev[1]:
                    self.segments.append(Segment("text", ev[1]))
            elif kind == "role":
                self.segments.append(Segment("role", self.rt.role_text(ev[1], self.trace()), ev[1]))
            elif kind == "input":
                val = str(self._answer(functools.partial(self.rt.input_fn, str(ev[1]))))
                self.answers.append(val)
                send = val  # the prompt shows it where the program interpolates it
            elif kind == "await":
                obj = ev[1]
                val = self._answer(functools.partial(self.rt.resolve_await, obj))
                self.answers.append(val)
                send = val
            elif kind == "end":
                if not self.nested:
                    self.variables = _clean_vars(ev[1])
                    self.return_value = ev[2]
                    self.returned = len(ev) > 3 and bool(ev[3])
            elif kind == "nested_begin":
                self.nested.append(len(self.segments))
            elif kind == "nested_end":
                start = self.nested.pop()
                _, name, ret, qname = ev
                inner = self.segments[start:]
                text = "".join(s.text for s in inner)
                value = ret if ret is not None else text
                del self.segments[start:]
                self.segments.append(Segment("hole", _fmt(value), name))
                self.holes.append(HoleRecord(name, _fmt(value), value, query=qname, stopped="nested"))
                send = value
            elif kind == "supplied":
                _, name, value, qname = ev
                rec = self._answer(functools.partial(HoleRecord, name, _fmt(value), value, query=qname, stopped="supplied"))
                self._record(rec)
                send = rec.value
            elif kind == "rewrite":
                _, name, value = ev
                for i in range(len(self.segments) - 1, -1, -1):
                    if self.segments[i].kind == "hole" and self.segments[i].name == name:
                        self.segments[i] = Segment("hole", _fmt(value), name)
                        break
                for i in range(len(self.holes) - 1, -1, -1):
                    if self.holes[i].name == name:
                        self.holes[i] = dataclasses.replace(self.holes[i], text=_fmt(value), value=value)
                        break
            elif kind == "hole":
                req: HoleRequest = ev[1]
                if self.replay:
                    rec = self.replay.popleft()
                    self._record(rec)
                    send = rec.value
                    continue
                if req.support is not None:  # distribute: scored, not decoded
                    rec = self.rt.distribute(self, req)
                    self._record(rec)
                    send = rec.value
                    continue
                self.pending = req
                return
            else:  # pragma: no cover - the compiler emits only the kinds above
                raise RuntimeError(f"unknown query event {kind!r}")

    def result(self) -> QueryResult:
        return QueryResult(self.trace(), dict(self.variables), list(self.holes), list(self.segments),
                           dict(self.distributions), self.return_value, self.logprob, returned=self.returned)


# ---------------------------------------------------------------------------------------
# the runtime


class Runtime:
    """Decodes holes with a model and a decoder, for all branches of one query run."""

    def __init__(self, model: Any, decoder: DecoderSpec, *, input_fn: Callable[[str], str] | None = None,
                 max_tokens: int | None = None, seed: int | None = None,
                 chat_roles: dict[str, str] | None = None) -> None:
        check_decoder_args(decoder.method, decoder.args)
        if max_tokens is not None:
            check_int("max_tokens", max_tokens, minimum=1, limit="max_tokens")
        check_seed(seed)
        self.model = model
        self.decoder = decoder
        # black-box models (HTTP APIs) have no logits: holes go through the server
        black_box = getattr(model, "black_box", False) or not hasattr(model, "logits")
        self.info = None if black_box else VocabInfo.of(model)
        self.input_fn = input_fn or builtins.input
        args = decoder.args
        self.max_tokens = int(max_tokens or args.get("max_len", args.get("max_tokens", DEFAULT_MAX_TOKENS)))  # type: ignore[call-overload]
        self.temperature = float(args.get("temperature", 1.0))  # type: ignore[arg-type]
        s = seed if seed is not None else args.get("seed")
        self.seed: int | None = None if s is None else int(s)  # type: ignore[call-overload]
        self.chat_roles = chat_roles or {}
        # role tags go through the model's own chat template (unless labels are given)
        self.chat = False  # role tags rendered by the model's chat template
        self.chat_template: str | None = None
        if not self.chat_roles and self.info is not None:
            from tether.program.chat import has_chat_format, template_of  # noqa: PLC0415

            self.chat_template = template_of(model)
            self.chat = has_chat_format(model)
        self.use_engine = bool(args.get("engine", True))
        self.batch = bool(args.get("batch", True))
        self.healing = bool(args.get("healing", True))
        self.close_on_budget = bool(args.get("close_on_budget", True))
        # what the constraint forbids counts as ending the hole (``stop_on_masked``: the same switch)
        self.stop_outside = bool(args.get("stop_outside", True)) and bool(args.get("stop_on_masked", True))
        self._compiled: dict[tuple[int, bool], tuple[OutputSpec, Any]] = {}

    def execution(self, program: Program, args: dict[str, Any]) -> Execution:
        """A new branch running ``program`` with ``args`` (paused at its first hole)."""
        return Execution(program, args, self)

    def step_settings(self) -> Settings:
        """The `tether.decoding` settings every hole decodes with (each hole sets its own
        budget and triggered region: `branches.Hole.settings`)."""
        return Settings(fast_forward=True, close_on_budget=self.close_on_budget, selective=True,
                        stop_outside=self.stop_outside)

    # -- small services for executions ---------------------------------------------------

    def role_text(self, role: str, trace: str) -> str:
        label = self.chat_roles.get(role, role.capitalize() + ":")
        return label if not trace or trace.endswith("\n") else "\n" + label

    def resolve_await(self, obj: Any) -> Any:
        if isinstance(obj, NestedCall):
            return obj.query.run(*obj.args, model=self.model, **obj.kwargs).return_value
        if inspect.isawaitable(obj):
            import asyncio  # noqa: PLC0415

            async def _w() -> Any:
                return await obj

            return asyncio.run(_w())
        return obj

    def tokenize_prompt(self, text: str) -> list[int]:
        limits.check("max_prompt_chars", len(text), "the query's prompt")
        return list(model_call(self.model, lambda: self.model.tokenize(text, add_bos=True)))

    def prompt_tokens(self, ex: Execution) -> list[int]:
        """The model's prompt for a branch: the trace, or, when it has role tags and the
        model a chat template, its turns rendered by that template (the open turn last)."""
        chat = ex.chat_messages() if self.chat else None
        if chat is None:
            return self.tokenize_prompt(ex.trace())
        from tether.program.chat import render_open_turn, tokenize_rendered  # noqa: PLC0415

        closed, open_turn = chat
        try:
            text = render_open_turn(self.model, closed, open_turn["role"], open_turn["content"],
                                    chat_template=self.chat_template)
        except ModelError as exc:
            if "no chat template" not in str(exc):
                raise
            self.chat = False  # the model has none after all: plain role labels, said once
            print(f"note: {str(exc).splitlines()[0]}; role tags are written as plain labels", file=sys.stderr)
            return self.tokenize_prompt(ex.trace())
        limits.check("max_prompt_chars", len(text), "the query's prompt")
        return tokenize_rendered(self.model, text)

    def typed_matcher(self, spec: OutputSpec, lead: bool) -> Any:
        """A fresh engine matcher for a typed hole's output; ``lead``: an optional single
        space before the value (a hole right after text, ``"A:[N: int]"``: the model
        writes ``" 4"``). Compiled once per output and runtime (and cached by the engine)."""
        key = (id(spec), lead)
        hit = self._compiled.get(key)
        if hit is None:
            g = spec.grammar
            assert g is not None
            if lead:
                g = Grammar.sequence(regex_grammar("[ ]?"), g)
            hit = (spec, compile_output(self.model, dataclasses.replace(spec, grammar=g)))
            self._compiled[key] = hit
        return hit[1].matcher()

    # -- distribute ------------------------------------------------------------------------

    def distribute(self, ex: Execution, req: HoleRequest) -> HoleRecord:
        """Score every support value (full log-probability); normalise; argmax."""
        if self.info is None:
            raise ModelError("distribute needs log-probabilities; this model offers none (an HTTP API)")
        trace = ex.trace()
        ctx = self.prompt_tokens(ex)
        chat = self.chat and ex.chat_messages() is not None
        conts = []
        for v in req.support or []:
            s = _fmt(v)
            full = self.tokenize_prompt(trace + s) if not chat else []
            cont = full[len(ctx):] if full and full[: len(ctx)] == ctx else list(self.model.tokenize(s, add_bos=False))
            c = self.model.costs  # one scoring run per value, as the paper counts
            c.generate_calls += 1
            c.prompt_tokens += len(ctx)
            c.generated_tokens += len(cont)
            conts.append(cont)
        scores = score_tokens(self.model, ctx, conts, batch=self.batch)
        if not scores:
            return HoleRecord(req.name, "", None, query=req.query, stopped="distribute", distribution={})
        ps = np.exp(log_softmax(np.asarray(scores)))  # normalised over the support
        dist = {_fmt(v): float(p) for v, p in zip(req.support or [], ps, strict=True)}
        k = argmax(np.asarray(scores))
        best = (req.support or [])[k]
        return HoleRecord(req.name, _fmt(best), best, query=req.query, stopped="distribute",
                          distribution=dist, logprob=scores[k])

    def run_simple(self, program: Program, args: dict[str, Any], n: int) -> list[Execution]:
        """argmax / sample(n): n branches, each with its own control flow, decoded in
        lockstep so their model calls can be batched (`branches.run_lockstep`)."""
        if self.info is None:  # black-box model: one hole at a time, through the server
            exs = [Execution(program, args, self) for _ in range(n)]
            for ex in exs:
                while not ex.done:
                    assert ex.pending is not None
                    ex.resume(decode_hole_remote(self, ex, ex.pending))
            return exs
        return run_lockstep(self, program, args, n)

    def run(self, program: Program, args: dict[str, Any]) -> QueryResult:
        token = ACTIVE.set(self)
        before = self.model.costs.snapshot()
        try:
            n = self.decoder.n
            if self.decoder.method == "beam":
                if self.info is None:
                    raise ModelError("beam(n) needs a model with logits; an HTTP model offers argmax and sampling")
                exs = run_beam(self, program, args, max(1, n))
            else:
                exs = self.run_simple(program, args, max(1, n))
        finally:
            ACTIVE.reset(token)
        costs = self.model.costs.snapshot() - before
        results = [ex.result() for ex in exs]
        for r in results:
            r.costs = costs
            r.results = results
        return results[0]
