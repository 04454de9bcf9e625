"""`generate`: one call from a model, a prompt and an ``output`` type to a typed result.

Steps: resolve the model (`tether.models.load_model` for strings), render chat messages
with the model's own template, tokenize, plan token healing (plain-text prompts), lower
``output`` to a grammar (`tether.program.outputs`), compile it for the model's
vocabulary (cached by the engine), decode, and parse the value. Black-box models (HTTP
APIs) take the remote path (`tether.program.remote`), where the server enforces what it
can and tether validates the rest.

Fail closed: every argument is checked first (`tether.program.arguments`: a bad type or
value raises `ArgumentError`, a value past the active `Limits` raises `LimitError`), and
no backend exception other than a `TetherError` leaves the call. ``limits=`` runs the
whole call (model loading, compiling, decoding; a stream's chunks too) under those limits.

Truthful results: ``Generation.valid`` is True only when the returned text is complete
under its constraint. An output cut by a stop text or by the token budget (or by a full
context window) that is not complete has ``valid=False``, ``value=None``, the
``finish_reason`` ("stop" or "length") and the reason in ``error``.
"""

from __future__ import annotations

import codecs
import sys
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack, cast, overload

from tether.decoding import Argmax, Beam, BestOf, Decoded, Sample, decode, decode_iter, plan_healing
from tether.decoding.decoders import (
    DECODER_NAMES,
    Decoder,
    check_bool,
    make_decoder,
    parse_decoder_call,
)
from tether.decoding.logits import model_call
from tether.decoding.tokenize import tokens_for_bytes
from tether.errors import ArgumentError
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.models.base import Costs, is_black_box
from tether.program.arguments import check_limits_arg, check_options, check_prompt
from tether.program.chat import render_chat, tokenize_rendered
from tether.program.generation import Generation, Stream, partials_reader
from tether.program.outputs import (
    OutputOptions,
    OutputSpec,
    check_output_options,
    output_spec,
    triggered_spec,
)
from tether.program.remote import generate_remote

# `Generation`, `Stream` and `partials_reader` live in `generation.py` (the remote path
# builds them too); this module re-exports them for the callers that import them from here.
__all__ = ["Generation", "PreparedPrompt", "Stream", "canonical_tokenizer", "compile_output", "generate",
           "partials_reader", "prepare_prompt", "region_options", "resolve_decoder", "to_generation"]


def resolve_decoder(decoder: str | Decoder, *, n: int, temperature: float | None, top_k: int,
                    top_p: float, min_p: float, seed: int | None) -> Decoder:
    """A decoder object from ``generate``'s arguments.

    ``decoder`` is a decoder value, a name (``"argmax"``, ``"sample"``, ``"beam"``,
    ``"best_of"``) or a call with constant keywords (``"beam(n=3)"``,
    ``"sample(temperature=0.7)"``), whose keywords win over ``generate``'s. ``"argmax"``
    with a positive ``temperature`` samples (what a temperature asks for).
    Raises ArgumentError for unknown names, unknown keywords and bad values.
    """
    if isinstance(decoder, Argmax | Sample | Beam | BestOf):
        return decoder
    if not isinstance(decoder, str):
        raise ArgumentError("decoder", decoder, "a decoder name, a call such as 'beam(n=3)', or a decoder value")
    name, args = parse_decoder_call(decoder)
    method = DECODER_NAMES.get(name)
    if method is None:
        raise ArgumentError("decoder", decoder, "one of 'argmax', 'sample', 'beam', 'best_of'")
    temp = args.get("temperature", temperature)
    if method == "argmax" and temp and "n" not in args:
        method = "sample"  # a temperature asks for sampling
    base: dict[str, object] = {"n": n}
    if method in ("sample", "best_of"):
        base.update(temperature=1.0 if temperature is None else temperature, top_k=top_k, top_p=top_p,
                    min_p=min_p, seed=seed)
    if method == "argmax" and n != 1 and "n" not in args:
        raise ArgumentError("n", n, "1 for argmax (use decoder='sample', 'beam' or 'best_of')")
    return make_decoder(method, {**base, **args})


_TOKENIZERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def canonical_tokenizer(model: Any) -> Any:
    """One ``bytes -> token ids`` function per model (a stable key for the engine cache)."""
    try:
        fn = _TOKENIZERS.get(model)
    except TypeError:  # not weak-referenceable: a fresh function (the engine cache misses)
        fn = None
    if fn is None:
        ref = weakref.ref(model) if hasattr(type(model), "__weakref__") else (lambda: model)

        def fn(data: bytes) -> list[int]:
            m = ref()
            if m is None:
                raise ValueError("the model of this tokenizer was garbage-collected")
            return tokens_for_bytes(m, data)

        try:
            _TOKENIZERS[model] = fn
        except TypeError:
            pass
    return fn


def _progress(message: str) -> Any:
    """Context manager printing ``message… done (s)`` on a terminal for slow steps."""

    class _P:
        def __enter__(self) -> None:
            self.t0 = time.perf_counter()

        def __exit__(self, *exc: object) -> None:
            dt = time.perf_counter() - self.t0
            if dt > 1.0 and sys.stderr.isatty():
                print(f"tether: {message} ({dt:.1f} s)", file=sys.stderr)

    return _P()


def compile_output(model: Any, spec: OutputSpec) -> Any | None:
    """The engine's compiled constraint for ``spec`` on ``model`` (None for free text)."""
    if spec.grammar is None:
        return None
    from tether.engine import compile as compile_constraint

    with _progress(f"compiled the {spec.kind} constraint for {getattr(model, 'name', 'the model')}"):
        return compile_constraint(spec.grammar, model.vocabulary, tokenize=canonical_tokenizer(model))


