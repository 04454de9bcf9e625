"""Guidance-style composition: text and holes joined with ``+``, filled left to right.

    program = "Name: " + gen("name", regex=r"[A-Z][a-z]+") + "\\nMood: " + select(["happy", "sad"], name="mood")
    result = program.run(model)
    result["name"], result["mood"], result.text

Each hole is decoded with the text before it as the prompt (token healing at the
boundary, so ``"http"`` + hole still continues naturally), under its own constraint:
``gen(regex=...)``, ``gen(output=<any generate output>)``, ``gen(stop=...)``,
``select([...])``. Captured values land in ``result.captures`` under the hole's name
(``list_append=True`` appends to a list instead). The model keeps its KV cache across
holes, so the shared prefix is evaluated once.

Chat roles: ``system(...)``, ``user(...)``, ``assistant(...)`` (or ``role(name, ...)``)
wrap text and holes in a turn, written with the model's own chat template
(`tether.program.chat`; Gemma's ``<start_of_turn>user`` markers on the embedded model)::

    program = user("Is the sky blue? Answer yes or no.") + assistant(select(["yes", "no"], name="a"))

A hole inside a turn is decoded after the conversation rendered so far, its own turn left
open (the template's text up to where the turn's content goes). Text before the first turn
is a system turn (whitespace alone is dropped); once a program has turns, text and holes
outside them are refused (whitespace between turns is dropped: the template writes the
separators). ``user()``
with no content is a ``with`` block for `tether.program.state.ModelState`.

Arguments are checked when a hole is made (`ArgumentError`, a ``ValueError``); a hole
whose output is not complete under its constraint (cut by a stop text or its token
budget) captures ``None`` and records why in ``result.errors``.

Streaming: ``program.stream(model)`` (and ``lm.stream(piece)`` of `state.ModelState`) writes
exactly what ``program.run(model)`` writes — the same walk (`write_steps`) and hole plan
(`plan_hole`) — and yields a `HoleEvent` per change of a hole's value (capture name, text so
far, typed partial value as ``Stream.partials`` gives it), then one with ``done=True`` and
the captured value; `ProgramStream.result` gives the `ProgramResult`. Holes written by a
`function` call give no events; a black-box HTTP model answers a hole in one request (one
``done`` event).
"""

from __future__ import annotations

import codecs
import itertools
import re
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import nullcontext
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tether import limits
from tether.decoding import Argmax, Decoded, Decoder, Sample, decode, decode_iter, plan_healing
from tether.decoding.decoders import check_bool, check_int, check_number, check_seed
from tether.decoding.stops import StopScanner
from tether.errors import ArgumentError, ModelError
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.models.base import Costs, Model, is_black_box
from tether.program.arguments import check_limits_arg, check_stop
from tether.program.chat import render_chat, render_open_turn, tokenize_rendered
from tether.program.generate import (
    Generation,
    compile_output,
    prepare_prompt,
    region_options,
    to_generation,
)
from tether.program.outputs import (
    DEFAULT_OPTIONS,
    OutputOptions,
    OutputSpec,
    Regex,
    check_output_options,
    output_spec,
    triggered_spec,
)
from tether.program.partial import Partials
from tether.program.remote import fill_hole as remote_hole
from tether.program.view import HoleInfo, generation_hole


class Piece:
    """A part of a program: text, a hole, a chat turn. ``+`` joins pieces into a `Program`."""

    def __add__(self, other: Any) -> Program:
        return Program((self, *_as_program(other).pieces))

    def __radd__(self, other: Any) -> Program:
        return _as_program(other) + self

    def run(self, model: Any, *, temperature: float | None = None, seed: int | None = None,
            healing: bool = True, fast_forward: bool = True, limits: Limits | None = None,
            chat_template: str | None = None) -> ProgramResult:
        """This piece as a program of its own (see `Program.run`)."""
        return Program((self,)).run(model, temperature=temperature, seed=seed, healing=healing,
                                    fast_forward=fast_forward, limits=limits, chat_template=chat_template)


@dataclass(frozen=True)
class Text(Piece):
    text: str


