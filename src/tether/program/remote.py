"""`generate` for black-box models (OpenAI-compatible HTTP): forward the constraint, validate.

The constraint goes in the field the server enforces it by (`constraint_fields`);
where the server cannot enforce it, a `ConstraintError` says so before any request
(never free text passed off as constrained):

==================  ======================  ======================  ======================  ======================
server              JSON Schema             regex                   choices                 Grammar
==================  ======================  ======================  ======================  ======================
tether              structured_outputs      structured_outputs      structured_outputs      structured_outputs
                    .json                   .regex (python flavor)  .choice                 .grammar (GBNF)
vllm                structured_outputs      structured_outputs      structured_outputs      structured_outputs
                    .json (+ whitespace:    .regex                  .choice                 .grammar (GBNF)
                    disable_any_whitespace
                    or whitespace_pattern)
llama.cpp           json_schema             grammar (GBNF)          grammar (GBNF)          grammar (GBNF)
llama-cpp-python    chat: response_format   grammar (GBNF)          grammar (GBNF)          grammar (GBNF)
                    json_object + schema;
                    completions: refused
openai              chat: response_format   refused                 chat: response_format   refused
                    json_schema, strict;                            enum in an object;
                    completions: refused                            completions: refused
==================  ======================  ======================  ======================  ======================

GBNF comes from `tether.grammar.gbnf_writer.to_gbnf`, which writes a grammar only when
its language stays the same (GBNF/KBNF grammars, choices, single regexes without
anchors or look-around) and refuses the rest. OpenAI's strict mode wants an object at
the root: other schemas and choices travel wrapped in ``{"value": ...}`` /
``{"choice": ...}`` and are unwrapped on return.

A black-box model object without a ``server`` attribute (a user's own adapter) gets
``response_format`` for schemas and nothing for other constraints.

Every result is validated here: JSON against the schema (``jsonschema`` when
installed, else parsing plus the Pydantic/type check), choices by membership, regexes
by a full match (tether's regex layer), grammars by tether's parser; a failure sets
``Generation.error`` and ``value=None``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tether.decoding.decoders import Argmax, Beam, BestOf, Decoder, Sample
from tether.errors import ArgumentError, ConstraintError, GrammarError, ModelError, limited
from tether.models.base import Costs
from tether.program.generation import Generation, Stream
from tether.program.outputs import DEFAULT_OPTIONS, OutputOptions, OutputSpec, Regex, output_spec

SERVERS = ("tether", "vllm", "llama.cpp", "llama-cpp-python", "openai")


def _sampling(dec: Decoder, server: str | None) -> dict[str, Any]:
    if isinstance(dec, Argmax):
        return {"temperature": 0.0}
    s = dec.sample if isinstance(dec, BestOf) else dec
    assert isinstance(s, Sample)
    out: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p, "seed": s.seed}
    if server != "openai":  # extensions of llama.cpp, vLLM and tether; the OpenAI API refuses them
        if s.top_k:
            out["top_k"] = s.top_k
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
        return None, f"the server's output does not parse as {spec.kind}: {type(exc).__name__}: {limited(str(exc), 200)}"
    if spec.kind == "choices" and text not in (spec.choices or []):
        return None, f"the server's output {limited(text)} is not one of the choices"
    if spec.kind == "regex" and spec.pattern is not None and not _full_match(spec, text):
        return None, f"the server's output {limited(text)} does not match the regex"
    if spec.kind == "json" and spec.schema is not None:
        try:
            import jsonschema
        except ImportError:
            pass
        else:
            try:
                jsonschema.validate(value, spec.schema)
            except jsonschema.ValidationError as exc:
                return None, f"the server's output breaks the schema: {limited(exc.message, 200)}"
            except Exception as exc:  # noqa: BLE001 -- the validator failing on this schema: not validated
                return None, f"the server's output could not be validated: {type(exc).__name__}: {limited(str(exc), 200)}"
    if spec.kind == "grammar" and spec.grammar is not None:
        from tether.parser import accepts

        try:
            ok = accepts(spec.grammar, text.encode())
        except Exception as exc:  # noqa: BLE001 -- reported on the result
            return None, f"the server's output could not be checked against the grammar: {type(exc).__name__}"
        if not ok:
            return None, "the server's output is not in the grammar's language"
    return value, None


@dataclass(frozen=True)
class RemoteConstraint:
    """The request fields that carry a constraint to one server, and how to read the reply.

    Attributes:
        fields: added to the request body.
        unwrap: the key of the object the server's JSON answer is wrapped in (OpenAI strict
            mode wants an object at the root), or None.
    """

    fields: dict[str, Any]
    unwrap: str | None = None

    def output_text(self, text: str) -> str:
        """The output as the constraint reads it: the wrapped value (JSON text for a
        schema, the string for a choice), or ``text`` when it is not a wrapped answer."""
        if self.unwrap is None:
            return text
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return text
        if not isinstance(obj, dict) or set(obj) != {self.unwrap}:
            return text
        inner = obj[self.unwrap]
        if self.unwrap == "choice" and isinstance(inner, str):
            return inner
        return json.dumps(inner, ensure_ascii=False, separators=(",", ":"))


def _gbnf(spec: OutputSpec, server: str) -> str:
    from tether.grammar.gbnf_writer import to_gbnf

    assert spec.grammar is not None
    try:
        return to_gbnf(spec.grammar)
    except GrammarError as exc:
        raise ConstraintError(f"the {server} server takes this {spec.kind} constraint as GBNF, and it cannot be "
                              f"written as GBNF: {exc}") from None


def _refuse(server: str, what: str, how: str) -> ConstraintError:
    return ConstraintError(f"the {server} server cannot enforce {what}; {how}")


def _schema_of(spec: OutputSpec, server: str) -> dict[str, Any]:
    if spec.schema is None:
        raise _refuse(server, "a boolean schema", "give the schema as an object ({} accepts any JSON)")
    return spec.schema


def _vllm_whitespace(whitespace: Any) -> dict[str, Any]:
    """vLLM's fields for tether's JSON ``whitespace=`` option. vLLM allows any whitespace by
    default, on which a small model can loop until its budget: the default here, compact,
    asks for none."""
    if isinstance(whitespace, Regex):
        return {"whitespace_pattern": whitespace.pattern}
    if whitespace == "compact":
        return {"disable_any_whitespace": True}
    if whitespace == "flexible":
        return {}
    raise _refuse("vllm", f"the JSON layout whitespace={whitespace!r}",
                  "use 'compact', 'flexible' or a whitespace regex")


def constraint_fields(server: str | None, spec: OutputSpec, *, chat: bool) -> RemoteConstraint:
    """The request fields that ask ``server`` to enforce ``spec`` (see the module table).

    ``server`` None: a black-box object of unknown kind (``response_format`` for schemas).

    Raises:
        ConstraintError: the server cannot enforce this constraint (names the server and
            what to do instead).
    """
    kind = spec.kind
    if kind == "text":
        return RemoteConstraint({})
    if kind == "triggered":
        raise _refuse(server or "remote", "a triggered region (after=)", "generate the free part and the "
                      "constrained part in two calls")
    is_json = kind in ("json", "pydantic", "type")
    if server is None:
        if is_json:
            return RemoteConstraint({"response_format": _json_schema_format(_schema_of(spec, "remote"))})
        return RemoteConstraint({})
    if server in ("tether", "vllm"):
        if is_json:
            fields: dict[str, Any] = {"json": _schema_of(spec, server)}
            if server == "vllm":
                fields.update(_vllm_whitespace(spec.extra.get("whitespace", "compact")))
            return RemoteConstraint({"structured_outputs": fields})
        if kind == "regex":
            if server == "tether" and spec.extra.get("flavor", "python") != "python":
                raise _refuse(server, "an ECMAScript-flavor regex", "tether serve reads python-flavor patterns")
            return RemoteConstraint({"structured_outputs": {"regex": spec.pattern}})
        if kind == "choices":
            return RemoteConstraint({"structured_outputs": {"choice": list(spec.choices or [])}})
        return RemoteConstraint({"structured_outputs": {"grammar": _gbnf(spec, server)}})
    if server in ("llama.cpp", "llama-cpp-python"):
        if is_json:
            schema = _schema_of(spec, server)
            if server == "llama.cpp":
                return RemoteConstraint({"json_schema": schema})
            if not chat:
                raise _refuse(server, "a JSON schema on a completion request",
                              "give the prompt as chat messages (the server takes response_format there), "
                              "or use llama.cpp's llama-server or tether serve")
            return RemoteConstraint({"response_format": {"type": "json_object", "schema": schema}})
        return RemoteConstraint({"grammar": _gbnf(spec, server)})
    if server == "openai":
        if kind in ("regex", "grammar"):
            raise _refuse(server, f"a {kind}", "the OpenAI API takes JSON schemas only (response_format); use a "
                          "server that takes it (vLLM, llama.cpp, tether serve)")
        if not chat:
            raise _refuse(server, f"a {kind} constraint on a completion request",
                          "give the prompt as chat messages (response_format applies to chat completions)")
        if kind == "choices":
            schema = {"type": "object", "properties": {"choice": {"type": "string", "enum": list(spec.choices or [])}},
                      "required": ["choice"], "additionalProperties": False}
            return RemoteConstraint({"response_format": _json_schema_format(schema)}, unwrap="choice")
        schema = _schema_of(spec, server)
        if schema.get("type") == "object":
            return RemoteConstraint({"response_format": _json_schema_format(schema)})
        wrapped = {"type": "object", "properties": {"value": schema}, "required": ["value"],
                   "additionalProperties": False}
        if "$defs" in schema:  # references stay resolvable from the new root
            wrapped["$defs"] = schema["$defs"]
        return RemoteConstraint({"response_format": _json_schema_format(wrapped)}, unwrap="value")
    raise ArgumentError("server", server, f"one of {', '.join(SERVERS)}")


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": True}}


def _server_of(model: Any, spec: OutputSpec, decoder: Decoder) -> str | None:
    """The model's server kind, when the request depends on it (an OpenAIModel probes its
    server the first time): constrained outputs, and sampling (the OpenAI API refuses
    ``top_k``/``min_p``). Free text by argmax needs no probe."""
    if spec.kind == "text" and isinstance(decoder, Argmax):
        return None
    server = getattr(model, "server", None)
    return server if isinstance(server, str) and server in SERVERS else None


def _text_of(reply: dict[str, Any], chat: bool, url: str) -> tuple[str, str]:
    """The output text and finish reason of a completion reply; ModelError for a malformed one."""
    choices = reply.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        raise ModelError(f"{url} answered without choices: {limited(reply, 200)}")
    if chat:
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
        text = "" if text is None else text
    else:
        text = choice.get("text", "")
    if not isinstance(text, str):
        raise ModelError(f"{url} answered with a text that is not a string: {limited(text, 200)}")
    return text, str(choice.get("finish_reason") or "stop")


def _one(model: Any, prompt: Any, spec: OutputSpec, rc: RemoteConstraint, params: dict[str, Any]) -> Generation:
    """One request for one output, validated."""
    chat = not isinstance(prompt, str)
    before = model.costs.snapshot()
    model.costs.generate_calls += 1
    send: Callable[..., dict[str, Any]] = model.chat if chat else model.complete
    reply = send(prompt, **rc.fields, **params)
    text, finish = _text_of(reply, chat, getattr(model, "name", "the server"))
    text = rc.output_text(text)
    value, error = _validate(spec, text)
    costs: Costs = model.costs.snapshot() - before
    return Generation(text=text, value=value, finish_reason="length" if finish == "length" else "stop",
                      costs=costs, error=error, prompt=prompt if isinstance(prompt, str) else "")


def fill_hole(model: Any, prompt: str, spec: OutputSpec, *, decoder: Decoder, max_tokens: int,
              stop: Sequence[str]) -> Generation:
    """A Program hole (``gen``/``select``) on a black-box model: one request with the text
    before the hole as the prompt and the hole's constraint in the server's field.

    Raises ConstraintError where the server cannot enforce the hole's constraint."""
    server = _server_of(model, spec, decoder)
    rc = constraint_fields(server, spec, chat=False)
    params = _sampling(decoder, server)
    params.update(max_tokens=max_tokens, stop=list(stop) or None)
    return _one(model, prompt, spec, rc, params)


