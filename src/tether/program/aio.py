"""Async generation: ``await agenerate(...)``, async streams, one worker thread per model.

    g = await tether.agenerate(model, "Name: ", regex(r"[A-Z][a-z]+"))
    s = await tether.agenerate(model, prompt, Character, stream=True)
    async for chunk in s: ...            # text chunks
    async for value in s.partials(): ... # the typed value as it grows
    (await s.result()).value

A model is not thread-safe, and its work is blocking: every async call runs the
synchronous call (`generate`, a query run) on the model's own worker thread
(`run_on_model`), so the event loop never waits on the model and calls on one model are
queued, first come first served, one at a time. Calls on different models run in
parallel. The caller's context (the active `tether.limits.Limits`) goes with the call.
The queue holds async calls only: a synchronous call made at the same time on the same
model from another thread is not queued with them.

Cancellation: a call still waiting in its model's queue is dropped; a running one cannot
be interrupted inside a decoding step, so a cancelled ``agenerate`` finishes in the
background (bounded by its ``max_tokens``) before the next call on the model starts, its
result dropped; a cancelled or closed stream stops at the next token. Either way the
model is left whole for the next call.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any, TypeVar

from tether.errors import ModelError
from tether.limits import Limits
from tether.limits import limits as limits_in_force
from tether.program.arguments import check_limits_arg
from tether.program.generate import Generation, generate, partials_reader

__all__ = ["AsyncStream", "agenerate", "model_executor", "run_on_model"]

T = TypeVar("T")

_EXECUTORS: weakref.WeakKeyDictionary[Any, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_PINNED: dict[int, tuple[Any, ThreadPoolExecutor]] = {}  # models that take no weak reference
_EXECUTORS_LOCK = threading.Lock()


def model_executor(model: Any) -> ThreadPoolExecutor:
    """The one-thread executor that runs every async call on ``model`` (made on first use;
    it goes away with the model)."""
    with _EXECUTORS_LOCK:
        try:
            ex = _EXECUTORS.get(model)
        except TypeError:  # not weak-referenceable: kept for the life of the process
            pinned = _PINNED.get(id(model))
            ex = pinned[1] if pinned is not None else None
        if ex is None:
            name = str(getattr(model, "name", "model"))[:40]
            ex = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"tether-{name}")
            try:
                _EXECUTORS[model] = ex
            except TypeError:
                _PINNED[id(model)] = (model, ex)
        return ex


class _Worker(threading.local):
    executor: ThreadPoolExecutor | None = None  # the model executor this thread works for


_WORKER = _Worker()


async def run_on_model(model: Any, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on ``model``'s worker thread, in a copy of the caller's
    context; queued behind the calls already made on that model.

    Called from a job already running on that model's thread (a query whose Python code
    awaits another call on its model), ``fn`` runs at once in that job: queued, it would
    wait for the job that waits for it.
    """
    ex = model_executor(model)
    if _WORKER.executor is ex:
        return fn(*args, **kwargs)
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, fn, *args, **kwargs)

    def job() -> T:
        _WORKER.executor = ex
        return call()

    return await asyncio.wrap_future(ex.submit(job))


async def resolve_model(model: Any, limits: Limits | None) -> Any:
    """A model object: names (and None, the embedded model) loaded off the event loop."""
    if not (isinstance(model, str) or model is None):
        return model
    from tether.models import load_model

    def load() -> Any:
        with limits_in_force(limits) if limits is not None else nullcontext():
            return load_model(model)

    return await asyncio.to_thread(load)


async def agenerate(model: Any, prompt: Any, output: Any = None, **options: Any) -> Any:
    """`tether.generate` without blocking the event loop: the same arguments, the same
    results (a `Generation`, a list of them, ...).

    With ``stream=True`` it returns an `AsyncStream` once the call has started (arguments
    checked, the output compiled, the prompt read: errors are raised here); iterate it
    with ``async for``.

    Calls on one model are queued and run one at a time on the model's own thread
    (see the module docstring for cancellation). It raises what `tether.generate`
    raises for the same arguments.
    """
    active = check_limits_arg(options.get("limits"))
    model = await resolve_model(model, active)
    if options.get("stream") is True:
        return await AsyncStream._start(model, prompt, output, options)
    return await run_on_model(model, generate, model, prompt, output, **options)


