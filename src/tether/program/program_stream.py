"""Programs streamed hole by hole: ``lm.stream(piece)`` and ``program.stream(model)``.

A streamed program writes exactly what ``lm + piece`` / ``program.run(model)`` writes
(the same walk, `compose.write_steps`, and the same hole plan, `compose.plan_hole`), and
shows each hole while it is decoded: a `HoleEvent` per change of the hole's value (its
capture name, its text so far and its typed partial value, as ``Stream.partials`` gives
them: a JSON output's dict or list so far, the text so far for text, regex, choice and
grammar holes), then one with ``done=True`` and the captured value. `ProgramStream.result`
gives the final state (``lm.stream``) or `ProgramResult` (``program.stream``).

    stream = lm.stream("Name: " + gen("name", stop="\\n") + "Age: " + gen("age", output=int))
    for event in stream:
        print(event.name, event.value)   # name 'J', name 'Jo', ..., age 3, age 31 (done)
    lm = stream.result()

Each step runs under the state's (or the call's) limits. Holes written by a `function`
call are filled inside it without events; a black-box HTTP model answers a hole in one
request (one ``done`` event). ``close()`` stops after the current token; the holes not
decoded yet are not written.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Generator, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tether.decoding import Decoded, decode, decode_iter
from tether.decoding.stops import StopScanner
from tether.errors import ModelError
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.models.base import Costs
from tether.program.compose import (
    Gen,
    RunOptions,
    Scope,
    Select,
    Transcript,
    plan_hole,
    remote_generation,
    with_hole,
    write_steps,
)
from tether.program.generate import to_generation
from tether.program.partial import Partials

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
