"""OpenAIModel without a server: URL handling, probing, retries, errors, async, streaming.

HTTP goes through an ``httpx.MockTransport`` (the live servers are in tests/integration).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import ModelError
from tether.models import ModelArgumentError, load_model
from tether.models.openai_http import OpenAIModel

Handler = Callable[[httpx.Request], httpx.Response]


def mock(handler: Handler, url: str = "http://srv:8000/v1", **kw: object) -> tuple[OpenAIModel, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return OpenAIModel(url, transport=httpx.MockTransport(record), backoff=0, **kw), seen  # type: ignore[arg-type]


def completion(text: str = "ok") -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"text": text, "finish_reason": "stop"}],
                                     "usage": {"prompt_tokens": 3, "completion_tokens": 1}})


def test_url_and_model_name() -> None:
    m = OpenAIModel("http://127.0.0.1:9/v1#my-model")
    assert m.base_url == "http://127.0.0.1:9/v1" and m.model == "my-model" and m.black_box
    assert OpenAIModel("http://h:1").base_url == "http://h:1/v1"


def test_load_model_picks_openai_for_urls_and_takes_server() -> None:
    m = load_model("http://127.0.0.1:9/v1#x")
    assert isinstance(m, OpenAIModel)
    m = load_model("http://127.0.0.1:9/v1#x", server="vllm", retries=0)
    assert isinstance(m, OpenAIModel) and m.server == "vllm" and m.retries == 0  # no probe: nothing listens


@pytest.mark.parametrize("bad", [{"server": "sglang"}, {"server": 3}, {"retries": -1}, {"retries": 11},
                                 {"backoff": -1.0}, {"timeout": 0}, {"colour": "red"}])
def test_bad_options_are_model_argument_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ModelArgumentError):
        load_model("http://127.0.0.1:9/v1", **bad)


def test_refused_connection_is_a_retryable_model_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = OpenAIModel(f"http://127.0.0.1:{port}/v1", timeout=2, retries=1, backoff=0)
    with pytest.raises(ModelError) as info:
        m.complete("x", max_tokens=1)
    assert info.value.retryable and "cannot reach" in str(info.value)


def test_request_body_headers_and_costs() -> None:
    m, seen = mock(lambda r: completion("hi"), url="http://srv:8000/v1#gemma", api_key="k")
    reply = m.complete("Say", max_tokens=4, stop=None)
    assert reply["choices"][0]["text"] == "hi"
    [req] = seen
    assert req.method == "POST" and str(req.url) == "http://srv:8000/v1/completions"
    assert req.headers["authorization"] == "Bearer k" and req.headers["content-type"] == "application/json"
    assert json.loads(req.content) == {"prompt": "Say", "max_tokens": 4, "model": "gemma"}  # None fields dropped
    assert (m.costs.model_calls, m.costs.prompt_tokens, m.costs.generated_tokens) == (1, 3, 1)


@pytest.mark.parametrize(("owner", "server"), [("tether", "tether"), ("vllm", "vllm"), ("llamacpp", "llama.cpp"),
                                               ("me", "llama-cpp-python")])
def test_probe_reads_owned_by(owner: str, server: str) -> None:
    m, seen = mock(lambda r: httpx.Response(200, json={"object": "list", "data": [{"id": "m", "owned_by": owner}]}))
    assert m.server == server and m.server == server
    assert [str(r.url) for r in seen] == ["http://srv:8000/v1/models"]  # probed once


def test_probe_falls_back_to_props_then_version_then_openai() -> None:
    def llama(r: httpx.Request) -> httpx.Response:
        if r.url.path == "/props":
            return httpx.Response(200, json={"default_generation_settings": {}, "total_slots": 1})
        return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "someone"}]})

    def vllm(r: httpx.Request) -> httpx.Response:
        if r.url.path == "/version":
            return httpx.Response(200, json={"version": "0.11.0"})
        return httpx.Response(404, json={"detail": "Not Found"})

    assert mock(llama)[0].server == "llama.cpp"
    assert mock(vllm)[0].server == "vllm"
    m, seen = mock(lambda r: httpx.Response(404, text="no"))
    assert m.server == "openai"
    assert [r.url.path for r in seen] == ["/v1/models", "/props", "/version"]


def test_probe_of_openai_host_sends_nothing() -> None:
    m, seen = mock(lambda r: httpx.Response(500), url="https://api.openai.com/v1")
    assert m.server == "openai" and seen == []


def test_probe_of_an_unreachable_server_raises() -> None:
    def down(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=r)

    m, _ = mock(down)
    with pytest.raises(ModelError) as info:
        _ = m.server
    assert info.value.retryable


def test_connect_errors_are_retried() -> None:
    calls = []

    def flaky(r: httpx.Request) -> httpx.Response:
        calls.append(r)
        if len(calls) < 3:
            raise httpx.ConnectError("refused", request=r)
        return completion()

    m, _ = mock(flaky, retries=2)
    assert m.complete("x")["choices"][0]["text"] == "ok" and len(calls) == 3


def test_503_is_retried_then_reported() -> None:
    m, seen = mock(lambda r: httpx.Response(503, text="busy"), retries=2)
    with pytest.raises(ModelError) as info:
        m.complete("x")
    assert len(seen) == 3 and info.value.retryable and "503" in str(info.value) and "busy" in str(info.value)

    answers = iter([httpx.Response(503), completion("late")])
    m, seen = mock(lambda r: next(answers), retries=1)
    assert m.complete("x")["choices"][0]["text"] == "late" and len(seen) == 2


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (401, False), (404, False), (422, False),
                                                    (408, True), (429, True), (500, True), (502, True)])
def test_error_statuses_are_not_retried(status: int, retryable: bool) -> None:
    m, seen = mock(lambda r: httpx.Response(status, json={"error": {"message": "nope"}}), retries=3)
    with pytest.raises(ModelError) as info:
        m.complete("x")
    assert len(seen) == 1 and info.value.retryable is retryable
    assert f"HTTP {status}" in str(info.value) and "nope" in str(info.value)


def test_timeout_is_a_retryable_model_error() -> None:
    def slow(r: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=r)

    m, seen = mock(slow, timeout=1.5, retries=2)
    with pytest.raises(ModelError, match="did not answer within 1.5 s") as info:
        m.complete("x")
    assert info.value.retryable and len(seen) == 1  # the server may be working on it: not sent twice


def test_the_client_has_timeouts_and_a_pool() -> None:
    m = OpenAIModel("http://srv/v1", timeout=30)
    t = m._client.timeout
    assert (t.connect, t.read, t.write) == (10.0, 30.0, 30.0)
    assert m._client_args["limits"].max_connections == 16


@given(st.binary(max_size=64))
@settings(max_examples=60, deadline=None)
def test_any_reply_body_is_a_dict_or_a_model_error(body: bytes) -> None:
    m, _ = mock(lambda r: httpx.Response(200, content=body))
    try:
        reply = m.post("/completions", {})
    except ModelError:
        return
    assert isinstance(reply, dict)


@pytest.mark.parametrize("body", [b"[1, 2]", b"not json", b"\xff\xfe", b"[" * 5000 + b"]" * 5000])
def test_bodies_that_are_not_json_objects(body: bytes) -> None:
    m, _ = mock(lambda r: httpx.Response(200, content=body))
    with pytest.raises(ModelError, match="answered with"):
        m.complete("x")


def test_streaming_reads_server_sent_events() -> None:
    events = [{"choices": [{"text": "a"}]}, {"choices": []}, {"choices": [{"text": "b"}]}]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + ": keep-alive\n\ndata: [DONE]\n\n"
    m, seen = mock(lambda r: httpx.Response(200, content=sse.encode(), headers={"content-type": "text/event-stream"}))
    assert list(m.stream("x", chat=False, max_tokens=3)) == ["a", "b"]
    assert json.loads(seen[0].content)["stream"] is True


def test_streaming_error_status() -> None:
    m, _ = mock(lambda r: httpx.Response(400, json={"error": "bad grammar"}))
    with pytest.raises(ModelError, match="HTTP 400.*bad grammar"):
        list(m.stream("x", chat=False))


def test_async_requests_retry_and_count() -> None:
    answers = iter([httpx.Response(503), completion("async")])
    seen: list[httpx.Request] = []

    async def handler(r: httpx.Request) -> httpx.Response:
        seen.append(r)
        return next(answers)

    m = OpenAIModel("http://srv/v1", async_transport=httpx.MockTransport(handler), backoff=0, retries=1)

    async def run() -> dict[str, object]:
        try:
            return await m.acomplete("x", max_tokens=2)
        finally:
            await m.aclose()

    reply = asyncio.run(run())
    assert reply["choices"][0]["text"] == "async" and len(seen) == 2 and m.costs.model_calls == 1  # type: ignore[index]


def test_async_errors_are_model_errors() -> None:
    async def handler(r: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=r)

    m = OpenAIModel("http://srv/v1", async_transport=httpx.MockTransport(handler), backoff=0, retries=0)
    with pytest.raises(ModelError, match="cannot reach"):
        asyncio.run(m.achat([{"role": "user", "content": "x"}]))


def test_reply_bodies_past_the_cap_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import tether.models.openai_http as mod

    monkeypatch.setattr(mod, "MAX_REPLY_BYTES", 1000)
    m, _ = mock(lambda r: httpx.Response(200, content=b'{"a": "' + b"x" * 2000 + b'"}'))
    with pytest.raises(ModelError, match="more than 1000 bytes"):
        m.complete("x")
    m, _ = mock(lambda r: httpx.Response(500, content=b"e" * 5000))
    with pytest.raises(ModelError, match="more than 1000 bytes"):
        m.complete("x")
    m, _ = mock(lambda r: httpx.Response(200, content=b"data: " + b"x" * 5000))  # one endless line
    with pytest.raises(ModelError, match="more than 1000 bytes"):
        list(m.stream("x", chat=False))

    async def big(r: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * 5000)

    am = OpenAIModel("http://srv/v1", async_transport=httpx.MockTransport(big))
    with pytest.raises(ModelError, match="more than 1000 bytes"):
        asyncio.run(am.acomplete("x"))
