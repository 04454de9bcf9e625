"""Outlines-style calls: ``model(prompt, output)`` and a reusable `Generator`.

    model = tether.load_model()
    answer = model("2 + 2 = ", int, max_tokens=4)     # a str: "4"
    answer.value                                       # 4 (the typed value)

    digits = tether.Generator(model, tether.regex(r"[0-9]{3}"), max_tokens=8)
    digits("Three digits: ").value, digits("Another three: ").value

``model(prompt, output=None, **options)`` is `tether.generate` with the same options; it
returns a `GeneratedText`: a ``str`` (the output text) that carries ``.value`` (the
typed value), ``.valid``, ``.error`` and ``.generation`` (the whole `Generation`). With
``n > 1`` or a batch of prompts it returns lists of them, as `generate` does;
``stream=True`` returns the `Stream`.

`Generator(model, output, **defaults)` checks its model, output and options, lowers the
output and compiles it for the model once, when it is made: a bad output or option
raises there. Every call passes the lowered output (`OutputSpec`) to `generate`, which
finds the compiled constraint in the engine's compile cache (lowering a Pydantic model
again would cost a few milliseconds per call). Calls take `generate`'s options, which override the defaults, except those that
shape the constraint (``strict``, ``whitespace``, ``number_bounds``, ``after``): they are
fixed when the generator is made. ``gen.stream(prompt, **options)`` returns a `Stream`.

The models layer sits below this one, so a model's ``__call__`` finds `call_model`
through the registry `tether.models.base.IDIOMS`, which this module fills on import.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

from tether.decoding.decoders import check_bool
from tether.errors import ArgumentError
from tether.limits import limits as limits_in_force
from tether.models.base import IDIOMS, is_black_box
from tether.program.arguments import check_limits_arg, check_options
from tether.program.compose import check_model
from tether.program.generate import Generation, Stream, compile_output, generate, resolve_decoder
from tether.program.outputs import OutputSpec, check_output_options, output_spec, triggered_spec

#: generate's keyword options and their defaults (the source of truth is its signature)
GENERATE_OPTIONS: Mapping[str, Any] = {
    name: p.default for name, p in inspect.signature(generate).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}
#: the options that shape the constraint: fixed when a Generator is made
SHAPE_OPTIONS = frozenset({"strict", "whitespace", "number_bounds", "after"})


class GeneratedText(str):
    """The text of one generation (this ``str``), carrying what else it produced.

    Attributes:
        generation: the whole `Generation` (tokens, log-probability, costs, prompt).
    """

    __slots__ = ("generation",)
    generation: Generation

    def __new__(cls, generation: Generation) -> GeneratedText:
        if not isinstance(generation, Generation):
            raise ArgumentError("GeneratedText(generation)", generation, "a Generation")
        self = super().__new__(cls, generation.text)
        self.generation = generation
        return self

    @property
    def value(self) -> Any:
        """The typed value (None when the output is incomplete or does not parse: see
        ``error``)."""
        return self.generation.value

    @property
    def valid(self) -> bool:
        """The output is complete under its constraint and its value parsed."""
        return self.generation.valid

    @property
    def error(self) -> str | None:
        """Why ``value`` is None, if it is."""
        return self.generation.error

    def __reduce__(self) -> tuple[Any, ...]:
        return (GeneratedText, (self.generation,))

    def _repr_html_(self) -> str:
        """The notebook view of the generation (`tether.program.view`)."""
        return self.generation._repr_html_()


def _typed(result: Any) -> Any:
    """`generate`'s result with each `Generation` as a `GeneratedText` (lists kept)."""
    if isinstance(result, Generation):
        return GeneratedText(result)
    if isinstance(result, list):
        return [_typed(r) for r in result]
    return result  # a Stream


def _check_names(options: Mapping[str, Any], where: str) -> None:
    unknown = sorted(k for k in options if k not in GENERATE_OPTIONS)
    if unknown:
        raise ArgumentError(f"{where}: option {unknown[0]!r}", options[unknown[0]],
                            f"left out: the options are generate's ({', '.join(sorted(GENERATE_OPTIONS))})")


def call_model(model: Any, prompt: Any, output: Any = None, /, **options: Any) -> Any:
    """``model(prompt, output, **options)``: `generate` with the same options, each
    `Generation` returned as a `GeneratedText` (registered as the models layer's call
    idiom)."""
    _check_names(options, "model(prompt, output, ...)")
    return _typed(generate(model, prompt, output, **options))