@dataclass(frozen=True)
class Gen(Piece):
    """A generated hole (see `gen`)."""

    name: str | None = None
    regex: str | None = None
    stop: tuple[str, ...] = ()
    max_tokens: int = 128
    output: Any = None
    temperature: float | None = None
    list_append: bool = False
    close_on_budget: bool = True
    options: OutputOptions = DEFAULT_OPTIONS
    after: Any = None

    def spec(self) -> OutputSpec:
        if self.regex is not None and self.output is not None:
            raise ArgumentError("gen(regex=...)", self.regex, "None when output= is given (regex= or output=, not both)")
        output = Regex(self.regex) if self.regex is not None else self.output
        if self.after is not None:
            return triggered_spec(self.after, output, self.options)
        return output_spec(output, self.options)


@dataclass(frozen=True)
class Select(Piece):
    """A choice among options (see `select`)."""

    options: tuple[str, ...]
    name: str | None = None
    list_append: bool = False
    close_on_budget: bool = True

    def spec(self) -> OutputSpec:
        return output_spec(list(self.options))


def gen(name: str | None = None, *, regex: str | None = None, stop: str | Sequence[str] | None = None,
        max_tokens: int = 128, output: Any = None, temperature: float | None = None,
        list_append: bool = False, close_on_budget: bool = True, strict: bool = True,
        whitespace: Any = "compact", number_bounds: Any = None, after: Any = None) -> Gen:
    """A hole the model fills: free text (ending at ``stop``/EOS/``max_tokens``), a
    ``regex``, or any ``output`` `generate` accepts (JSON Schema, Pydantic model…).
    A structured hole that ``max_tokens`` would cut is closed validly
    (``close_on_budget=False``: it stays cut and captures None). ``strict``,
    ``whitespace``, ``number_bounds`` and ``after`` are `generate`'s: closed objects,
    bounded numbers and compact JSON by default; ``after="</think>"`` lets the model
    write free text up to the trigger, then the constrained output (the capture is the
    constrained part's value, the program text holds all of it)."""
    _check_name(name)
    if regex is not None and not isinstance(regex, str):
        raise ArgumentError("gen(regex=...)", regex, "None or a regex pattern string")
    stops = tuple(check_stop(stop))
    check_int("gen(max_tokens=...)", max_tokens, minimum=1)
    if temperature is not None:
        check_number("gen(temperature=...)", temperature, 0.0)
    check_bool("gen(list_append=...)", list_append)
    check_bool("gen(close_on_budget=...)", close_on_budget)
    options = check_output_options(strict, whitespace, number_bounds, where="gen(...): ")
    g = Gen(name, regex, stops, max_tokens, output, temperature, list_append, close_on_budget, options, after)
    g.spec()  # a bad output= fails here, where the hole is written
    return g


def _check_name(name: object) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise ArgumentError("name", name, "None or a non-empty string")


def select(options: Sequence[str], name: str | None = None, *, list_append: bool = False,
           close_on_budget: bool = True) -> Select:
    """A hole filled with exactly one of ``options``."""
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise ArgumentError("select(options)", options, "a list of strings")
    opts = tuple(options)
    if not opts or not all(isinstance(o, str) for o in opts):
        raise ArgumentError("select(options)", options, "a non-empty list of strings")
    _check_name(name)
    check_bool("select(list_append=...)", list_append)
    check_bool("select(close_on_budget=...)", close_on_budget)
    return Select(opts, name, list_append, close_on_budget)


# -- chat roles -------------------------------------------------------------------------

_ROLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_TURNS = itertools.count(1)  # turn numbers: each role piece run, each `with` block, a new one


@dataclass(frozen=True)
class Scope:
    """The chat turn a piece is written in: its role and its turn number."""

    role: str
    turn: int


@dataclass(frozen=True)
class Role(Piece):
    """A chat turn: ``body`` written inside the ``role`` turn of the model's template
    (see `role`)."""

    role: str
    body: Program