class _End:
    __slots__ = ("generation",)

    def __init__(self, generation: Generation | None) -> None:
        self.generation = generation


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class AsyncStream:
    """A generation streamed as it is decoded, for ``async for`` (``agenerate(...,
    stream=True)``): the async counterpart of `tether.program.generate.Stream`.

    ``async for chunk in stream`` gives the text chunks; `partials` the typed value as it
    grows (as `Stream.partials`); ``await result()`` the final `Generation`. The decoding
    runs on the model's thread and does not wait for the reader: chunks are kept until
    read. ``await aclose()`` (or leaving ``async with stream:``) stops it at the next token.
    """

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | _End | _Failed] = asyncio.Queue()
        self._stop = threading.Event()
        self._seen: list[str] = []
        self._done = False
        self._spec: Any = None  # the output's OutputSpec, set by the producer before the stream is handed out
        self._limits: Limits | None = None
        self._job: asyncio.Future[None] | None = None
        self.generation: Generation | None = None

    @classmethod
    async def _start(cls, model: Any, prompt: Any, output: Any, options: dict[str, Any]) -> AsyncStream:
        loop = asyncio.get_running_loop()
        stream = cls()
        ready: asyncio.Future[None] = loop.create_future()

        def post(fn: Callable[..., Any], *args: Any) -> bool:
            try:
                loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # the loop has closed: nobody is reading any more
                stream._stop.set()
                return False
            return True

        def settle(error: BaseException | None) -> None:
            if ready.done():
                return
            if error is None:
                ready.set_result(None)
            else:
                ready.set_exception(error)

        def produce() -> None:
            try:
                sync = generate(model, prompt, output, **options)
            except BaseException as exc:  # noqa: BLE001 -- handed to the awaiting caller
                post(settle, exc)
                return
            stream._spec, stream._limits = sync.spec, sync.limits
            if not post(settle, None):
                sync.close()
                return
            try:
                for chunk in sync:
                    if stream._stop.is_set():
                        break
                    if not post(stream._queue.put_nowait, chunk):
                        break
                else:
                    post(stream._queue.put_nowait, _End(sync.generation))
                    return
                post(stream._queue.put_nowait, _End(None))
            except BaseException as exc:  # noqa: BLE001 -- raised where the stream is read
                post(stream._queue.put_nowait, _Failed(exc))
            finally:
                sync.close()

        stream._job = asyncio.ensure_future(run_on_model(model, produce))
        try:
            await ready
        except asyncio.CancelledError:
            stream._stop.set()
            raise
        return stream

    # -- reading -------------------------------------------------------------------------

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> str:
        if self._done:
            raise StopAsyncIteration
        try:
            item = await self._queue.get()
        except asyncio.CancelledError:
            self._stop.set()
            raise
        if isinstance(item, str):
            self._seen.append(item)
            return item
        self._done = True
        if isinstance(item, _Failed):
            raise item.error
        self.generation = item.generation
        raise StopAsyncIteration

    async def text(self) -> str:
        """Read the rest; the whole text."""
        async for _ in self:
            pass
        return self.generation.text if self.generation is not None else "".join(self._seen)

    async def result(self) -> Generation:
        """Read the rest; the final `Generation` (ModelError if the stream was closed first)."""
        async for _ in self:
            pass
        if self.generation is None:
            raise ModelError("the stream ended without a result (it was closed before the output was complete)")
        return self.generation

    async def partials(self) -> AsyncIterator[Any]:
        """The value as it grows (see `tether.program.generate.Stream.partials`)."""
        reader = partials_reader(self._spec, self._limits, self._seen)
        shown = reader.has_value
        if shown:
            yield reader.value
        async for chunk in self:
            if reader.feed(chunk) and reader.has_value:
                shown = True
                yield reader.value
        if (reader.finish() or not shown) and reader.has_value:
            yield reader.value

    async def aclose(self) -> None:
        """Stop decoding at the next token; chunks not read yet are dropped."""
        self._stop.set()
        if not self._done:
            self._done = True
            while not self._queue.empty():
                self._queue.get_nowait()

    async def __aenter__(self) -> AsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __del__(self) -> None:
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()
