"""Guidance-style model states: ``lm = ModelState(model) + "text"``; ``lm += gen(...)``.

    lm = ModelState(model) + "Name: "
    lm += gen("name", regex=r"[A-Z][a-z]+")
    with user():
        lm += "Is the sky blue?"
    with assistant():
        lm += select(["yes", "no"], name="answer")
    lm["name"], lm["answer"], str(lm)

A `ModelState` is immutable: ``+`` writes the new piece (text, a hole, a program, a role
turn, a `function` call) after everything the state holds and returns a new state; the
old one is unchanged, so a state can be branched. Holes are filled when they are added,
with the text so far as the prompt, exactly as `Program.run` fills them (same token
healing, same captures and errors). The model keeps its KV cache between appends (its
prompt is the previous one plus the new text), so the shared prefix is not evaluated
again.

Roles: inside ``with system():`` / ``with user():`` / ``with assistant():`` every
append goes into one turn of that role, written with the model's own chat template; the
turn stays open while the block is, and ``str(lm)`` shows it closed once the block ends.
``user("text")`` with content is a turn piece that may be added outside a block.

Stateful functions: `function` makes a Python function ``f(lm, *args)`` that appends to
``lm`` and returns the result into a piece, ``lm += f(args)``; it can also sit inside a
`Program`.

``model + "text"`` on a model itself is ``ModelState(model) + "text"`` (`add_to_model`,
registered in `tether.models.base.IDIOMS`). In a notebook a state shows as HTML, its
holes highlighted and named (`state_spans` → `tether.program.view`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from tether.errors import ArgumentError, TetherError
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.models.base import IDIOMS, Costs
from tether.program.arguments import check_limits_arg
from tether.program.compose import (
    ACTIVE_BLOCK,
    Chunk,
    Deferred,
    Program,
    ProgramStream,
    RoleBlock,
    RunOptions,
    Scope,
    Transcript,
    _as_program,
    check_model,
    check_run_options,
    stream_write,
    write,
)
from tether.program.view import Span, render_html


class ModelState:
    """A model and everything written to it so far; immutable (``+`` returns a new state).

    Args:
        model: a steerable model, or a name for `tether.load_model` (None: the default).
        temperature: None or 0 decodes holes with argmax; above 0 each hole samples (with
            seed ``seed + hole index`` when a seed is given). A hole's own
            ``gen(temperature=)`` wins.
        seed: the sampling seed.
        healing: token healing at each hole's boundary (as `Program.run`).
        fast_forward: write forced tokens without a model call.
        chat_template: a Jinja template for the turns instead of the model's own.
        limits: `tether.limits.Limits` in force while each append runs.
    """

    __slots__ = ("_block", "_limits", "_options", "_scope", "_tr", "model")
    model: Any
    _tr: Transcript
    _options: RunOptions
    _limits: Limits | None
    _block: RoleBlock | None
    _scope: Scope | None

    def __init__(self, model: Any = None, *, temperature: float | None = None, seed: int | None = None,
                 healing: bool = True, fast_forward: bool = True, chat_template: str | None = None,
                 limits: Limits | None = None) -> None:
        options = check_run_options(temperature, seed, healing, fast_forward, chat_template)
        active = check_limits_arg(limits)
        with limits_in_force(active) if active is not None else nullcontext():
            resolved = check_model(model)
        self._init(resolved, Transcript(), options, active, None, None)

    def _init(self, model: Any, tr: Transcript, options: RunOptions, limits: Limits | None,
              block: RoleBlock | None, scope: Scope | None) -> None:
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "_tr", tr)
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_limits", limits)
        object.__setattr__(self, "_block", block)  # the role block of the last append
        object.__setattr__(self, "_scope", scope)  # the turn appends go to outside a block

    @classmethod
    def _of(cls, model: Any, tr: Transcript, options: RunOptions, limits: Limits | None,
            block: RoleBlock | None, scope: Scope | None) -> ModelState:
        state = cls.__new__(cls)
        state._init(model, tr, options, limits, block, scope)
        return state

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a ModelState is immutable: write lm = lm + ... instead of setting {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a ModelState is immutable: {name!r} cannot be deleted")

    # -- writing -----------------------------------------------------------------------------

    def __add__(self, other: Any) -> ModelState:
        """A new state: ``other`` (str, gen(), select(), a program, a role turn, a
        function call) written after this one, its holes filled now."""
        piece, block, scope = self._target(other, "lm + ...")
        with limits_in_force(self._limits) if self._limits is not None else nullcontext():
            tr = write(self.model, self._tr, piece, self._options, scope)
        return ModelState._of(self.model, tr, self._options, self._limits, block, self._scope)

    def stream(self, other: Any) -> ProgramStream[ModelState]:
        """``self + other``, streamed: iterate the `HoleEvent` of each hole as it is
        decoded (capture name, text so far, typed partial value; then ``done``), and
        `ProgramStream.result` gives the new state (`tether.program.compose`)."""
        piece, block, scope = self._target(other, "lm.stream(...)")

        def finish(tr: Transcript) -> ModelState:
            return ModelState._of(self.model, tr, self._options, self._limits, block, self._scope)

        return ProgramStream(stream_write(self.model, self._tr, piece, self._options, scope), finish,
                             self._limits)

    def _target(self, other: Any, where: str) -> tuple[Program, RoleBlock | None, Scope | None]:
        """What an append writes: ``other`` as a program, the role block open now, and
        the turn it goes to."""
        if isinstance(other, ModelState):
            raise ArgumentError(where, other, "text, a hole, a program or a function call (not another state)")
        piece = _as_program(other)
        block = ACTIVE_BLOCK.get()
        scope = self._scope
        if block is not None:
            if scope is not None and block.scope != scope:
                raise ArgumentError(f"with {block.role}()", block, f"outside other turns (inside a {scope.role} turn)")
            scope = block.scope
        return piece, block, scope

    def __radd__(self, other: Any) -> ModelState:
        raise ArgumentError("... + lm", other, "written after the state: lm + 'text', not 'text' + lm")

    # -- reading -----------------------------------------------------------------------------

    def _open_turn(self) -> Scope | None:
        """The turn still being written: the last one, while its block (or the role piece
        a function runs in) is open."""
        last = self._tr.last_scope()
        if last is None:
            return None
        if self._block is not None and self._block.active and self._block.scope == last:
            return last
        return last if self._scope == last else None

    @property
    def text(self) -> str:
        """All the text: plain, or (with turns) the conversation in the chat template."""
        with limits_in_force(self._limits) if self._limits is not None else nullcontext():
            return self._tr.render(self.model, self._options, open_turn=self._open_turn())

    def __str__(self) -> str:
        return self.text

    def __getitem__(self, name: str) -> Any:
        """The value captured under ``name`` (None where the hole's output was incomplete:
        see `errors`)."""
        try:
            return self._tr.captures[name]
        except KeyError:
            known = ", ".join(map(repr, sorted(self._tr.captures))) or "none yet"
            raise KeyError(f"no capture named {name!r} (captured: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tr.captures

    def get(self, name: str, default: Any = None) -> Any:
        return self._tr.captures.get(name, default)

    @property
    def captures(self) -> dict[str, Any]:
        """Every capture by name (a copy)."""
        return dict(self._tr.captures)

    @property
    def errors(self) -> dict[str, str]:
        """Why a capture is None: its hole's output was incomplete under its constraint."""
        return dict(self._tr.errors)

    @property
    def costs(self) -> Costs:
        """What the appends since the first state cost on the model."""
        return self._tr.costs.snapshot()

    def _repr_html_(self) -> str:
        """The notebook view: the text with the holes highlighted and named, the chat
        template's markup dimmed (`tether.program.view`)."""
        with limits_in_force(self._limits) if self._limits is not None else nullcontext():
            return render_html(state_spans(self.model, self._tr, self._options, self._open_turn()))

    def __repr__(self) -> str:
        text = self._tr.plain_text()
        shown = text if len(text) <= 60 else text[:28] + "…" + text[-28:]
        return f"ModelState({getattr(self.model, 'name', 'model')!r}, {shown!r}, captures={sorted(self._tr.captures)})"