class RoleBlock:
    """``with user():`` — appends to a `ModelState` inside the block go in one turn of
    this role. A block is entered once; blocks do not nest."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.scope: Scope | None = None
        self.active = False
        self._token: Token[RoleBlock | None] | None = None

    def __enter__(self) -> RoleBlock:
        outer = ACTIVE_BLOCK.get()
        if outer is not None:
            raise ArgumentError(f"with {self.role}()", self, f"outside other role blocks (inside with {outer.role}())")
        if self.scope is not None:
            raise ArgumentError(f"with {self.role}()", self, "a fresh block (a role block is entered once)")
        self.scope = Scope(self.role, next(_TURNS))
        self.active = True
        self._token = ACTIVE_BLOCK.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        if self._token is not None:
            ACTIVE_BLOCK.reset(self._token)
            self._token = None

    def __add__(self, other: Any) -> Program:
        raise _block_as_piece(self)

    def __radd__(self, other: Any) -> Program:
        raise _block_as_piece(self)

    def __repr__(self) -> str:
        return f"{self.role}()"


#: the role block a `ModelState` append is written in (set by ``with user():``)
ACTIVE_BLOCK: ContextVar[RoleBlock | None] = ContextVar("tether_role_block", default=None)


def _block_as_piece(block: RoleBlock) -> ArgumentError:
    return ArgumentError("a program piece", block,
                         f"a piece: {block.role}() with no content is a `with` block; write "
                         f"{block.role}('text', gen(...)) for a turn inside a program")


def role(name: str, *content: Any) -> Any:
    """A chat turn of role ``name`` holding ``content`` (text, holes, programs), or, with
    no content, a ``with`` block for a `ModelState`. The turn is written with the model's
    chat template (``tool`` and other roles only where the template knows them)."""
    if not isinstance(name, str) or not _ROLE_NAME.fullmatch(name):
        raise ArgumentError("role", name, "a role name such as 'system', 'user' or 'assistant'")
    if not content:
        return RoleBlock(name)
    body = Program(())
    for part in content:
        body = body + part
    _check_no_roles(body, name)
    return Role(name, body)


def system(*content: Any) -> Any:
    """A system turn (``system("Answer briefly.")``); no content: ``with system():``."""
    return role("system", *content)


def user(*content: Any) -> Any:
    """A user turn (``user("Hi ", gen("x"))``); no content: ``with user():``."""
    return role("user", *content)


def assistant(*content: Any) -> Any:
    """An assistant turn (``assistant(gen("answer"))``); no content: ``with assistant():``."""
    return role("assistant", *content)


def _check_no_roles(body: Program, outer: str) -> None:
    """Turns do not nest: ``body`` (walked without recursion) holds no role piece."""
    stack = [body]
    while stack:
        for p in stack.pop().pieces:
            if isinstance(p, Role):
                raise ArgumentError(f"{outer}(...)", p, f"text and holes (a {p.role} turn cannot sit inside a {outer} turn)")
            if isinstance(p, Program):
                stack.append(p)


# -- what a program has written ------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """Text a program wrote, and the turn it belongs to (None: outside any turn); a hole's
    text carries what the notebook view shows of it (`tether.program.view`)."""

    text: str
    scope: Scope | None = None
    hole: HoleInfo | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RunOptions:
    """How holes are filled (`Program.run`'s and `ModelState`'s options, checked)."""

    temperature: float | None = None
    seed: int | None = None
    healing: bool = True
    fast_forward: bool = True
    chat_template: str | None = None


def check_run_options(temperature: Any, seed: Any, healing: Any, fast_forward: Any,
                      chat_template: Any) -> RunOptions:
    if temperature is not None:
        check_number("temperature", temperature, 0.0)
    check_seed(seed)
    check_bool("healing", healing)
    check_bool("fast_forward", fast_forward)
    if chat_template is not None:
        if not isinstance(chat_template, str) or not chat_template:
            raise ArgumentError("chat_template", chat_template, "None or a non-empty Jinja template string")
        limits.check("max_text_chars", len(chat_template), "chat_template")
    return RunOptions(temperature, seed, healing, fast_forward, chat_template)


def check_model(model: Any) -> Any:
    """The model a program runs on: loaded when given by name (or None: the default),
    else a steerable model (`tether.models.base.Model`)."""
    if isinstance(model, str) or model is None:
        from tether.models import load_model

        return load_model(model)
    if not isinstance(model, Model) and not is_black_box(model):
        raise ArgumentError("model", model, "a model from tether.load_model(...)")
    return model


@dataclass(frozen=True)
class Transcript:
    """Everything a program has written so far: text chunks (with their turns), captures,
    errors, costs. Immutable: every step returns a new one."""

    chunks: tuple[Chunk, ...] = ()
    captures: Mapping[str, Any] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)
    costs: Costs = field(default_factory=Costs)
    holes: int = 0
    chat: bool = False  # some chunk is inside a turn

    def plain_text(self) -> str:
        return "".join(c.text for c in self.chunks)

    def last_scope(self) -> Scope | None:
        return self.chunks[-1].scope if self.chunks else None

    def messages(self) -> list[tuple[Scope | None, str]]:
        """The turns in order: consecutive chunks of one turn joined (the text before
        the first turn is one turn of its own, scope None)."""
        out: list[tuple[Scope | None, str]] = []
        for c in self.chunks:
            if out and out[-1][0] == c.scope:
                out[-1] = (c.scope, out[-1][1] + c.text)
            else:
                out.append((c.scope, c.text))
        return out

    def render(self, model: Any, options: RunOptions, open_turn: Scope | None = None) -> str:
        """The text as the model sees it: plain text, or (with turns) the conversation in
        the model's chat template, ``open_turn`` (if given) left open at its end."""
        if not self.chat and open_turn is None:
            return self.plain_text()
        msgs = [{"role": "system" if s is None else s.role, "content": t} for s, t in self.messages()
                if s is not None or t.strip()]  # whitespace before the first turn is no turn
        if open_turn is None:
            return render_chat(model, msgs, chat_template=options.chat_template, add_generation_prompt=False)
        closed, content = msgs, ""
        if self.last_scope() == open_turn:
            closed, content = msgs[:-1], msgs[-1]["content"]
        return render_open_turn(model, closed, open_turn.role, content, chat_template=options.chat_template)

    def with_text(self, text: str, scope: Scope | None) -> Transcript:
        if not text:
            return self
        if scope is None and self.chat:
            if not text.strip():
                return self  # the template writes what goes between turns
            raise ArgumentError("text outside a turn", text,
                                "inside system()/user()/assistant() once the program has chat turns")
        return Transcript(self.chunks + (Chunk(text, scope),), self.captures, self.errors, self.costs,
                          self.holes, self.chat or scope is not None)


