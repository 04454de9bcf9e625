"""`generate` for black-box models (OpenAI-compatible HTTP): pass through, then validate.

See `tether.models.openai_http` for what each output kind guarantees remotely. Every
result is validated here: JSON against the schema (``jsonschema`` when installed, else
parsing plus the Pydantic/type check), choices by membership, regexes by a full match
(Python ``re``), grammars by the reference recognizer; a failure sets
``Generation.error`` and ``value=None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.decoding.decoders import Argmax, ArgumentError, Beam, BestOf, Decoder, Sample
from tether.models.base import Costs
from tether.program.generate import Generation
from tether.program.outputs import DEFAULT_OPTIONS, OutputOptions, OutputSpec, output_spec


def _sampling(dec: Decoder) -> dict[str, Any]:
    if isinstance(dec, Argmax):
        return {"temperature": 0.0}
    s = dec.sample if isinstance(dec, BestOf) else dec
    assert isinstance(s, Sample)
    out: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "seed": s.seed}
    if s.top_k:
        out["top_k"] = s.top_k  # a common extension (llama.cpp, vLLM)
    if s.min_p:
        out["min_p"] = s.min_p
    return out


def _full_match(spec: OutputSpec, text: str) -> bool:
    """``text`` is in the regex's language, as the constraint reads it (tether's own regex
    layer: linear time, no backtracking on a hostile pattern)."""
    from tether.regex import matches, parse

    return matches(parse(spec.pattern or "", flavor=spec.extra.get("flavor", "python")), text)


def _validate(spec: OutputSpec, text: str) -> tuple[Any, str | None]:
    try:
        value = spec.parse(text)
    except Exception as exc:  # noqa: BLE001
        return None, f"the server's output does not parse as {spec.kind}: {type(exc).__name__}: {exc}"
    if spec.kind == "choices" and text not in (spec.choices or []):
        return None, f"the server's output {text!r} is not one of the choices"
    if spec.kind == "regex" and spec.pattern is not None and not _full_match(spec, text):
        return None, f"the server's output {text[:80]!r} does not match the regex"
    if spec.kind == "json" and spec.schema is not None:
        try:
            import jsonschema
        except ImportError:
            pass
        else:
            try:
                jsonschema.validate(value, spec.schema)
            except jsonschema.ValidationError as exc:
                return None, f"the server's output breaks the schema: {exc.message}"
            except Exception as exc:  # noqa: BLE001 -- the validator failing on this schema: not validated
                return None, f"the server's output could not be validated: {type(exc).__name__}: {exc}"
    if spec.kind == "grammar" and spec.grammar is not None:
        try:
            from tether.parser import accepts  # type: ignore[attr-defined]
        except ImportError:
            pass
        else:
            if not accepts(spec.grammar, text.encode()):
                return None, "the server's output is not in the grammar's language"
    return value, None


def _response_format(spec: OutputSpec) -> dict[str, Any] | None:
    if spec.schema is None:
        return None
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": spec.schema, "strict": True}}


def _text_of(reply: dict[str, Any], chat: bool) -> tuple[str, str]:
    choice = reply["choices"][0]
    text = choice["message"].get("content") or "" if chat else choice.get("text", "")
    return text, str(choice.get("finish_reason") or "stop")


def _choices_by_logit_bias(model: Any, prompt: str, options: list[str], params: dict[str, Any]) -> tuple[str, int]:
    """Pick an option token by token (Guidance's select over HTTP). Returns (text, requests)."""
    bos = model.tokenize("")
    seqs = []
    for o in options:
        toks = model.tokenize(o)
        seqs.append(toks[len(bos):] if toks[: len(bos)] == bos else toks)
    done: list[int] = []
    requests = 0
    while True:
        live = [s for s in seqs if s[: len(done)] == done]
        complete = any(len(s) == len(done) for s in live)
        nxt = sorted({s[len(done)] for s in live if len(s) > len(done)})
        if not nxt:
            break
        if len(nxt) == 1 and not complete:  # forced: no request needed
            done.append(nxt[0])
            continue
        text_so_far = model.detokenize(done).decode("utf-8", "replace") if done else ""
        bias = {str(t): 100 for t in nxt}
        reply = model.complete(prompt + text_so_far, max_tokens=1, logit_bias=bias,
                               **{k: v for k, v in params.items() if k not in ("stop", "max_tokens")})
        requests += 1
        piece = reply["choices"][0].get("text", "")
        if reply["choices"][0].get("finish_reason") == "stop" and not piece and complete:
            break
        got = model.tokenize(piece)
        got = got[len(bos):] if got[: len(bos)] == bos else got
        if not got or got[0] not in nxt:
            # the server ignored the bias (or stopped): end with what matches, if anything
            if complete:
                break
            return text_so_far + piece, requests
        done.append(got[0])
    return model.detokenize(done).decode("utf-8", "replace"), requests


def _request(model: Any, prompt: Any, chat: bool, fmt: dict[str, Any] | None, params: dict[str, Any]) -> dict[str, Any]:
    """One completion request; ``fmt`` in the standard ``json_schema`` form, or, for
    servers that only know llama-cpp-python's ``{"type": "json_object", "schema": ...}``
    form, in that form (learnt from the first refusal, then remembered on the model)."""
    from tether.errors import ModelError

    send = model.chat if chat else model.complete
    if fmt is not None and getattr(model, "response_format_style", "json_schema") == "json_object":
        fmt = {"type": "json_object", "schema": fmt["json_schema"]["schema"]}
    try:
        return send(prompt, response_format=fmt, **params)  # type: ignore[no-any-return]
    except ModelError as exc:
        if fmt is None or fmt.get("type") != "json_schema" or "json_object" not in str(exc):
            raise
    model.response_format_style = "json_object"
    alt = {"type": "json_object", "schema": fmt["json_schema"]["schema"]}
    return send(prompt, response_format=alt, **params)  # type: ignore[no-any-return]


def generate_remote(model: Any, prompt: Any, output: Any, *, decoder: Decoder, max_tokens: int,
                    stop: Sequence[str], n: int, stream: bool, options: OutputOptions = DEFAULT_OPTIONS) -> Any:
    """The black-box path of `generate` (one prompt or a batch; ``n`` requests per prompt)."""
    if isinstance(decoder, Beam):
        raise ArgumentError("decoder", "beam", "argmax, sample or best_of: beam search needs the model's logits, "
                            "which an HTTP model does not offer")
    spec = output_spec(output, options)
    if stream:
        return _stream_remote(model, prompt, spec, decoder, max_tokens, stop)
    is_chat = isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt)
    batch = isinstance(prompt, list | tuple) and not is_chat
    prompts = list(prompt) if batch else [prompt]
    count = 1 if isinstance(decoder, Argmax) else decoder.n
    results = []
    for p in prompts:
        chat = not isinstance(p, str)
        gens = []
        for i in range(count):
            params = _sampling(decoder)
            if params.get("seed") is not None:
                params["seed"] = params["seed"] + i
            params.update(max_tokens=max_tokens, stop=list(stop) or None)
            before = model.costs.snapshot()
            model.costs.generate_calls += 1
            finish = "stop"
            if spec.kind == "choices" and not chat and getattr(model, "has_tokenizer", False):
                text, _ = _choices_by_logit_bias(model, p, list(spec.choices or []), params)
            else:
                fmt = _response_format(spec)
                if spec.kind == "choices":  # chat / no tokenizer: an enum schema
                    fmt = {"type": "json_schema", "json_schema": {"name": "choice", "strict": True,
                                                                  "schema": {"type": "string", "enum": spec.choices}}}
                reply = _request(model, p, chat, fmt, params)
                text, finish = _text_of(reply, chat)
                if spec.kind == "choices":
                    import json

                    try:
                        text = json.loads(text)
                    except ValueError:
                        pass
            value, error = _validate(spec, text)
            costs: Costs = model.costs.snapshot() - before
            gens.append(Generation(text=text, value=value, finish_reason="length" if finish == "length" else "stop",
                                   costs=costs, error=error, prompt=p if isinstance(p, str) else ""))
        if isinstance(decoder, BestOf):
            gens = gens[:1]  # no log-probabilities to rank by: the first sample
        results.append(gens[0] if count == 1 or isinstance(decoder, BestOf) else gens)
    return results if batch else results[0]


