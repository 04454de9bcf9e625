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

Arguments are checked when a hole is made (`ArgumentError`, a ``ValueError``); a hole
whose output is not complete under its constraint (cut by a stop text or its token
budget) captures ``None`` and records why in ``result.errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from tether import limits
from tether.decoding import Argmax, Sample, decode
from tether.decoding.decoders import ArgumentError, check_bool, check_int, check_number, check_seed
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.models.base import Costs
from tether.program.arguments import check_limits_arg, check_stop
from tether.program.generate import compile_output, prepare_prompt, region_options, to_generation
from tether.program.outputs import (
    DEFAULT_OPTIONS,
    OutputOptions,
    OutputSpec,
    Regex,
    check_output_options,
    output_spec,
    triggered_spec,
)


class Piece:
    """A part of a program: text or a hole. ``+`` joins pieces into a `Program`."""

    def __add__(self, other: Any) -> Program:
        return Program((self,)) + other

    def __radd__(self, other: Any) -> Program:
        return _as_program(other) + self


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


def _as_program(x: Any) -> Program:
    if isinstance(x, Program):
        return x
    if isinstance(x, str):
        return Program((Text(x),))
    if isinstance(x, Piece):
        return Program((x,))
    raise ArgumentError("a program piece", x, "a str, gen(), select() or a program")


@dataclass
class ProgramResult:
    """The filled program: ``text`` (prompt text and holes), ``captures`` by name."""

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
    """A sequence of text and holes; run it with `run`."""

    pieces: tuple[Piece, ...] = ()

    def __add__(self, other: Any) -> Program:
        return Program(self.pieces + _as_program(other).pieces)

    def __radd__(self, other: Any) -> Program:
        return _as_program(other) + self

    def run(self, model: Any, *, temperature: float | None = None, seed: int | None = None,
            healing: bool = True, fast_forward: bool = True, limits: Limits | None = None) -> ProgramResult:
        """Fill the holes left to right. Argmax unless a temperature is given (then each
        hole samples with seed ``seed + hole index``, reproducibly). ``limits`` runs the
        whole program under those `tether.limits.Limits`."""
        if temperature is not None:
            check_number("temperature", temperature, 0.0)
        check_seed(seed)
        check_bool("healing", healing)
        check_bool("fast_forward", fast_forward)
        active = check_limits_arg(limits)
        with limits_in_force(active) if active is not None else nullcontext():
            return self._run(model, temperature, seed, healing, fast_forward)

    def _run(self, model: Any, temperature: float | None, seed: int | None, healing: bool,
             fast_forward: bool) -> ProgramResult:
        if isinstance(model, str) or model is None:
            from tether.models import load_model

            model = load_model(model)
        text = ""
        result = ProgramResult("")
        before = model.costs.snapshot()
        hole = 0
        for piece in self.pieces:
            if isinstance(piece, Text):
                text += piece.text
                continue
            if isinstance(piece, Program):  # nested program: inline it
                sub = piece._run(model, temperature, seed, healing, fast_forward)
                text += sub.text
                result.captures.update(sub.captures)
                result.errors.update(sub.errors)
                continue
            assert isinstance(piece, Gen | Select)
            spec = piece.spec()
            cc = compile_output(model, spec)
            limits.check("max_prompt_chars", len(text), "the program text before a hole")
            pp = prepare_prompt(model, text, healing=healing, chat_template=None)
            temp = piece.temperature if isinstance(piece, Gen) and piece.temperature is not None else temperature
            dec = Sample(temperature=temp, seed=None if seed is None else seed + hole) if temp else Argmax()
            max_tokens = piece.max_tokens if isinstance(piece, Gen) else 64
            stop = list(piece.stop) if isinstance(piece, Gen) else []
            [d] = decode(model, pp.tokens, cc.matcher() if cc is not None else None, dec, heal=pp.heal,
                         max_tokens=max_tokens, stop=stop, fast_forward=fast_forward,
                         close_on_budget=piece.close_on_budget, **region_options(spec, max_tokens))
            g = to_generation(model, d, spec, Costs(), pp.text)
            text += g.text
            if piece.name is not None:
                value = g.value  # None when the output is not complete (see errors)
                if piece.list_append:
                    result.captures.setdefault(piece.name, []).append(value)
                else:
                    result.captures[piece.name] = value
                if g.error:
                    result.errors[piece.name] = g.error
            hole += 1
        result.text = text
        result.costs = model.costs.snapshot() - before
        return result

    __call__ = run