def generate_remote(model: Any, prompt: Any, output: Any, *, decoder: Decoder, max_tokens: int,
                    stop: Sequence[str], n: int, stream: bool, options: OutputOptions = DEFAULT_OPTIONS,
                    ) -> Generation | list[Generation] | list[list[Generation]] | Stream:
    """The black-box path of `generate` (one prompt or a batch; ``n`` requests per prompt)."""
    if isinstance(decoder, Beam):
        raise ArgumentError("decoder", "beam", "argmax, sample or best_of: beam search needs the model's logits, "
                            "which an HTTP model does not offer")
    spec = output_spec(output, options)
    server = _server_of(model, spec, decoder)
    if stream:
        return _stream_remote(model, prompt, spec, decoder, max_tokens, stop, server)
    is_chat = isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt)
    batch = isinstance(prompt, list | tuple) and not is_chat
    prompts = list(prompt) if batch else [prompt]
    count = 1 if isinstance(decoder, Argmax) else decoder.n
    # every prompt's fields first: a refused constraint fails before any request
    fields = [constraint_fields(server, spec, chat=not isinstance(p, str)) for p in prompts]
    results: list[Generation | list[Generation]] = []
    for p, rc in zip(prompts, fields, strict=True):
        gens: list[Generation] = []
        for i in range(count):
            params = _sampling(decoder, server)
            if params.get("seed") is not None:
                params["seed"] = params["seed"] + i
            params.update(max_tokens=max_tokens, stop=list(stop) or None)
            gens.append(_one(model, p, spec, rc, params))
        if isinstance(decoder, BestOf):
            gens = gens[:1]  # no log-probabilities to rank by: the first sample
        results.append(gens[0] if count == 1 or isinstance(decoder, BestOf) else gens)
    if batch:  # one shape for every prompt
        return cast(list[Generation] | list[list[Generation]], results)
    return results[0]