def state_spans(model: Any, tr: Transcript, options: RunOptions, open_turn: Scope | None) -> list[Span]:
    """The state's text as view spans: its chunks (holes with their `HoleInfo`) and,
    with turns, the chat template's markup between them.

    The markup is found by rendering the conversation with a placeholder for each turn's
    content. Each turn's content is then matched in the text ``str(lm)`` shows, as
    written or with its leading and/or trailing whitespace removed (templates trim it);
    if the text is not exactly markup and contents in turn, the view is the text alone."""
    chunks = [Span(c.text, "hole", c.hole) if c.hole is not None else Span(c.text) for c in tr.chunks]
    if not tr.chat and open_turn is None:
        return chunks
    text = tr.render(model, options, open_turn=open_turn)
    # one message per run of chunks of one turn, as Transcript.render groups them
    groups: list[tuple[Scope | None, list[Span]]] = []
    for c, span in zip(tr.chunks, chunks, strict=True):
        if groups and groups[-1][0] == c.scope:
            groups[-1][1].append(span)
        else:
            groups.append((c.scope, [span]))
    groups = [(s, g) for s, g in groups if s is not None or "".join(x.text for x in g).strip()]
    marks = [f"\ue000{i}\ue001" for i in range(len(groups))]
    skeleton = Transcript(tuple(Chunk(m, s) for m, (s, _) in zip(marks, groups, strict=True)), chat=True)
    last = skeleton.chunks[-1].scope if skeleton.chunks else None
    try:
        frame = skeleton.render(model, options, open_turn=open_turn if last == open_turn else None)
    except TetherError:
        return [Span(text)]
    markups: list[str] = []
    for m in marks:
        before, found, frame = frame.partition(m)
        if not found:
            return [Span(text)]
        markups.append(before)
    markups.append(frame)
    spans: list[Span] = []
    pos = 0
    for k, (_, group) in enumerate(groups):
        if not text.startswith(markups[k], pos):
            return [Span(text)]
        spans.append(Span(markups[k], "markup"))
        pos += len(markups[k])
        content = "".join(x.text for x in group)
        for a, b in _trims(content):
            after = pos + b - a
            if text.startswith(content[a:b], pos) and (
                    text.startswith(markups[k + 1], after) if k + 1 < len(groups) else text[after:] == markups[-1]):
                spans.extend(_cut(group, a, b))
                pos = after
                break
        else:
            return [Span(text)]
    spans.append(Span(markups[-1], "markup"))
    return [s for s in spans if s.text]