def _stream_remote(model: Any, prompt: Any, spec: OutputSpec, decoder: Decoder, max_tokens: int,
                   stop: Sequence[str]) -> Any:
    """Streamed text from the server; the `Stream`'s ``generation`` is validated at the end.
    Choices are not streamed (they take one request per token)."""
    from tether.program.generate import Stream

    if spec.kind == "choices" or isinstance(prompt, list | tuple) and not (prompt and all(isinstance(m, dict) for m in prompt)):
        raise ArgumentError("stream", True, "False for a batch or a list of choices on an HTTP model")
    chat = not isinstance(prompt, str)
    params = _sampling(decoder)
    params.update(max_tokens=max_tokens, stop=list(stop) or None)
    fmt = _response_format(spec)
    if fmt is not None and getattr(model, "response_format_style", "json_schema") == "json_object":
        fmt = {"type": "json_object", "schema": fmt["json_schema"]["schema"]}

    def chunks() -> Any:
        before = model.costs.snapshot()
        model.costs.generate_calls += 1
        pieces = []
        for piece in model.stream(prompt, chat=chat, response_format=fmt, **params):
            pieces.append(piece)
            yield piece
        text = "".join(pieces)
        value, error = _validate(spec, text)
        s.generation = Generation(text=text, value=value, costs=model.costs.snapshot() - before, error=error,
                                  prompt=prompt if isinstance(prompt, str) else "")

    s = Stream(chunks())
    return s