def _stream_remote(model: Any, prompt: Any, spec: OutputSpec, decoder: Decoder, max_tokens: int,
                   stop: Sequence[str], server: str | None) -> Stream:
    """Streamed text from the server; the `Stream`'s ``generation`` is validated at the end."""
    if isinstance(prompt, list | tuple) and not (prompt and all(isinstance(m, dict) for m in prompt)):
        raise ArgumentError("stream", True, "False for a batch on an HTTP model")
    chat = not isinstance(prompt, str)
    rc = constraint_fields(server, spec, chat=chat)
    if rc.unwrap is not None:
        raise ArgumentError("stream", True, f"False for this output on the {server} server (its answer comes "
                            "wrapped in an object and is unwrapped once complete)")
    params = _sampling(decoder, server)
    params.update(max_tokens=max_tokens, stop=list(stop) or None)

    def chunks() -> Any:
        before = model.costs.snapshot()
        model.costs.generate_calls += 1
        pieces = []
        for piece in model.stream(prompt, chat=chat, **rc.fields, **params):
            pieces.append(piece)
            yield piece
        text = "".join(pieces)
        value, error = _validate(spec, text)
        s.generation = Generation(text=text, value=value, costs=model.costs.snapshot() - before, error=error,
                                  prompt=prompt if isinstance(prompt, str) else "")

    s = Stream(chunks(), spec=spec)
    return s
