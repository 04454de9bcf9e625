"""`generate` on HTTP models: the exact request body each server gets, refusals, errors.

The server is an ``httpx.MockTransport`` that records each request and answers with a
fixed output (the live servers are in tests/integration/test_remote_*.py).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tether.decoding import Argmax
from tether.errors import ConstraintError, ModelError
from tether.grammar import Grammar
from tether.models.openai_http import OpenAIModel
from tether.program import generate, regex
from tether.program.outputs import output_spec
from tether.program.remote import constraint_fields, fill_hole

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
MSGS = [{"role": "user", "content": "hi"}]


class Server:
    """A recording fake server answering every completion with ``text``."""

    def __init__(self, text: str, status: int = 200, finish: str = "stop") -> None:
        self.text, self.status, self.finish = text, status, finish
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        self.bodies.append(json.loads(request.content))
        if self.status != 200:
            return httpx.Response(self.status, json={"error": {"message": "refused by the server"}})
        choice: dict[str, Any] = {"finish_reason": self.finish}
        if request.url.path.endswith("/chat/completions"):
            choice["message"] = {"role": "assistant", "content": self.text}
        else:
            choice["text"] = self.text
        return httpx.Response(200, json={"choices": [choice], "usage": {"completion_tokens": 2}})


def model(server: str, answer: Server) -> OpenAIModel:
    return OpenAIModel("http://srv/v1", server=server, transport=httpx.MockTransport(answer), backoff=0)


def body(prompt: Any, **fields: Any) -> dict[str, Any]:
    key = "prompt" if isinstance(prompt, str) else "messages"
    return {key: prompt, "temperature": 0.0, "max_tokens": 16, **fields}


# --- the exact request bodies --------------------------------------------------------------

GBNF_YES_NO = 'root ::= "yes" | "no"\n'
GBNF_REGEX = "root ::= [0-9]{2,3}\n"


@pytest.mark.parametrize(("server", "prompt", "output", "answer", "fields"), [
    ("tether", "p", SCHEMA, '{"a":1}', {"structured_outputs": {"json": SCHEMA}}),
    ("tether", "p", regex("[0-9]{2,3}"), "42", {"structured_outputs": {"regex": "[0-9]{2,3}"}}),
    ("tether", "p", ["yes", "no"], "no", {"structured_outputs": {"choice": ["yes", "no"]}}),
    ("tether", MSGS, Grammar.from_gbnf(GBNF_YES_NO), "yes", {"structured_outputs": {"grammar": GBNF_YES_NO}}),
    ("vllm", "p", SCHEMA, '{"a":1}', {"structured_outputs": {"json": SCHEMA, "disable_any_whitespace": True}}),
    ("vllm", MSGS, regex("[0-9]{2,3}"), "42", {"structured_outputs": {"regex": "[0-9]{2,3}"}}),
    ("vllm", "p", ["yes", "no"], "yes", {"structured_outputs": {"choice": ["yes", "no"]}}),
    ("vllm", "p", Grammar.from_gbnf(GBNF_YES_NO), "no", {"structured_outputs": {"grammar": GBNF_YES_NO}}),
    ("llama.cpp", "p", SCHEMA, '{"a":1}', {"json_schema": SCHEMA}),
    ("llama.cpp", MSGS, SCHEMA, '{"a":1}', {"json_schema": SCHEMA}),
    ("llama.cpp", "p", regex("[0-9]{2,3}"), "123", {"grammar": GBNF_REGEX}),
    ("llama.cpp", "p", ["yes", "no"], "yes", {"grammar": GBNF_YES_NO}),
    ("llama.cpp", "p", Grammar.from_gbnf(GBNF_YES_NO), "yes", {"grammar": GBNF_YES_NO}),
    ("llama-cpp-python", MSGS, SCHEMA, '{"a":1}', {"response_format": {"type": "json_object", "schema": SCHEMA}}),
    ("llama-cpp-python", "p", regex("[0-9]{2,3}"), "42", {"grammar": GBNF_REGEX}),
    ("llama-cpp-python", "p", ["yes", "no"], "no", {"grammar": GBNF_YES_NO}),
    ("openai", MSGS, SCHEMA, '{"a":1}', {"response_format": {"type": "json_schema", "json_schema": {
        "name": "output", "schema": SCHEMA, "strict": True}}}),
    ("tether", "p", None, "free", {}),
    ("openai", "p", None, "free", {}),
])
def test_request_body(server: str, prompt: Any, output: Any, answer: str, fields: dict[str, Any]) -> None:
    fake = Server(answer)
    g = generate(model(server, fake), prompt, output, max_tokens=16)
    assert fake.bodies == [body(prompt, **fields)]
    assert fake.paths == ["/v1/chat/completions" if isinstance(prompt, list) else "/v1/completions"]
    assert g.valid and g.text == answer, g


@pytest.mark.parametrize(("whitespace", "fields"), [
    ("compact", {"disable_any_whitespace": True}),
    ("flexible", {}),
    (regex("[ ]?"), {"whitespace_pattern": "[ ]?"}),
])
def test_vllm_gets_the_json_whitespace_asked_for(whitespace: Any, fields: dict[str, Any]) -> None:
    fake = Server('{"a": 1}')
    generate(model("vllm", fake), "p", SCHEMA, max_tokens=16, whitespace=whitespace)
    assert fake.bodies == [body("p", structured_outputs={"json": SCHEMA, **fields})]


def test_vllm_cannot_write_the_pretty_layout() -> None:
    fake = Server('{"a":1}')
    with pytest.raises(ConstraintError, match="whitespace='pretty'"):
        generate(model("vllm", fake), "p", SCHEMA, max_tokens=16, whitespace="pretty")
    assert fake.bodies == []


def test_openai_choices_travel_as_an_enum_in_an_object_and_come_back_unwrapped() -> None:
    fake = Server('{"choice": "no"}')
    g = generate(model("openai", fake), MSGS, ["yes", "no"], max_tokens=16)
    schema = {"type": "object", "properties": {"choice": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["choice"], "additionalProperties": False}
    assert fake.bodies == [body(MSGS, response_format={"type": "json_schema", "json_schema": {
        "name": "output", "schema": schema, "strict": True}})]
    assert g.valid and g.value == "no" and g.text == "no"


def test_openai_non_object_schema_is_wrapped_and_unwrapped() -> None:
    fake = Server('{"value": [1, 2]}')
    schema = {"type": "array", "items": {"type": "integer"}, "$defs": {"x": {"type": "string"}}}
    g = generate(model("openai", fake), MSGS, schema, max_tokens=16)
    sent = fake.bodies[0]["response_format"]["json_schema"]["schema"]
    assert sent == {"type": "object", "properties": {"value": schema}, "required": ["value"],
                    "additionalProperties": False, "$defs": schema["$defs"]}
    assert g.valid and g.value == [1, 2] and g.text == "[1,2]"


def test_openai_sampling_sends_no_extensions() -> None:
    fake = Server("x")
    generate(model("openai", fake), MSGS, decoder="sample", temperature=0.5, top_k=5, min_p=0.1, seed=3,
             max_tokens=4)
    assert fake.bodies == [{"messages": MSGS, "temperature": 0.5, "top_p": 1.0, "seed": 3, "max_tokens": 4}]
    fake = Server("x")
    generate(model("vllm", fake), "p", decoder="sample", temperature=0.5, top_k=5, min_p=0.1, seed=3, max_tokens=4)
    assert fake.bodies == [{"prompt": "p", "temperature": 0.5, "top_p": 1.0, "seed": 3, "top_k": 5, "min_p": 0.1,
                            "max_tokens": 4}]


def test_stop_and_samples() -> None:
    fake = Server("x")
    gs = generate(model("tether", fake), "p", decoder="sample", n=3, seed=7, stop=[";"], max_tokens=4)
    assert len(gs) == 3 and [b["seed"] for b in fake.bodies] == [7, 8, 9]
    assert all(b["stop"] == [";"] for b in fake.bodies)


# --- refusals: a clear error and no request ----------------------------------------------

@pytest.mark.parametrize(("server", "prompt", "output", "message"), [
    ("openai", "p", regex("[a-z]+"), "openai server cannot enforce a regex"),
    ("openai", MSGS, regex("[a-z]+"), "openai server cannot enforce a regex"),
    ("openai", MSGS, Grammar.from_gbnf(GBNF_YES_NO), "cannot enforce a grammar"),
    ("openai", "p", SCHEMA, "on a completion request"),
    ("openai", "p", ["a", "b"], "on a completion request"),
    ("llama-cpp-python", "p", SCHEMA, "JSON schema on a completion request"),
    ("llama.cpp", "p", Grammar.from_lark('start: "a" NAME\nNAME: /[a-z]+/\n'), "cannot be written as GBNF"),
    ("vllm", "p", Grammar.from_lark('start: "a" NAME\nNAME: /[a-z]+/\n'), "cannot be written as GBNF"),
    ("llama.cpp", "p", regex(r"\bword\b"), "cannot be written as GBNF"),
    ("llama.cpp", "p", regex("[a-z]+", flavor="ecma"), "ECMAScript"),
    ("tether", "p", regex("[a-z]+", flavor="ecma"), "ECMAScript"),
])
def test_constraints_a_server_cannot_enforce_are_refused(server: str, prompt: Any, output: Any, message: str) -> None:
    fake = Server("x")
    with pytest.raises(ConstraintError, match=message):
        generate(model(server, fake), prompt, output, max_tokens=4)
    assert fake.bodies == []


def test_a_refused_constraint_in_a_batch_sends_nothing() -> None:
    fake = Server("x")
    with pytest.raises(ConstraintError):
        generate(model("openai", fake), [MSGS, "plain prompt"], SCHEMA, max_tokens=4)
    assert fake.bodies == []


def test_triggered_region_is_refused() -> None:
    with pytest.raises(ValueError, match="after"):
        generate(model("vllm", Server("x")), "p", SCHEMA, after="</think>")


# --- server errors and answers that break the constraint -----------------------------------

@pytest.mark.parametrize(("status", "retryable"), [(400, False), (500, True)])
def test_server_error_statuses_raise_model_errors(status: int, retryable: bool) -> None:
    with pytest.raises(ModelError, match=f"HTTP {status}.*refused by the server") as info:
        generate(model("vllm", Server("x", status=status)), "p", SCHEMA, max_tokens=4)
    assert info.value.retryable is retryable


def test_timeout_raises_a_retryable_model_error() -> None:
    def slow(r: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=r)

    m = OpenAIModel("http://srv/v1", server="tether", transport=httpx.MockTransport(slow), timeout=2)
    with pytest.raises(ModelError, match="did not answer") as info:
        generate(m, "p", ["a", "b"])
    assert info.value.retryable


@pytest.mark.parametrize("reply", [{}, {"choices": []}, {"choices": [3]}, {"choices": [{"text": 5}]}])
def test_malformed_replies_are_model_errors(reply: dict[str, Any]) -> None:
    m = OpenAIModel("http://srv/v1", server="vllm", transport=httpx.MockTransport(lambda r: httpx.Response(200, json=reply)))
    with pytest.raises(ModelError):
        generate(m, "p", ["a", "b"])


@pytest.mark.parametrize(("output", "answer", "why"), [
    (SCHEMA, '{"a": "x"}', "breaks the schema"),
    (["yes", "no"], "maybe", "not one of the choices"),
    (regex("[0-9]+"), "12a", "does not match"),
    (Grammar.from_gbnf(GBNF_YES_NO), "yess", "grammar"),
])
def test_an_output_that_breaks_the_constraint_is_reported(output: Any, answer: str, why: str) -> None:
    g = generate(model("vllm", Server(answer)), "p", output)
    assert not g.valid and g.value is None and why in (g.error or "")


def test_cut_output_is_not_valid() -> None:
    g = generate(model("llama.cpp", Server('{"a":', finish="length")), "p", SCHEMA)
    assert g.finish_reason == "length" and not g.valid


# --- program holes ---------------------------------------------------------------------

def test_fill_hole_sends_one_request_with_the_holes_constraint() -> None:
    fake = Server("blue")
    g = fill_hole(model("vllm", fake), "Colour: ", output_spec(["red", "blue"]), decoder=Argmax(), max_tokens=8,
                  stop=["\n"])
    assert g.value == "blue" and fake.bodies == [{"prompt": "Colour: ", "temperature": 0.0, "max_tokens": 8,
                                                   "stop": ["\n"], "structured_outputs": {"choice": ["red", "blue"]}}]
    fake = Server("12")
    g = fill_hole(model("llama.cpp", fake), "n=", output_spec(regex("[0-9]{2,3}")), decoder=Argmax(), max_tokens=8,
                  stop=[])
    assert g.valid and fake.bodies[0]["grammar"] == GBNF_REGEX


def test_fill_hole_refuses_on_openai() -> None:
    with pytest.raises(ConstraintError):
        fill_hole(model("openai", Server("x")), "p", output_spec(["a"]), decoder=Argmax(), max_tokens=2, stop=[])


def test_constraint_fields_without_a_server_kind() -> None:
    """A black-box object of unknown kind: response_format for schemas, nothing else."""
    assert constraint_fields(None, output_spec(SCHEMA), chat=False).fields == {
        "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA, "strict": True}}}
    assert constraint_fields(None, output_spec(regex("a")), chat=False).fields == {}


def test_probed_server_kind_is_used() -> None:
    fake = Server("yes")

    def handler(r: httpx.Request) -> httpx.Response:
        if r.method == "GET":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "tether"}]})
        return fake(r)

    m = OpenAIModel("http://srv/v1", transport=httpx.MockTransport(handler))
    generate(m, "p", ["yes", "no"])
    assert fake.bodies[0]["structured_outputs"] == {"choice": ["yes", "no"]}


def test_stream_forwards_the_constraint() -> None:
    sse = 'data: {"choices": [{"text": "4"}]}\n\ndata: {"choices": [{"text": "2"}]}\n\ndata: [DONE]\n\n'
    bodies: list[dict[str, Any]] = []

    def handler(r: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(r.content))
        return httpx.Response(200, content=sse.encode())

    m = OpenAIModel("http://srv/v1", server="vllm", transport=httpx.MockTransport(handler))
    s = generate(m, "p", regex("[0-9]+"), stream=True)
    assert "".join(s) == "42" and s.generation is not None and s.generation.valid
    assert bodies[0]["structured_outputs"] == {"regex": "[0-9]+"} and bodies[0]["stream"] is True
    with pytest.raises(ValueError, match="stream"):
        generate(model("openai", Server("x")), MSGS, ["a", "b"], stream=True)


def test_free_text_by_argmax_does_not_probe() -> None:
    fake = Server("anything")
    m = OpenAIModel("http://srv/v1", transport=httpx.MockTransport(fake))  # server=None: would probe with a GET
    g = generate(m, "p", max_tokens=3)
    assert g.valid and fake.paths == ["/v1/completions"] and m._server is None


@pytest.mark.parametrize("server", [None, "tether", "vllm", "llama.cpp", "llama-cpp-python", "openai"])
@pytest.mark.parametrize("chat", [False, True])
def test_constraint_fields_are_json_or_a_tether_error(server: str | None, chat: bool) -> None:
    """Any regex or list of choices: fields that serialize as JSON, or a TetherError
    (never a foreign exception)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tether.errors import TetherError

    texts = st.text(alphabet='ab"\\\n[]()*+?{}^$|.-é😀', max_size=8)

    @given(st.one_of(texts.map(lambda p: ("regex", p)), st.lists(texts, min_size=1, max_size=4).map(lambda c: ("choices", c))))
    @settings(max_examples=40, deadline=None)
    def check(case: tuple[str, Any]) -> None:
        kind, value = case
        try:
            spec = output_spec(regex(value) if kind == "regex" else value)
            fields = constraint_fields(server, spec, chat=chat).fields
        except TetherError:
            return
        json.dumps(fields)

    check()
