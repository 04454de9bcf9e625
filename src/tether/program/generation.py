"""What `generate` returns: a `Generation` (one output), or a `Stream` of its text chunks.

Both the local path (`tether.program.generate`) and the black-box path
(`tether.program.remote`) build them, so they live here, below both.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from tether.errors import ModelError
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.models.base import Costs
from tether.program.outputs import OutputSpec
from tether.program.partial import Partials


@dataclass
class Generation:
    """One generated output.

    Attributes:
        text: the output text (after the prompt; healed prompt text not repeated).
        tokens: generated token ids.
        value: the typed value (parsed JSON, model instance, choice, or the text);
            None when the output is incomplete or does not parse (see ``error``).
        logprob: log-probability of the sampled tokens under the constrained distribution.
        finish_reason: "stop", "length" or "error".
        costs: what this call cost on the model (calls, tokens).
        error: why ``value`` is None, if it is.
        prompt: the prompt text as the model saw it (chat rendered).
    """

    text: str
    tokens: list[int] = field(default_factory=list)
    value: Any = None
    logprob: float = 0.0
    finish_reason: str = "stop"
    costs: Costs = field(default_factory=Costs)
    error: str | None = None
    prompt: str = ""

    @property
    def valid(self) -> bool:
        """The output is complete under its constraint and its value parsed."""
        return self.error is None

    def __str__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        """The notebook view: the prompt, then the output highlighted (`tether.program.view`)."""
        from tether.program.view import generation_html

        return generation_html(self)


class Stream:
    """A generation streamed as it is decoded (``generate(..., stream=True)``).

    Iterate it for the text chunks; `partials` gives the typed value as it grows;
    `result` (or ``generation`` once the chunks are consumed) gives the final
    `Generation`. The three share one pass over the decoding: `partials` and `result`
    read what iteration has not read yet (partials start from the whole text so far).

        s = generate(model, prompt, Character, stream=True)
        for value in s.partials():
            print(value)                 # {}, {'name': ''}, {'name': 'Al'}, ...
        s.result().value                 # Character(name='Al', ...)
    """

    def __init__(self, chunks: Iterator[str], *, spec: OutputSpec | None = None,
                 limits: Limits | None = None) -> None:
        self._source = chunks
        self._chunks = self._read()
        self._seen: list[str] = []  # every chunk read so far
        self._spec = spec
        self._limits = limits
        self.generation: Generation | None = None

    @property
    def spec(self) -> OutputSpec | None:
        """The lowered output (None: not known, read as free text)."""
        return self._spec

    @property
    def limits(self) -> Limits | None:
        """The limits the call runs under (None: the ones in force)."""
        return self._limits

    def _read(self) -> Generator[str, None, None]:
        for chunk in self._source:
            self._seen.append(chunk)
            yield chunk

    def __iter__(self) -> Iterator[str]:
        return self._chunks

    def __next__(self) -> str:
        return next(self._chunks)

    def close(self) -> None:
        """Stop decoding here (the model is left ready for the next call); idempotent."""
        self._chunks.close()
        if isinstance(self._source, Generator):
            self._source.close()

    def text(self) -> str:
        """Consume the rest and return the whole text."""
        for _ in self._chunks:
            pass
        return self.generation.text if self.generation is not None else "".join(self._seen)

    def result(self) -> Generation:
        """Consume the rest and return the final `Generation`.

        Raises ModelError if the stream ended without one (it was closed early)."""
        for _ in self._chunks:
            pass
        if self.generation is None:
            raise ModelError("the stream ended without a result (it was closed before the output was complete)")
        return self.generation

    def partials(self) -> Iterator[Any]:
        """The value as it grows, one partial value per change (`tether.program.partial`).

        JSON outputs (a JSON Schema, a Pydantic model, a Python type) give the JSON value
        decoded so far: an object is the dict of its members so far, the string in
        progress included as the part written so far; an array the list of its items so
        far; a number once it is complete. Pydantic models and Python types give these
        plain dicts and lists (`result` holds the validated value). Text, regex, choices
        and grammar outputs give the text so far; a triggered output (``after=``) the
        partials of its constrained part, once the trigger has appeared. When the output
        is complete, the last partial equals ``json.loads(result().text)`` (JSON outputs)
        or ``result().value`` (the others). Completed members are shared between
        successive partials: treat them as read-only.

        Raises PartialJsonError if a JSON output's text stops being JSON (the output
        broke its constraint), LimitError past ``Limits.max_json_depth``.
        """
        reader = partials_reader(self._spec, self._limits, self._seen)
        shown = reader.has_value
        if shown:
            yield reader.value
        for chunk in self._chunks:
            if reader.feed(chunk) and reader.has_value:
                shown = True
                yield reader.value
        if (reader.finish() or not shown) and reader.has_value:
            yield reader.value


def partials_reader(spec: OutputSpec | None, lim: Limits | None, seen: Sequence[str]) -> Partials:
    """The partial-value reader of a stream (under its limits), fed the chunks already read."""
    with limits_in_force(lim) if lim is not None else nullcontext():
        reader = Partials(spec)
    for chunk in list(seen):
        reader.feed(chunk)
    return reader
