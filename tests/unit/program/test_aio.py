"""Async generation (`tether.program.aio`) and typed partial streaming on the scripted
model: results equal the synchronous ones, calls on one model never overlap, the event
loop keeps running, cancellation leaves the model whole. The embedded model's tests are in
tests/integration/test_async_embedded.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

import tether
from tether.errors import ArgumentError, LimitError, ModelError
from tether.lang import load_query
from tether.limits import Limits, limits
from tether.models.scripted import ScriptedModel
from tether.program import generate, regex
from tether.program.aio import AsyncStream, agenerate

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


class Person(BaseModel):
    name: str
    age: int


class Watched(ScriptedModel):
    """A scripted model that records overlapping calls and the threads they run on, and
    can take its time per call (so that the event loop has a chance to run meanwhile)."""

    def __init__(self, *args: Any, pause: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pause = pause
        self.inside = 0
        self.most_inside = 0
        self.threads: set[str] = set()
        self.calls = 0
        self.seen: list[list[int]] = []  # the token sequences the model was called on
        self.first_call = threading.Event()
        self.on_call: Any = None
        self._guard = threading.Lock()

    def _compute(self, tokens: list[int]) -> Any:
        with self._guard:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.threads.add(threading.current_thread().name)
            self.calls += 1
            self.seen.append(list(tokens))
        self.first_call.set()
        if self.on_call is not None:
            self.on_call()
        try:
            if self.pause:
                time.sleep(self.pause)
            return super()._compute(tokens)
        finally:
            with self._guard:
                self.inside -= 1


PROMPTS = ["x", "x the", "x url"]


def test_agenerate_takes_generates_arguments_and_gives_its_result() -> None:
    m = ScriptedModel(target="x the url is https://www.abc.com")
    want = generate(m, "x", regex(r"[a-z ]+"), max_tokens=12)
    got = asyncio.run(agenerate(m, "x", regex(r"[a-z ]+"), max_tokens=12))
    assert (got.text, got.tokens, got.value) == (want.text, want.tokens, want.value)
    assert tether.agenerate is agenerate and tether.AsyncStream is AsyncStream


def test_three_concurrent_calls_are_queued_and_equal_the_sequential_ones() -> None:
    m = Watched(seed=4, pause=0.002)
    want = [generate(m, p, max_tokens=8).text for p in PROMPTS]
    m.threads.clear()

    async def main() -> list[Any]:
        return await asyncio.gather(*(agenerate(m, p, max_tokens=8) for p in PROMPTS))

    got = asyncio.run(main())
    assert [g.text for g in got] == want
    assert m.most_inside == 1  # one call at a time on the model
    assert len(m.threads) == 1 and threading.main_thread().name not in m.threads  # the model's own thread


def test_the_event_loop_keeps_running_while_the_model_works() -> None:
    m = Watched(seed=1, pause=0.003)
    ticks = 0
    seen: list[int] = []
    m.on_call = lambda: seen.append(ticks)  # the ticker's count at each model call

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def main() -> None:
        t = asyncio.create_task(ticker())
        await agenerate(m, "x", max_tokens=10)
        t.cancel()

    asyncio.run(main())
    assert len(seen) >= 5 and len(set(seen)) > 1 and seen == sorted(seen)  # it ticked between model calls


def test_a_cancelled_call_leaves_the_model_whole_for_the_next() -> None:
    m = Watched(seed=2)
    want = generate(m, "x the", max_tokens=12).text
    release = threading.Event()
    m.on_call = lambda: release.wait(30)  # the model holds on until the test has cancelled

    async def main() -> str:
        task = asyncio.create_task(agenerate(m, "x url", max_tokens=30))
        await asyncio.to_thread(m.first_call.wait)
        task.cancel()  # while the model is working on it
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return (await agenerate(m, "x the", max_tokens=12)).text

    assert asyncio.run(main()) == want
    assert m.most_inside == 1


def test_a_call_waiting_in_the_queue_is_dropped_when_cancelled() -> None:
    m = Watched(seed=2)
    release = threading.Event()
    m.on_call = lambda: release.wait(30)
    dropped = m.tokenize("x url", add_bos=True)

    async def main() -> None:
        first = asyncio.create_task(agenerate(m, "x", max_tokens=10))
        await asyncio.to_thread(m.first_call.wait)
        second = asyncio.create_task(agenerate(m, "x url", max_tokens=10, healing=False))
        await asyncio.sleep(0)  # submitted: waiting behind the first
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second  # its queued job was cancelled before the task saw the error
        release.set()
        await first
        await agenerate(m, "x the", max_tokens=3)  # queued after where the second was

    asyncio.run(main())
    assert m.seen and not any(t[: len(dropped)] == dropped for t in m.seen)  # the cancelled call never ran


def test_argument_errors_are_raised_at_the_await() -> None:
    m = ScriptedModel()
    with pytest.raises(ArgumentError):
        asyncio.run(agenerate(m, "x", max_tokens=0))
    with pytest.raises(ArgumentError):
        asyncio.run(agenerate(m, "x", stream=True, decoder="beam", n=2))
    with pytest.raises(LimitError):
        asyncio.run(agenerate(m, "x", max_tokens=10, limits=Limits(max_tokens=5)))


def test_the_callers_limits_go_with_the_call() -> None:
    async def main() -> None:
        with limits(Limits(max_tokens=5)):
            await agenerate(ScriptedModel(), "x", max_tokens=10)

    with pytest.raises(LimitError):
        asyncio.run(main())


# -- streams ------------------------------------------------------------------------------------


def test_async_stream_gives_the_chunks_and_the_result() -> None:
    m = ScriptedModel(target="name: abc\nage: 12")
    want = generate(m, "x", stop="\n")

    async def main() -> tuple[list[str], Any]:
        s = await agenerate(m, "x", stream=True, stop="\n")
        assert isinstance(s, AsyncStream)
        chunks = [c async for c in s]
        return chunks, await s.result()

    chunks, g = asyncio.run(main())
    assert "".join(chunks) == want.text == g.text and len(chunks) > 1


def test_closing_an_async_stream_stops_it_and_the_model_stays_usable() -> None:
    m = Watched(target="x " + "the " * 40)
    want = generate(m, "x url", max_tokens=6).text
    closed = threading.Event()
    base = m.calls
    m.on_call = lambda: m.calls - base > 3 and closed.wait(30)  # from its 4th call the stream waits for the reader

    async def main() -> tuple[str, int]:
        before = m.calls
        s = await agenerate(m, "x", max_tokens=60, stream=True)
        async with s:
            async for _ in s:
                break
        closed.set()
        with pytest.raises(ModelError):
            await s.result()  # closed before the end: no result
        after = await agenerate(m, "x url", max_tokens=6)  # queued behind what is left of the stream
        return after.text, m.calls - before - len(after.tokens)

    text, stream_calls = asyncio.run(main())
    assert text == want
    assert stream_calls < 10  # stopped a token or two after the close, far from its budget of 60


# -- typed partials ----------------------------------------------------------------------------


def grows(partials: list[Any]) -> bool:
    """Each partial dict keeps the members of the one before (the last one may grow)."""
    for a, b in zip(partials, partials[1:], strict=False):
        for k, v in a.items():
            if k not in b or not (b[k] == v or (isinstance(v, str) and b[k].startswith(v))):
                return False
    return True


def test_sync_stream_partials_grow_to_the_final_value() -> None:
    m = ScriptedModel(target='x{"name":"abc","age":12}')
    s = generate(m, "x", PERSON, stream=True)
    parts = list(s.partials())
    g = s.result()
    assert g.valid and parts[-1] == g.value == json.loads(g.text) == {"name": "abc", "age": 12}
    assert parts[0] == {"name": ""}  # the string shows from its opening quote (forced text comes at once)
    assert grows(parts) and {"name": "abc"} in parts  # the age shows once its digits are complete
    assert len(parts) == len({json.dumps(p) for p in parts})  # one partial per change


def test_partials_after_some_chunks_start_from_the_whole_text() -> None:
    m = ScriptedModel(target='x{"name":"abc","age":12}')
    s = generate(m, "x", PERSON, stream=True)
    first = next(s)
    parts = list(s.partials())
    assert first and parts[-1] == {"name": "abc", "age": 12} and s.text() == s.result().text


def test_pydantic_partials_are_dicts_and_the_result_is_the_model() -> None:
    m = ScriptedModel(target='x{"name":"abc","age":12}')
    s = generate(m, "x", Person, stream=True)
    parts = list(s.partials())
    g = s.result()
    assert isinstance(g.value, Person) and parts[-1] == g.value.model_dump()
    assert all(isinstance(p, dict) for p in parts) and grows(parts)


def test_text_partials_are_the_text_so_far() -> None:
    m = ScriptedModel(target="x the url")
    s = generate(m, "x", max_tokens=5, stream=True)
    parts = list(s.partials())
    assert parts[-1] == s.result().value and all(parts[-1].startswith(p) for p in parts)


def test_async_partials_equal_the_sync_ones() -> None:
    m = ScriptedModel(target='x{"name":"abc","age":12}')
    want = list(generate(m, "x", PERSON, stream=True).partials())

    async def main() -> tuple[list[Any], Any]:
        s = await agenerate(m, "x", PERSON, stream=True)
        return [p async for p in s.partials()], await s.result()

    got, g = asyncio.run(main())
    assert got == want and got[-1] == g.value


def test_triggered_partials_follow_the_constrained_part() -> None:
    m = ScriptedModel(target="x hmm the</think>123")
    s = generate(m, "x", int, after="</think>", max_tokens=30, stream=True)
    parts = list(s.partials())
    assert parts == [123] == [s.result().value]


# -- queries ------------------------------------------------------------------------------------


def test_query_arun_equals_run() -> None:
    m = ScriptedModel(target="Q: How many legs?\nA: 12 legs")
    q = load_query('"Q: How many legs?\\nA:[N: int]"')
    want = q.run(model=m)

    async def main() -> list[Any]:
        return await asyncio.gather(q.arun(model=m), q.arun(model=m),
                                    tether.arun_query('"Q: How many legs?\\nA:[N: int]"', model=m))

    got = asyncio.run(main())
    assert [r.variables for r in got] == [want.variables] * 3 and want.variables["N"] == 12


def test_query_arun_checks_its_arguments() -> None:
    q = load_query('"A:[N: int]"')
    with pytest.raises(ArgumentError):
        asyncio.run(q.arun(model=ScriptedModel(), limits="none"))
    with pytest.raises(ArgumentError):
        asyncio.run(tether.arun_query('"A:[N: int]"', model=ScriptedModel(), limits=3))


def test_any_call_joins_the_models_queue() -> None:
    from tether.program import gen
    from tether.program.aio import run_on_model

    m = Watched(target="Name: Alice", pause=0.001)
    program = "Name: " + gen("name", regex=r"[A-Z][a-z]+")
    want = program.run(m)

    async def main() -> list[Any]:
        return await asyncio.gather(run_on_model(m, program.run, m), agenerate(m, "Name:", max_tokens=4),
                                    run_on_model(m, program.run, m))

    a, _, b = asyncio.run(main())
    assert a.captures == b.captures == want.captures == {"name": "Alice"} and m.most_inside == 1


def test_http_model_streams_partials_sync_and_async() -> None:
    import httpx

    from tether.models.openai_http import OpenAIModel

    pieces = ['{"na', 'me":"Al', 'ice","age":3', "1}"]
    sse = "".join(f"data: {json.dumps({'choices': [{'text': p}]})}\n\n" for p in pieces) + "data: [DONE]\n\n"
    m = OpenAIModel("http://srv/v1", server="vllm",
                    transport=httpx.MockTransport(lambda r: httpx.Response(200, content=sse.encode())))
    s = generate(m, "p", PERSON, stream=True)
    parts = list(s.partials())
    assert parts == [{}, {"name": "Al"}, {"name": "Alice"}, {"name": "Alice", "age": 31}]
    assert s.result().value == parts[-1]

    async def main() -> list[Any]:
        s = await agenerate(m, "p", PERSON, stream=True)
        return [p async for p in s.partials()]

    assert asyncio.run(main()) == parts


def test_a_call_made_from_the_models_own_thread_runs_at_once() -> None:
    from tether.program.aio import run_on_model

    m = ScriptedModel(target="x the url")
    want = generate(m, "x", max_tokens=4).text

    def job_that_awaits_the_same_model() -> str:
        # what a query's Python code does when it awaits a call on its own model; queued
        # behind this job, the inner call would wait forever (bounded here: a timeout)
        async def inner() -> Any:
            return await asyncio.wait_for(agenerate(m, "x", max_tokens=4), 30)

        return asyncio.run(inner()).text

    assert asyncio.run(run_on_model(m, job_that_awaits_the_same_model)) == want
