"""The options of every decoding entry point, written once.

`DecodeOptions` types the keywords `decode`, `decode_iter` and `beam_search` take;
`Settings` holds them with their defaults (the triggers as bytes), and `settings` checks
them with the decoder and the prompt before the first model call. The steps (`loop.py`,
`beam.py`) and the query language's holes read a `Settings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from tether.decoding.decoders import Decoder, check_bool, check_int, check_limits
from tether.decoding.logits import check_prompt_fits
from tether.errors import ArgumentError


class DecodeOptions(TypedDict, total=False):
    """Keywords of `decode`, `decode_iter` and `beam_search` (defaults: `Settings`).

    * ``max_tokens``: the token budget.
    * ``stop``: texts that end the output (not part of it).
    * ``heal``: the text token healing removed from the end of the prompt
      (`tether.decoding.healing.plan_healing`); the output starts by writing it again,
      and it is not part of the output.
    * ``fast_forward``: append forced tokens without a model call.
    * ``close_on_budget``: when the next token would leave no room for the shortest
      completion of the constraint, append that completion instead.
    * ``selective``: let a backend compute the allowed rows of the logits only.
    * ``close_at``, ``reserve``: budget closing of a free region (a triggered output):
      its triggers, and the tokens kept for the constrained part after one.
    * ``stop_outside``: where the output is complete, what the constraint forbids counts
      as EOS (see `tether.decoding.loop`).
    """

    max_tokens: int
    stop: Sequence[str | bytes]
    heal: bytes
    fast_forward: bool
    close_on_budget: bool
    selective: bool
    close_at: Sequence[str | bytes]
    reserve: int
    stop_outside: bool


@dataclass(frozen=True)
class Settings:
    """`DecodeOptions` with their defaults; ``triggers`` is ``close_at`` as bytes."""

    max_tokens: int = 256
    stop: Sequence[str | bytes] = ()
    heal: bytes = b""
    fast_forward: bool = True
    close_on_budget: bool = False
    selective: bool = True
    close_at: Sequence[str | bytes] = ()
    reserve: int = 0
    stop_outside: bool = True
    triggers: tuple[bytes, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        triggers = tuple(t.encode() if isinstance(t, str) else bytes(t) for t in self.close_at)
        object.__setattr__(self, "triggers", triggers)


def settings(model: Any, prompt_tokens: Sequence[int], decoder: Decoder, options: DecodeOptions) -> Settings:
    """``options`` with their defaults, checked with ``decoder`` and the prompt (it must
    fit the model's context window): the checks every entry point makes before the first
    model call. Raises ArgumentError, LimitError, ContextLengthError."""
    if not isinstance(decoder, Decoder):
        raise ArgumentError("decoder", decoder, "an Argmax, Sample, Beam or BestOf")
    check_limits(decoder)
    s = Settings(**options)
    check_int("max_tokens", s.max_tokens, minimum=0, limit="max_tokens")
    if isinstance(s.stop, str | bytes) or not all(isinstance(t, str | bytes) and t for t in s.stop):
        raise ArgumentError("stop", s.stop, "a list of non-empty strings")
    check_int("reserve", s.reserve, minimum=0)
    check_bool("stop_outside", s.stop_outside)
    check_prompt_fits(model, prompt_tokens)
    return s