def region_options(spec: OutputSpec, max_tokens: int) -> dict[str, Any]:
    """Budget closing of a triggered output's free region: the triggers, and the tokens
    kept for the constrained part (a quarter of the budget, 8 to 64 tokens, at most half).
    Beam search closes whole outputs (it takes no region options)."""
    if spec.kind != "triggered":
        return {}
    return {"close_at": list(spec.extra["after"]), "reserve": min(max(8, max_tokens // 4), 64, max_tokens // 2)}


@dataclass
class PreparedPrompt:
    text: str
    tokens: list[int]
    heal: bytes


def prepare_prompt(model: Any, prompt: Any, *, healing: bool | int, chat_template: str | None) -> PreparedPrompt:
    """Render (chat), tokenize and plan healing for one prompt."""
    if isinstance(prompt, str):
        tokens = list(model_call(model, lambda: model.tokenize(prompt, add_bos=True)))
        heal = b""
        if healing:
            tokens, heal = plan_healing(model.vocabulary, tokens, int(healing))
        return PreparedPrompt(prompt, tokens, heal)
    text = render_chat(model, prompt, chat_template=chat_template)
    return PreparedPrompt(text, tokenize_rendered(model, text), b"")


def to_generation(model: Any, d: Decoded, spec: OutputSpec, costs: Costs, prompt: str) -> Generation:
    text = d.text.decode("utf-8", "replace")
    value, error = None, d.error
    if d.finish_reason == "error":
        error = error or "decoding stopped: the constraint allowed no token"
    elif spec.grammar is not None and not d.complete:
        if d.stop_text is not None:
            cause = f"cut by the stop text {d.stop_text.decode('utf-8', 'replace')!r}"
        elif d.finish_reason == "length":
            cause = "cut by the token budget or the context window (finish_reason 'length')"
        else:
            cause = f"ended ({d.finish_reason}) before it was complete"
        error = f"output incomplete under the {spec.kind} constraint: {cause}"
    else:
        try:
            value = spec.parse(text)
        except Exception as exc:  # noqa: BLE001 -- reported on the result
            error = f"{type(exc).__name__}: {exc}"
    return Generation(text=text, tokens=d.tokens, value=value, logprob=d.logprob,
                      finish_reason=d.finish_reason, costs=costs, error=error, prompt=prompt)


Message = Mapping[str, Any]
"""A chat message: ``{"role": ..., "content": ...}``."""
OnePrompt = str | Sequence[Message]
"""One prompt: a string, or a conversation (a list of chat messages)."""
Batch = list[str] | list[list[Message]] | list[str | list[Message]]
"""Several prompts: a list of strings and conversations."""


class GenerateOptions(TypedDict, total=False):
    """The keyword options of `generate` that do not change the shape of what it returns
    (the overloads' ``**options``; each is described in `generate`)."""

    decoder: str | Decoder
    max_tokens: int
    temperature: float | None
    top_k: int
    top_p: float
    min_p: float
    seed: int | None
    stop: str | Sequence[str] | None
    healing: bool | int
    fast_forward: bool
    close_on_budget: bool
    strict: bool
    whitespace: Any
    number_bounds: Any
    after: Any
    stop_outside: bool
    selective: bool
    chat_template: str | None
    limits: Limits | None


@overload
def generate(model: Any, prompt: OnePrompt, output: Any = None, *, n: Literal[1] = 1,
             stream: Literal[False] = False, **options: Unpack[GenerateOptions]) -> Generation: ...
@overload
def generate(model: Any, prompt: OnePrompt, output: Any = None, *, n: Literal[1] = 1,
             stream: Literal[True], **options: Unpack[GenerateOptions]) -> Stream: ...
@overload
def generate(model: Any, prompt: OnePrompt, output: Any = None, *, n: int,
             stream: Literal[False] = False, **options: Unpack[GenerateOptions]) -> Generation | list[Generation]: ...
@overload
def generate(model: Any, prompt: Batch, output: Any = None, *, n: Literal[1] = 1, stream: Literal[False] = False,
             **options: Unpack[GenerateOptions]) -> list[Generation]: ...
@overload
def generate(model: Any, prompt: Batch, output: Any = None, *, n: int, stream: Literal[False] = False,
             **options: Unpack[GenerateOptions]) -> list[Generation] | list[list[Generation]]: ...
def generate(
    model: Any,
    prompt: Any,
    output: Any = None,
    *,
    decoder: str | Decoder = "argmax",
    max_tokens: int = 256,
    temperature: float | None = None,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    seed: int | None = None,
    n: int = 1,
    stop: str | Sequence[str] | None = None,
    healing: bool | int = True,
    fast_forward: bool = True,
    close_on_budget: bool = True,
    strict: bool = True,
    whitespace: Any = "compact",
    number_bounds: Any = None,
    after: Any = None,
    stop_outside: bool = True,
    stream: bool = False,
    selective: bool = True,
    chat_template: str | None = None,
    limits: Limits | None = None,
) -> Generation | list[Generation] | list[list[Generation]] | Stream:
    """Generate from ``model`` after ``prompt`` under ``output``.

    Args:
        model: a model object or a spec for `tether.models.load_model` ("embedded", a
            .gguf path, a transformers directory, an http(s) URL).
        prompt: a string; a list of chat messages (``{"role", "content"}`` dicts, rendered
            with the model's own chat template); or a list of either (a batch).
        output: None, ``regex(...)``, a list of choices, a JSON Schema dict, a Pydantic
            model, a Python type or a Grammar (see `tether.program.outputs`).
        decoder: "argmax", "sample", "beam", "best_of" or a decoder object.
        n: samples (sample), beams returned (beam), candidates (best_of).
        stop: text(s) that end the output (not included).
        healing: token healing of a plain-text prompt's last token (int: up to that many).
        fast_forward: append forced tokens without sampling.
        close_on_budget: when ``max_tokens`` would cut a structured output, close it
            validly with the constraint's shortest completion (on by default; free text
            is never closed). ``False``: a cut output has ``valid=False``, value None.
        strict: schema outputs (JSON Schema dicts, Pydantic models, Python types) are
            compiled for generation (default True): closed objects (only the declared
            properties, each at most once, unless the schema says ``additionalProperties``
            or the Pydantic model has ``extra="allow"``) and bounded numbers (at most 19
            integer digits, 17 fraction digits and 3 exponent digits where the schema sets
            no bound; the schema's own bounds win). ``False``: the specification's
            language (open objects, numbers of any length).
        whitespace: JSON layout of schema outputs: ``"compact"`` (default, no
            whitespace), ``"flexible"`` (up to 16 whitespace characters around every
            ``{ } [ ] , :``), ``"pretty"`` (indent 2) or ``regex("...")`` (that JSON
            whitespace pattern in every gap).
        number_bounds: a ``tether.grammar.json_schema.NumberBounds`` for other digit
            bounds (applied with ``strict=False`` too).
        after: a triggered region: free text until a trigger string appears, then the
            constrained ``output`` (``after="</think>"``). A list of triggers shares
            ``output``; a dict ``{trigger: output}`` gives each its own (``output`` must be
            None): the first trigger to appear picks the output. ``Generation.text``
            holds all of it (free text, trigger, constrained part); ``value`` is the
            constrained part parsed. Budget closing keeps room for the trigger and the
            constrained part.
        stop_outside: where the output is complete, the model's probability of the tokens
            the constraint forbids counts as ending it (on by default: an ``int`` ends
            after the digits the model means, not at its digit bound; the mask is
            unchanged). Beam search does not use it.
        stream: return a `Stream` of text chunks (one prompt, one output).
        selective: let a backend with selective logits compute allowed rows only.
        chat_template: a Jinja chat template for messages (default: the model's own).
        limits: run the whole call under these `tether.limits.Limits` (default: the ones
            in force).

    Returns:
        One prompt: a `Generation`; for ``n > 1`` a list of them (sample and beam; best_of
        returns the best only; beam may return fewer than ``n`` when fewer outputs exist);
        a `Stream` with ``stream=True``. A batch (a list of prompts): a list with one entry
        per prompt, each what one prompt gives. The overloads of this signature say so to
        a type checker.

    Raises:
        ArgumentError: an argument of the wrong type or out of range (names it).
        LimitError: an argument or the work it asks for exceeds the `Limits` in force.
        ConstraintError, SchemaError, RegexError, GrammarError: ``output`` cannot be compiled.
        ContextLengthError: the prompt alone does not fit the model's context window.
        ModelError: the model cannot be loaded, has no chat template for messages, or failed.
        MissingDependencyError: says which extra to install.
    """
    active = check_limits_arg(limits)
    with limits_in_force(active) if active is not None else nullcontext():
        oopts = check_output_options(strict, whitespace, number_bounds)
        check_bool("stop_outside", stop_outside)
        return _generate(model, prompt, output, decoder=decoder, max_tokens=max_tokens, temperature=temperature,
                         top_k=top_k, top_p=top_p, min_p=min_p, seed=seed, n=n, stop=stop, healing=healing,
                         fast_forward=fast_forward, close_on_budget=close_on_budget, stream=stream,
                         selective=selective, chat_template=chat_template, active=active, oopts=oopts, after=after,
                         stop_outside=stop_outside)


def _generate(model: Any, prompt: Any, output: Any, *, decoder: Any, max_tokens: Any, temperature: Any,
              top_k: Any, top_p: Any, min_p: Any, seed: Any, n: Any, stop: Any, healing: Any,
              fast_forward: Any, close_on_budget: Any, stream: Any, selective: Any, chat_template: Any,
              active: Limits | None, oopts: OutputOptions, after: Any,
              stop_outside: bool) -> Generation | list[Generation] | list[list[Generation]] | Stream:
    opts = check_options(max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                         min_p=min_p, seed=seed, n=n, stop=stop, healing=healing, fast_forward=fast_forward,
                         close_on_budget=close_on_budget, stream=stream, selective=selective,
                         chat_template=chat_template)
    batch, prompts = check_prompt(prompt)
    dec = resolve_decoder(decoder, n=opts.n, temperature=temperature, top_k=top_k, top_p=top_p,
                          min_p=min_p, seed=seed)
    spec = output_spec(output, oopts) if after is None else triggered_spec(after, output, oopts)
    if isinstance(model, str) or model is None:
        from tether.models import load_model

        with _progress(f"loaded model {model or 'embedded'}"):
            model = load_model(model)
    stops = opts.stop
    if opts.stream and (batch or isinstance(dec, Beam | BestOf) or dec.n != 1):
        raise ArgumentError("stream", True, "False unless there is one prompt and one output (argmax, or sample with n=1)")
    if is_black_box(model):
        if after is not None:
            raise ArgumentError("after", after, "None for a black-box (HTTP) model: the server cannot enforce a "
                                "triggered region")
        return generate_remote(model, prompt, output, decoder=dec, max_tokens=opts.max_tokens, stop=stops,
                               n=opts.n, stream=opts.stream, options=oopts)
    cc = compile_output(model, spec)
    options = dict(max_tokens=opts.max_tokens, stop=stops, fast_forward=opts.fast_forward,
                   close_on_budget=opts.close_on_budget, selective=opts.selective, stop_outside=stop_outside,
                   **region_options(spec, opts.max_tokens))
    healing = opts.healing
    if opts.stream:
        pp = prepare_prompt(model, prompts[0], healing=healing, chat_template=chat_template)
        return _stream(model, pp, spec, cc, dec, options, active)
    results: list[Generation | list[Generation]] = []
    for p in prompts:
        pp = prepare_prompt(model, p, healing=healing, chat_template=chat_template)
        before = model.costs.snapshot()
        ds = decode(model, pp.tokens, cc.matcher() if cc is not None else None, dec, heal=pp.heal, **options)
        costs = model.costs.snapshot() - before
        gens = [to_generation(model, d, spec, costs, pp.text) for d in ds]
        single = isinstance(dec, Argmax | BestOf) or getattr(dec, "n", 1) == 1
        results.append(gens[0] if single and gens else gens)
    if batch:  # one shape for every prompt: n, the decoder and the stream are the call's
        return cast(list[Generation] | list[list[Generation]], results)
    return results[0]


def _stream(model: Any, pp: PreparedPrompt, spec: OutputSpec, cc: Any, dec: Decoder, options: dict[str, Any],
            active: Limits | None) -> Stream:
    def chunks() -> Iterator[str]:
        before = model.costs.snapshot()
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        sent = 0
        last: Decoded | None = None
        opts = dict(options)
        stops = opts.pop("stop")
        from tether.decoding.stops import StopScanner

        scanner = StopScanner(stops)  # mirrors the decoder's, to know what is safe to show
        with limits_in_force(active) if active is not None else nullcontext():
            steps = decode_iter(model, pp.tokens, cc.matcher() if cc is not None else None, dec,
                                heal=pp.heal, stop=stops, **opts)
        while True:
            # each step runs under the call's limits (the consumer iterates outside them)
            with limits_in_force(active) if active is not None else nullcontext():
                state = next(steps, None)
            if state is None:
                break
            last = state[0]
            scanner.text, scanner.hit = bytearray(last.text), last.stop_text
            safe = scanner.safe_length()  # a tail that may start a stop text waits
            if safe > sent:
                piece = utf8.decode(bytes(last.text[sent:safe]))
                sent = safe
                if piece:
                    yield piece
        if last is not None and len(last.text) > sent:
            yield utf8.decode(bytes(last.text[sent:]), final=True)
        if last is not None:
            stream_obj.generation = to_generation(model, last, spec, model.costs.snapshot() - before, pp.text)

    stream_obj = Stream(chunks(), spec=spec, limits=active)
    return stream_obj