class Generator:
    """A model and an output type, compiled once, called on many prompts.

    Args:
        model: a model, or a name for `tether.load_model` (None: the embedded model).
        output: anything `generate` takes as ``output`` (None: free text).
        defaults: `generate`'s options for every call (a call's own options win, except
            ``strict``, ``whitespace``, ``number_bounds`` and ``after``, fixed here).
            ``stream`` is not one: call `stream` instead.

    Raises:
        ArgumentError: an unknown or bad option (named), or ``stream``.
        ConstraintError, SchemaError, RegexError, GrammarError: ``output`` cannot be
            lowered or compiled.
        LimitError: past the `Limits` in force (or ``limits=``).
        ModelError: the model cannot be loaded.
    """

    __slots__ = ("constraint", "defaults", "model", "output", "spec")

    def __init__(self, model: Any = None, output: Any = None, **defaults: Any) -> None:
        _check_names(defaults, "Generator(...)")
        if "stream" in defaults:
            raise ArgumentError("Generator(stream=...)", defaults["stream"], "left out: call gen.stream(prompt)")
        active = check_limits_arg(defaults.get("limits"))
        with limits_in_force(active) if active is not None else nullcontext():
            merged = {**GENERATE_OPTIONS, **defaults}
            _check_values(merged)
            self.model = check_model(model)
            self.output = output
            self.spec = _spec(output, merged)
            # compiled now: a call finds it in the engine's compile cache
            self.constraint = None if is_black_box(self.model) else compile_output(self.model, self.spec)
        self.defaults = dict(defaults)

    def _options(self, options: Mapping[str, Any], where: str) -> dict[str, Any]:
        _check_names(options, where)
        fixed = sorted(SHAPE_OPTIONS & options.keys())
        if fixed:
            raise ArgumentError(f"{where}: option {fixed[0]!r}", options[fixed[0]],
                                "left out: it shapes the constraint, which is fixed when the Generator is made")
        if "stream" in options:
            raise ArgumentError(f"{where}: option 'stream'", options["stream"], "left out: call gen.stream(prompt)")
        return {**self.defaults, **options}

    def _generate(self, prompt: Any, options: dict[str, Any]) -> Any:
        if self.constraint is None and is_black_box(self.model):
            return generate(self.model, prompt, self.output, **options)  # the server gets the output itself
        # the lowered output, with the options that shaped it left out (they are in it)
        opts = {k: v for k, v in options.items() if k not in SHAPE_OPTIONS}
        return generate(self.model, prompt, self.spec, **opts)

    def __call__(self, prompt: Any, /, **options: Any) -> Any:
        """`generate` on ``prompt`` with the defaults and ``options``: a `GeneratedText`
        (lists of them for ``n > 1`` or a batch of prompts)."""
        return _typed(self._generate(prompt, self._options(options, "gen(prompt, ...)")))

    def stream(self, prompt: Any, /, **options: Any) -> Stream:
        """A `Stream` of the output's text chunks (its ``generation`` once consumed)."""
        result: Stream = self._generate(prompt, {**self._options(options, "gen.stream(prompt, ...)"), "stream": True})
        return result

    def __repr__(self) -> str:
        return f"Generator({getattr(self.model, 'name', 'model')!r}, {self.spec.kind})"


def _check_values(o: Mapping[str, Any]) -> None:
    """The checks `generate` makes before any work, on the options of a `Generator`."""
    check_options(max_tokens=o["max_tokens"], temperature=o["temperature"], top_k=o["top_k"], top_p=o["top_p"],
                  min_p=o["min_p"], seed=o["seed"], n=o["n"], stop=o["stop"], healing=o["healing"],
                  fast_forward=o["fast_forward"], close_on_budget=o["close_on_budget"], stream=o["stream"],
                  selective=o["selective"], chat_template=o["chat_template"])
    check_bool("stop_outside", o["stop_outside"])
    resolve_decoder(o["decoder"], n=o["n"], temperature=o["temperature"], top_k=o["top_k"], top_p=o["top_p"],
                    min_p=o["min_p"], seed=o["seed"])


def _spec(output: Any, o: Mapping[str, Any]) -> OutputSpec:
    """``output`` lowered as `generate` lowers it."""
    oopts = check_output_options(o["strict"], o["whitespace"], o["number_bounds"])
    after = o["after"]
    return output_spec(output, oopts) if after is None else triggered_spec(after, output, oopts)


IDIOMS.call = call_model
