"""Limits on what a user's or a request's input may make tether do.

Every input is hostile until checked: grammar text, schemas, regexes, query text and
generation arguments may come from strangers (a server request, a schema handed through
an integration). Each bound below is checked where the input enters or where work grows,
and exceeding one raises `LimitError` (a ``ValueError``) naming the limit, the value and
the place. The defaults are generous: everything in the project's test corpora compiles.

One `Limits` object holds them all. The active one is a context variable, so a server or
a caller can set tighter ones for one call without threading them through every layer::

    from tether.limits import Limits, limits

    with limits(Limits(max_repeat=1000, compile_seconds=2.0)):
        compile(schema, vocab)

``generate(..., limits=...)``, ``Query.run(limits=...)`` and the server's options do the
same. `current()` reads the active limits; `check()` compares one value against one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace

from .errors import LimitError

__all__ = ["Limits", "LimitError", "current", "limits", "check", "deadline", "check_deadline"]


@dataclass(frozen=True)
class Limits:
    """Bounds on input size and on the work one input may cause. All are inclusive maxima.

    Attributes:
        max_text_chars: characters of one grammar, regex, schema (as JSON text) or query.
        max_rules: rules of one grammar, after the front end expands it.
        max_nesting: nesting depth of any input structure: regex groups, grammar
            parentheses, JSON Schema subschemas, query expressions.
        max_repeat: a repeat count: ``{m,n}`` in a regex, GBNF, Lark or EBNF, and the
            ``minItems``/``maxItems``/``minLength``/``maxLength``/``minContains``/
            ``maxContains`` of a schema (an unbounded ``{m,}`` has only its ``m`` checked).
        max_expanded: symbols of a grammar after repeats are expanded (the product of
            nested counts is what this bounds).
        max_alternatives: alternatives of one alternation, choice list or enum.
        max_dfa_states: states of one lazily built lexer DFA.
        max_earley_items: Earley items the parser may hold in one step.
        compile_seconds: wall time of one compile (grammar, schema, regex, tables).
        completion_states: states the shortest-completion search may visit.
        completion_bytes: bytes of a shortest completion.
        max_json_depth: nesting depth of a JSON document read from input (a schema, a
            request body) and of a value written under a recursive schema.
        max_prompt_chars: characters of one prompt (rendered chat included).
        max_tokens: the largest ``max_tokens`` a generation may ask for.
        max_n: the largest ``n`` (samples, beams, candidates) of one generation.
        max_batch: prompts of one batch, and rows of one batched mask call.
    """

    max_text_chars: int = 8_000_000
    max_rules: int = 200_000
    max_nesting: int = 200
    max_repeat: int = 100_000
    max_expanded: int = 2_000_000
    max_alternatives: int = 1_000_000
    max_dfa_states: int = 50_000
    max_earley_items: int = 1_000_000
    compile_seconds: float = 60.0
    completion_states: int = 20_000
    completion_bytes: int = 1_000_000
    max_json_depth: int = 200
    max_prompt_chars: int = 10_000_000
    max_tokens: int = 1_000_000
    max_n: int = 1_000
    max_batch: int = 4_096

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise LimitError(f.name, v, None, detail="every limit must be a positive number")

    def replace(self, **changes: int | float) -> Limits:
        """A copy with some limits changed (unknown names raise LimitError)."""
        known = {f.name for f in fields(self)}
        for k in changes:
            if k not in known:
                raise LimitError(k, changes[k], None, detail=f"no such limit; known: {sorted(known)}")
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULT = Limits()
_ACTIVE: ContextVar[Limits] = ContextVar("tether_limits", default=DEFAULT)
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("tether_deadline", default=None)


def current() -> Limits:
    """The limits in force in this context (the defaults unless `limits` set others)."""
    return _ACTIVE.get()


@contextmanager
def limits(value: Limits | None = None, **changes: int | float) -> Iterator[Limits]:
    """Use ``value`` (or the current limits with ``changes``) inside the ``with`` block."""
    if value is not None and not isinstance(value, Limits):
        raise LimitError("limits", type(value).__name__, None, detail="expected a tether.Limits")
    new = (value or current()).replace(**changes) if changes else (value or current())
    token = _ACTIVE.set(new)
    try:
        yield new
    finally:
        _ACTIVE.reset(token)


def check(name: str, value: int | float, place: str = "") -> None:
    """Raise LimitError if ``value`` exceeds the current limit ``name``."""
    maximum = getattr(_ACTIVE.get(), name)
    if value > maximum:
        raise LimitError(name, value, maximum, place)


@contextmanager
def deadline(what: str = "compile") -> Iterator[None]:
    """Bound the wall time of the work inside the block by ``Limits.compile_seconds``.

    Nested blocks keep the outermost deadline. Long loops call `check_deadline`.
    """
    if _DEADLINE.get() is not None:
        yield
        return
    seconds = _ACTIVE.get().compile_seconds
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_deadline(place: str = "") -> None:
    """Raise LimitError('compile_seconds') if the enclosing `deadline` has passed."""
    d = _DEADLINE.get()
    if d is not None and time.monotonic() > d[0]:
        raise LimitError("compile_seconds", f"more than {d[1]:g} s", d[1], place)