class Deferred(Piece):
    """A piece that writes itself when its turn comes (a `tether.function` call)."""

    def apply(self, model: Any, transcript: Transcript, options: RunOptions, scope: Scope | None) -> Transcript:
        raise NotImplementedError


@dataclass(frozen=True)
class HolePlan:
    """How one hole is decoded: its output, decoder and prompt (`plan_hole`).
    ``tokens`` is None for a black-box HTTP model (one request per hole, see
    `remote_generation`); else ``options`` are the keywords of ``decode``/``decode_iter``."""

    spec: OutputSpec
    decoder: Decoder
    max_tokens: int
    stop: list[str]
    prompt: str
    tokens: list[int] | None = None
    compiled: Any = None
    options: dict[str, Any] = field(default_factory=dict)

    def matcher(self) -> Any:
        return self.compiled.matcher() if self.compiled is not None else None


def plan_hole(model: Any, tr: Transcript, piece: Gen | Select, options: RunOptions,
              scope: Scope | None) -> HolePlan:
    """Everything before decoding a hole after ``tr``: its checks, output, decoder, and
    the prompt (plain text, or the conversation with ``scope``'s turn left open)."""
    if scope is None and tr.chat:
        raise ArgumentError("a hole outside a turn", piece,
                            "inside system()/user()/assistant() once the program has chat turns")
    spec = piece.spec()
    temp = piece.temperature if isinstance(piece, Gen) and piece.temperature is not None else options.temperature
    seed = options.seed
    dec: Decoder = Sample(temperature=temp, seed=None if seed is None else seed + tr.holes) if temp else Argmax()
    max_tokens = piece.max_tokens if isinstance(piece, Gen) else 64
    stop = list(piece.stop) if isinstance(piece, Gen) else []
    if is_black_box(model) and not (tr.chat or scope is not None):
        # an HTTP model: one request per hole, the constraint in the server's own field
        prompt = tr.plain_text()
        limits.check("max_prompt_chars", len(prompt), "the program text before a hole")
        return HolePlan(spec, dec, max_tokens, stop, prompt)
    cc = compile_output(model, spec)
    if tr.chat or scope is not None:
        prompt = tr.render(model, options, open_turn=scope)
        limits.check("max_prompt_chars", len(prompt), "the program text before a hole")
        tokens, heal = tokenize_rendered(model, prompt), b""
        if options.healing and scope is not None and tr.last_scope() == scope:
            # heal the boundary with the turn's own text; never back into the template's markup
            tokens, heal = plan_healing(model.vocabulary, tokens, 1)
    else:
        prompt = tr.plain_text()
        limits.check("max_prompt_chars", len(prompt), "the program text before a hole")
        pp = prepare_prompt(model, prompt, healing=options.healing, chat_template=None)
        tokens, heal = pp.tokens, pp.heal
    decode_options = dict(heal=heal, max_tokens=max_tokens, stop=stop, fast_forward=options.fast_forward,
                          close_on_budget=piece.close_on_budget, **region_options(spec, max_tokens))
    return HolePlan(spec, dec, max_tokens, stop, prompt, list(tokens), cc, decode_options)


