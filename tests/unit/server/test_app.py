"""The app with a scripted model (no llama.cpp): routes, guard, admission, streaming."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from tether.models.scripted import ScriptedModel  # noqa: E402
from tether.server.app import SERVER_LIMITS, Admission, ServerConfig, create_app, warm_up  # noqa: E402
from tether.server.errors import HTTPError  # noqa: E402
from tether.server.metrics import Metrics  # noqa: E402
from tether.server.runner import Runner, SerialBackend  # noqa: E402


def make_client(**config) -> TestClient:
    model = ScriptedModel(target="The answer is 123")
    runner = Runner(model, SerialBackend(model), SERVER_LIMITS, threads=2)
    # as `tether serve` does before its first request: the process's one-time work (the
    # vocabulary's index, the kernels, a pending trim of the regex node table, which a
    # test process that built many nodes may owe) is not the first request's, whose
    # compile has 5 s (`SERVER_LIMITS`): inside a full test run it once took longer
    warm_up(runner)
    cfg = ServerConfig(model="scripted", **config)
    return TestClient(create_app(cfg, runner=runner, model_id="scripted"))


@pytest.fixture(scope="module")
def client():
    with make_client(max_body_bytes=10_000) as c:
        yield c


def test_completion_with_regex(client) -> None:
    r = client.post("/v1/completions", json={"prompt": "Q:", "max_tokens": 10, "temperature": 0,
                                             "guided_regex": "[0-9]+"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert re.fullmatch("[0-9]+", body["choices"][0]["text"])
    assert body["object"] == "text_completion" and body["usage"]["completion_tokens"] > 0


def test_completion_stream(client) -> None:
    with client.stream("POST", "/v1/completions", json={"prompt": "Q:", "max_tokens": 6, "temperature": 0,
                                                        "stream": True, "stream_options": {"include_usage": True},
                                                        "guided_choice": ["yes", "no"]}) as r:
        events = [e for e in r.read().decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text in ("yes", "no")
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= 1


def test_chat_choice(client) -> None:
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 5,
                                                  "structured_outputs": {"choice": ["abc", "no"]}, "n": 2, "seed": 3})
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1]
    assert all(c["message"]["content"] in ("abc", "no") and c["finish_reason"] == "stop" for c in choices)


def test_errors_have_the_openai_shape(client) -> None:
    for r, status in [
        (client.post("/v1/completions", content=b"{"), 400),
        (client.post("/v1/completions", json={"prompt": "x", "guided_regex": "(("}), 400),
        (client.post("/v1/completions", json={"prompt": "x", "model": "nope"}), 404),
        (client.post("/v1/completions", content=b"x" * 20_000, headers={"content-type": "application/json"}), 413),
        (client.get("/v2/anything"), 404),
        (client.get("/v1/completions"), 405),
    ]:
        assert r.status_code == status, r.text
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert client.get("/health").json()["status"] == "ok"


def test_compile_cache_counts(client) -> None:
    body = {"prompt": "x", "max_tokens": 3, "guided_regex": "[a-c]{3}"}
    client.post("/v1/completions", json=body)
    text = client.get("/metrics").text
    hits = float(re.search(r"^tether_compile_cache_hits_total (\S+)$", text, re.M).group(1))
    client.post("/v1/completions", json=body)
    text = client.get("/metrics").text
    assert float(re.search(r"^tether_compile_cache_hits_total (\S+)$", text, re.M).group(1)) == hits + 1


def test_api_key() -> None:
    with make_client(api_key="k") as c:
        assert c.get("/v1/models").status_code == 401
        assert c.get("/v1/models", headers={"Authorization": "Bearer x"}).status_code == 401
        assert c.get("/v1/models", headers={"Authorization": "Bearer k"}).json()["data"][0]["id"] == "scripted"
        assert c.get("/health").status_code == 200


def test_admission_queue() -> None:
    async def go() -> None:
        m = Metrics()
        a = Admission(1, 1, m)
        await a.acquire(1)
        assert m.in_flight == 1
        waiter = asyncio.create_task(a.acquire(5))
        await asyncio.sleep(0.01)
        assert m.queue_depth == 1
        with pytest.raises(HTTPError) as e:
            await a.acquire(1)
        assert e.value.status == 503 and m.rejected_queue_full == 1
        a.release()  # the slot passes to the waiter
        await waiter
        assert (m.in_flight, m.queue_depth) == (1, 0)
        with pytest.raises(TimeoutError):  # a waiter that times out leaves the queue
            await a.acquire(0.05)
        assert m.queue_depth == 0 and not a.waiters
        a.release()
        assert (m.in_flight, a.free) == (0, 1)

    asyncio.run(go())


# -- hostile bodies: every answer is a response in the OpenAI shape, never a 500 ----------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=20))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                       max_leaves=8)
_fields = st.sampled_from(["prompt", "messages", "max_tokens", "temperature", "top_p", "n", "stop", "seed",
                           "stream", "logprobs", "response_format", "structured_outputs", "guided_json",
                           "guided_regex", "guided_choice", "guided_grammar", "json_schema", "grammar", "tools",
                           "tool_choice", "model", "echo", "stream_options", "top_k"])
_bodies = st.dictionaries(_fields, _values, max_size=5)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_bodies, route=st.sampled_from(["/v1/completions", "/v1/chat/completions"]))
def test_random_bodies_never_fail_open(client, body, route) -> None:
    body.setdefault("max_tokens", 2)
    if isinstance(body["max_tokens"], int) and not isinstance(body["max_tokens"], bool):
        body["max_tokens"] = max(-1, min(body["max_tokens"], 3))
    r = client.post(route, json=body)
    assert r.status_code in (200, 400, 404), (r.status_code, r.text)
    if r.status_code != 200:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    elif body.get("stream") is True:
        assert r.text.rstrip().endswith("data: [DONE]")