def _trims(content: str) -> list[tuple[int, int]]:
    """``content[a:b]`` as written, without its trailing, leading, or both whitespaces."""
    a = len(content) - len(content.lstrip())
    b = len(content.rstrip())
    return [(0, len(content)), (0, b), (a, len(content)), (a, max(a, b))]


def _cut(group: list[Span], a: int, b: int) -> list[Span]:
    """The spans covering characters ``[a, b)`` of their joined text."""
    out, pos = [], 0
    for span in group:
        lo, hi = max(a - pos, 0), min(b - pos, len(span.text))
        if lo < hi:
            out.append(replace(span, text=span.text[lo:hi]))
        pos += len(span.text)
    return out


@dataclass(frozen=True, eq=False)
class Call(Deferred):
    """A `function` called with its arguments: written when its turn comes."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]

    def apply(self, model: Any, transcript: Transcript, options: RunOptions, scope: Scope | None) -> Transcript:
        start = ModelState._of(model, transcript, options, None, ACTIVE_BLOCK.get(), scope)
        out = self.fn(start, *self.args, **dict(self.kwargs))
        name = getattr(self.fn, "__qualname__", "the function")
        if not isinstance(out, ModelState):
            raise ArgumentError(f"the return value of {name}", out, "the model state it was given, with its appends")
        n = len(transcript.chunks)
        if out.model is not model or out._tr.chunks[:n] != transcript.chunks:
            raise ArgumentError(f"the return value of {name}", out,
                                "a state grown from the one it was given (lm + ...), on the same model")
        return out._tr


def function(fn: Callable[..., Any]) -> Callable[..., Call]:
    """Make ``fn(lm, *args, **kwargs)`` — which appends to ``lm`` and returns the grown
    state — into a piece: ``lm += fn(*args, **kwargs)``.

        @function
        def qa(lm, question):
            with user():
                lm += question
            with assistant():
                lm += gen("answer", stop="\\n", max_tokens=20)
            return lm

        lm = ModelState(model) + qa("Is the sky blue?")

    The call is a piece like any other: it may sit in a `Program` (``"x" + qa("...")``)
    or in a role turn, where ``fn``'s appends go into that turn.
    """
    if not callable(fn):
        raise ArgumentError("function(fn)", fn, "a function taking the model state first")

    @functools.wraps(fn)
    def make(*args: Any, **kwargs: Any) -> Call:
        return Call(fn, args, tuple(kwargs.items()))

    return make


def add_to_model(model: Any, piece: Any) -> ModelState:
    """``model + piece``: a fresh `ModelState` on ``model`` (default options) with
    ``piece`` written (registered as the models layer's add idiom)."""
    state: ModelState = ModelState(model) + piece  # `+` with an Any operand is typed Any
    return state


IDIOMS.add = add_to_model