def remote_generation(model: Any, plan: HolePlan) -> Generation:
    """A black-box model's output for a hole (``plan.tokens`` is None)."""
    return remote_hole(model, plan.prompt, plan.spec, decoder=plan.decoder, max_tokens=plan.max_tokens,
                       stop=plan.stop)


def fill_hole(model: Any, tr: Transcript, piece: Gen | Select, options: RunOptions,
              scope: Scope | None) -> Transcript:
    """Decode one hole after everything written so far; the new transcript holds its text
    and capture."""
    before = model.costs.snapshot()
    plan = plan_hole(model, tr, piece, options, scope)
    if plan.tokens is None:
        g = remote_generation(model, plan)
    else:
        [d] = decode(model, plan.tokens, plan.matcher(), plan.decoder, **plan.options)
        g = to_generation(model, d, plan.spec, Costs(), plan.prompt)
    return with_hole(tr, piece, g, scope, model.costs.snapshot() - before)


def with_hole(tr: Transcript, piece: Gen | Select, g: Generation, scope: Scope | None,
               spent: Costs) -> Transcript:
    """``tr`` with the hole's output ``g`` written and captured."""
    captures, errors = tr.captures, tr.errors
    if piece.name is not None:
        captures, errors = dict(captures), dict(errors)
        value = g.value  # None when the output is not complete (see errors)
        if piece.list_append:
            old = captures.get(piece.name)
            captures[piece.name] = [*(old if isinstance(old, list) else []), value]
        else:
            captures[piece.name] = value
        if g.error:
            errors[piece.name] = g.error
        elif not piece.list_append:
            errors.pop(piece.name, None)  # the error was about the value this one replaces
    costs = tr.costs + spent
    chunks = tr.chunks + (Chunk(g.text, scope, generation_hole(g, piece.name)),) if g.text else tr.chunks
    return Transcript(chunks, captures, errors, costs, tr.holes + 1, tr.chat or scope is not None)


# a hole to fill, as `write_steps` asks for it: the transcript so far, the hole, its turn
HoleRequest = tuple[Transcript, "Gen | Select", "Scope | None"]


def write_steps(model: Any, tr: Transcript, piece: Piece, options: RunOptions,
                scope: Scope | None) -> Generator[HoleRequest, Transcript, Transcript]:
    """``piece`` written after ``tr`` in ``scope``: text appended, turns opened for role
    pieces (nested programs walked without recursion); each hole, left to right, is
    yielded as a request and the transcript with it filled is sent back (`write` fills
    them at once, `stream_write` step by step). Returns the transcript."""
    stack: list[tuple[Any, Scope | None]] = [(iter((piece,)), scope)]
    while stack:
        it, sc = stack[-1]
        p = next(it, None)
        if p is None:
            stack.pop()
        elif isinstance(p, Text):
            tr = tr.with_text(p.text, sc)
        elif isinstance(p, Program):
            stack.append((iter(p.pieces), sc))
        elif isinstance(p, Role):
            if sc is not None:
                raise ArgumentError(f"{p.role}(...)", p, f"outside other turns (it sits inside a {sc.role} turn)")
            stack.append((iter(p.body.pieces), Scope(p.role, next(_TURNS))))
        elif isinstance(p, Gen | Select):
            tr = yield (tr, p, sc)
        elif isinstance(p, Deferred):
            tr = p.apply(model, tr, options, sc)
        else:
            raise ArgumentError("a program piece", p, "a str, gen(), select(), a role turn or a program")
    return tr


def write(model: Any, tr: Transcript, piece: Piece, options: RunOptions, scope: Scope | None) -> Transcript:
    """``piece`` written after ``tr`` in ``scope``, its holes filled left to right."""
    steps = write_steps(model, tr, piece, options, scope)
    try:
        request = next(steps)
        while True:
            request = steps.send(fill_hole(model, request[0], request[1], options, request[2]))
    except StopIteration as done:
        result: Transcript = done.value
        return result


def _as_program(x: Any) -> Program:
    if isinstance(x, Program):
        return x
    if isinstance(x, str):
        return Program((Text(x),))
    if isinstance(x, Piece):
        return Program((x,))
    if isinstance(x, RoleBlock):
        raise _block_as_piece(x)
    raise ArgumentError("a program piece", x, "a str, gen(), select(), a role turn or a program")


@dataclass
class ProgramResult:
    """The filled program: ``text`` (prompt text and holes; with turns, the conversation
    in the model's chat template), ``captures`` by name."""

    text: str
    captures: dict[str, Any] = field(default_factory=dict)
    costs: Costs = field(default_factory=Costs)
    errors: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Any:
        return self.captures[name]

    def __contains__(self, name: str) -> bool:
        return name in self.captures

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Program(Piece):
    """A sequence of text, holes and turns; run it with `run`."""

    pieces: tuple[Piece, ...] = ()

    def __add__(self, other: Any) -> Program:
        return Program(self.pieces + _as_program(other).pieces)

    def __radd__(self, other: Any) -> Program:
        return _as_program(other) + self

    def run(self, model: Any, *, temperature: float | None = None, seed: int | None = None,
            healing: bool = True, fast_forward: bool = True, limits: Limits | None = None,
            chat_template: str | None = None) -> ProgramResult:
        """Fill the holes left to right. Argmax unless a temperature is given (then each
        hole samples with seed ``seed + hole index``, reproducibly). ``limits`` runs the
        whole program under those `tether.limits.Limits`; ``chat_template`` (Jinja) writes
        the turns instead of the model's own template."""
        options = check_run_options(temperature, seed, healing, fast_forward, chat_template)
        active = check_limits_arg(limits)
        with limits_in_force(active) if active is not None else nullcontext():
            model = check_model(model)
            tr = write(model, Transcript(), self, options, None)
            return ProgramResult(tr.render(model, options), dict(tr.captures), tr.costs, dict(tr.errors))

    __call__ = run

    def stream(self, model: Any, *, temperature: float | None = None, seed: int | None = None,
               healing: bool = True, fast_forward: bool = True, limits: Limits | None = None,
               chat_template: str | None = None) -> ProgramStream[ProgramResult]:
        """`run`, streamed: iterate the `HoleEvent` of each hole as it is decoded
        (capture name, text so far, typed partial value; then ``done``);
        `ProgramStream.result` gives the `ProgramResult` ."""
        options = check_run_options(temperature, seed, healing, fast_forward, chat_template)
        active = check_limits_arg(limits)
        with limits_in_force(active) if active is not None else nullcontext():
            model = check_model(model)

        def finish(tr: Transcript) -> ProgramResult:
            return ProgramResult(tr.render(model, options), dict(tr.captures), tr.costs, dict(tr.errors))

        return ProgramStream(stream_write(model, Transcript(), self, options, None), finish, active)


# ---- streaming: a program written hole by hole -------------------------------------------
R = TypeVar("R")


@dataclass(frozen=True)
class HoleEvent:
    """A hole of a streamed program as it is decoded.

    Attributes:
        name: the hole's capture name (None: an unnamed hole).
        index: the hole's number in the state or program (0 for the first).
        text: the hole's text so far.
        value: its typed value so far (``Stream.partials``'s partial value); with
            ``done``, the captured value (a JSON output parsed, a Pydantic model
            validated; None where the output was incomplete).
        done: the hole is complete and captured.
    """

    name: str | None
    index: int
    text: str
    value: Any
    done: bool = False


class ProgramStream(Generic[R]):
    """The `HoleEvent`s of a program being written; `result` gives what it wrote."""

    def __init__(self, steps: Generator[HoleEvent, None, Transcript], finish: Callable[[Transcript], R],
                 limits: Limits | None = None) -> None:
        self._steps = steps
        self._finish = finish
        self._limits = limits
        self._result: R | None = None
        self._done = False

    def __iter__(self) -> Iterator[HoleEvent]:
        return self

    def __next__(self) -> HoleEvent:
        if self._done:
            raise StopIteration
        try:
            with limits_in_force(self._limits) if self._limits is not None else nullcontext():
                return next(self._steps)
        except StopIteration as end:
            self._done = True
            tr: Transcript | None = end.value  # None: the steps ended by an error before
            if tr is not None:
                with limits_in_force(self._limits) if self._limits is not None else nullcontext():
                    self._result = self._finish(tr)
            raise StopIteration from None

    def close(self) -> None:
        """Stop here (the model is left ready for the next call); idempotent."""
        self._steps.close()
        self._done = True

    def result(self) -> R:
        """Write the rest and return the final state (``lm.stream``) or `ProgramResult`
        (``program.stream``).

        Raises ModelError if the stream was closed (or a step raised) before the program
        was written."""
        for _ in self:
            pass
        if self._result is None:
            raise ModelError("the program stream ended before the program was written (it was closed, "
                             "or a step raised)")
        return self._result


def stream_write(model: Any, tr: Transcript, piece: Any, options: RunOptions,
                 scope: Scope | None) -> Generator[HoleEvent, None, Transcript]:
    """`compose.write`, each hole streamed (`stream_hole`)."""
    steps = write_steps(model, tr, piece, options, scope)
    try:
        request = next(steps)
        while True:
            filled = yield from stream_hole(model, request[0], request[1], options, request[2])
            request = steps.send(filled)
    except StopIteration as done:
        result: Transcript = done.value
        return result


def stream_hole(model: Any, tr: Transcript, piece: Gen | Select, options: RunOptions,
                scope: Scope | None) -> Generator[HoleEvent, None, Transcript]:
    """`compose.fill_hole`, yielding a `HoleEvent` per change of the hole's value (the
    text shown stops short of what a ``stop`` text may still remove), then the done one."""
    before = model.costs.snapshot()
    plan = plan_hole(model, tr, piece, options, scope)
    index = tr.holes
    if plan.tokens is None:
        g = remote_generation(model, plan)
    else:
        reader = Partials(plan.spec)
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        scanner = StopScanner(plan.stop)  # mirrors the decoder's, to know what is safe to show
        text, sent = "", 0
        last: Decoded | None = None
        for states in decode_iter(model, plan.tokens, plan.matcher(), plan.decoder, **plan.options):
            last = states[0]
            scanner.text, scanner.hit = bytearray(last.text), last.stop_text
            safe = scanner.safe_length()
            if safe > sent:
                chunk = utf8.decode(bytes(last.text[sent:safe]))
                sent = safe
                text += chunk
                if reader.feed(chunk) and reader.has_value:
                    yield HoleEvent(piece.name, index, text, reader.value)
        if last is None:  # no step was taken: decode at once
            [last] = decode(model, plan.tokens, plan.matcher(), plan.decoder, **plan.options)
        g = to_generation(model, last, plan.spec, Costs(), plan.prompt)
    filled = with_hole(tr, piece, g, scope, model.costs.snapshot() - before)
    yield HoleEvent(piece.name, index, g.text, g.value, done=True)
    return filled
