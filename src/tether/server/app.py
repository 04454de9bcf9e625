"""The FastAPI application: routes, authentication, body limits, errors, logging.

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions``,
``POST /v1/completions``, ``GET /metrics``. Each completion request goes through the same
steps: check the body (Pydantic, then the server's `Limits`), turn its constraint fields
into a `Constraint`, wait for a slot (``--parallel`` in flight, a bounded queue behind
them: 503 when it is full), compile the constraint (cached; on the compile pool, bounded
by ``compile_seconds``), render and tokenize the prompt, and decode on a worker thread
(`tether.server.runner`). The event loop never runs model or compile work.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Scope, Send

from tether.errors import LimitError, ModelError
from tether.limits import Limits, limits
from tether.models.base import Model, is_black_box
from tether.server.constraints import (
    Constraint,
    RequestError,
    chat_constraint,
    parse_tool_call,
    request_constraint,
    tools_message,
)
from tether.server.errors import HTTPError, from_exception
from tether.server.messages import chat_messages
from tether.server.metrics import Metrics
from tether.server.protocol import (
    MAX_STOP,
    MAX_STOP_CHARS,
    ChatCompletionRequest,
    CompletionRequest,
)
from tether.server.runner import (
    Backend,
    Cancelled,
    Delta,
    Job,
    JobResult,
    RequestTimeout,
    Runner,
    TokenLogprob,
    run_job,
)

log = logging.getLogger("tether.server")

# Bounds for requests from strangers: tighter than the library defaults.
SERVER_LIMITS = Limits(
    max_text_chars=1_000_000, max_rules=50_000, max_nesting=64, max_repeat=10_000,
    max_expanded=500_000, max_alternatives=100_000, max_dfa_states=20_000,
    max_earley_items=200_000, compile_seconds=5.0, completion_states=20_000,
    completion_bytes=100_000, max_json_depth=64, max_prompt_chars=100_000,
    max_tokens=4096, max_n=8, max_batch=16,
)


@dataclass
class ServerConfig:
    """Options of ``tether serve`` (see `tether.cli`)."""

    model: str = "embedded"
    host: str = "127.0.0.1"
    port: int = 8000
    parallel: int = 4
    queue_size: int = 64
    api_key: str | None = None
    limits: Limits = SERVER_LIMITS
    max_body_bytes: int = 4 << 20
    request_timeout: float = 300.0
    default_max_tokens: int = 512
    n_ctx: int = 8192
    threads_batch: int | None = None  # llama.cpp threads for multi-token steps; None: every core (up to 8)
    batch: bool = True
    prefix_cache: bool = True  # keep finished requests' KV caches for later prompts (see BatchedLlama)
    served_names: tuple[str, ...] = ()
    load_options: dict[str, Any] = field(default_factory=dict)


class Admission:
    """``parallel`` requests in flight, at most ``queue_size`` waiting (FIFO) behind them."""

    def __init__(self, parallel: int, queue_size: int, metrics: Metrics) -> None:
        self.free = parallel
        self.queue_size = queue_size
        self.metrics = metrics
        self.waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def acquire(self, timeout: float) -> None:
        if self.free > 0 and not self.waiters:
            self.free -= 1
            self.metrics.in_flight += 1
            return
        if len(self.waiters) >= self.queue_size:
            self.metrics.rejected_queue_full += 1
            raise HTTPError(503, f"the server is busy: {len(self.waiters)} requests already wait; retry later",
                            type="server_error", code="queue_full")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append(fut)
        self.metrics.queue_depth += 1
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot came as we gave up: pass it on
            else:
                fut.cancel()
                with contextlib.suppress(ValueError):
                    self.waiters.remove(fut)
            raise
        finally:
            self.metrics.queue_depth -= 1

    def release(self) -> None:
        while self.waiters:
            f = self.waiters.popleft()
            if not f.done():
                f.set_result(None)  # the slot passes to the next waiter
                return
        self.free += 1
        self.metrics.in_flight -= 1


class State:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.admission = Admission(config.parallel, config.queue_size, self.metrics)
        self.runner: Runner | None = None
        self.load_error: str | None = None
        self.on_fatal: Callable[[], None] | None = None  # set by serve(): stop the server
        self.names: set[str] = set(config.served_names)
        self.model_id = config.served_names[0] if config.served_names else ""

    def ready(self) -> Runner:
        if self.runner is None:
            msg = f"the model failed to load: {self.load_error}" if self.load_error else "the model is loading"
            raise HTTPError(503, msg, type="server_error", code="model_not_ready")
        return self.runner

    def check_model(self, name: str) -> str:
        if name and name not in self.names:
            raise HTTPError(404, f"the model {name!r} does not exist; this server serves "
                            f"{', '.join(sorted(self.names))}", param="model", code="model_not_found")
        return self.model_id


def load_runner(config: ServerConfig) -> tuple[Runner, str]:
    """Load the model named by ``config.model`` and build its runner."""
    from tether.models import load_model
    from tether.models.llama_cpp import available_cores

    spec = config.model
    options = dict(config.load_options)
    is_llama = spec in ("", "embedded", "default") or spec.endswith(".gguf") or spec.startswith("llama.cpp:") \
        or spec.lower().startswith("gemma")
    if is_llama:
        options.setdefault("n_ctx", config.n_ctx)
        # a step of several sequences is one llama_decode of several tokens: it runs on
        # n_threads_batch, so batching uses every core while a lone sequence's one-token
        # steps stay on n_threads (see default_threads)
        options.setdefault("n_threads_batch", config.threads_batch or available_cores())
        options.setdefault("n_seq", max(1, min(64, config.parallel * 2, config.limits.max_n * config.parallel)))
    model = load_model(spec or None, **options)
    if is_black_box(model):
        raise ModelError(f"{spec}: tether serve needs a model whose logits it steers (llama.cpp, transformers), "
                         "not a remote API")
    runner = Runner(model, backend_for(model, config), config.limits, threads=config.parallel + 1)
    warm_up(runner)
    return runner, str(model.name)


def backend_for(model: Model, config: ServerConfig) -> Backend:
    from tether.models.llama_cpp import LlamaCppModel
    from tether.server.runner import BatchBackend, SerialBackend

    if config.batch and isinstance(model, LlamaCppModel):
        return BatchBackend(model, prefix_cache=config.prefix_cache)
    return SerialBackend(model)


def warm_up(runner: Runner) -> None:
    """Build what every constraint shares before the first request: the vocabulary's token
    index and the engine's compiled kernels (seconds, once per process). Otherwise the first
    request pays for them, inside its ``compile_seconds``."""
    from tether.limits import DEFAULT

    c = Constraint("json_object", "warm-up", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    compiled, _ = runner.cache.get(c, runner.model, DEFAULT)
    pp, _ = runner.prepare("warm-up", n=1, max_tokens=2)
    run_job(runner.backend, Job("warm-up", pp, compiled, 2, temperature=0.0), lambda _d: None)
    runner.cache.misses = runner.cache.hits = 0


# -- helpers ---------------------------------------------------------------------------------


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _sampling(state: State, runner: Runner, req: ChatCompletionRequest | CompletionRequest,
              max_tokens: int | None) -> tuple[int, int, list[str]]:
    lim = state.config.limits
    mt = state.config.default_max_tokens if max_tokens is None else max_tokens
    if mt > lim.max_tokens:
        raise LimitError("max_tokens", mt, lim.max_tokens, "max_tokens")
    if req.n > min(lim.max_n, runner.backend.max_seqs):
        raise LimitError("max_n", req.n, min(lim.max_n, runner.backend.max_seqs), "n")
    stops = req.stops()
    if len(stops) > MAX_STOP:
        raise RequestError(f"at most {MAX_STOP} stop sequences; got {len(stops)}", "stop")
    for i, s in enumerate(stops):
        if not s or len(s) > MAX_STOP_CHARS:
            raise RequestError(f"stop sequences must have 1 to {MAX_STOP_CHARS} characters", f"stop[{i}]")
    return mt, req.n, stops


def _job(jid: str, req: ChatCompletionRequest | CompletionRequest, runner: Runner, pp: Any, compiled: Any,
         max_tokens: int, n: int, stops: list[str], logprobs: bool, top_logprobs: int, until: float) -> Job:
    seed = None if req.seed is None else req.seed % (1 << 64)
    return Job(jid, pp, compiled, max_tokens, n=n,
               temperature=1.0 if req.temperature is None else req.temperature,
               top_p=1.0 if req.top_p is None else req.top_p,
               top_k=0 if req.top_k is None or req.top_k < 0 else req.top_k,
               min_p=req.min_p or 0.0, seed=seed, stops=stops, logprobs=logprobs, top_logprobs=top_logprobs,
               until=until)


DONE = object()


def _start(runner: Runner, job: Job) -> tuple[asyncio.Queue[Any], asyncio.Future[JobResult]]:
    """Run ``job`` on a worker thread; its deltas arrive on the queue, then DONE."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[Any] = asyncio.Queue()

    def emit(d: Delta) -> None:
        loop.call_soon_threadsafe(q.put_nowait, d)

    fut = loop.run_in_executor(runner.workers, run_job, runner.backend, job, emit)
    fut.add_done_callback(lambda _f: q.put_nowait(DONE))
    return q, fut


async def _in_pool(pool: Executor, fn: Callable[..., Any], *args: Any, timeout: float, **kw: Any) -> Any:
    loop = asyncio.get_running_loop()
    fut = loop.run_in_executor(pool, lambda: fn(*args, **kw))
    return await asyncio.wait_for(fut, timeout)


async def _compile(runner: Runner, c: Constraint, seconds: float) -> tuple[Any, bool]:
    """Compile on the pool; past ``seconds`` (plus a margin) the request gets a LimitError.

    The engine checks the same deadline itself; this bound also holds where it does not
    (the thread then finishes its work in the background and its result is cached)."""
    hit = runner.cache.peek(c, runner.model)  # a cached constraint never waits for the compile pool
    if hit is not None:
        return hit, True
    try:
        return await _in_pool(runner.tools, runner.compile, c, timeout=seconds + 1.0)  # type: ignore[no-any-return]
    except TimeoutError:
        raise LimitError("compile_seconds", f"more than {seconds:g} s", seconds, c.param) from None


def _logprob_items(lps: list[TokenLogprob]) -> list[dict[str, Any]]:
    """Chat's ``logprobs.content``: each token with its ``top_logprobs`` (most likely first)."""
    return [{"token": t.token, "logprob": t.logprob, "bytes": t.bytes,
             "top_logprobs": [{"token": a.token, "logprob": a.logprob, "bytes": a.bytes} for a in t.top]}
            for t in lps]


def _completion_logprobs(lps: list[TokenLogprob], offset: int, top: int) -> dict[str, Any]:
    """The completions API's ``logprobs``: with ``top`` > 0, per position a map of the most
    likely tokens' texts to their log-probabilities, the chosen token's included."""
    offsets, pos = [], offset
    for t in lps:
        offsets.append(pos)
        pos += len(t.token)
    tops = None
    if top:
        tops = []
        for t in lps:
            m = {a.token: a.logprob for a in reversed(t.top)}  # a text shared by two tokens keeps the likelier
            m.setdefault(t.token, t.logprob)
            tops.append(m)
    return {"tokens": [t.token for t in lps], "token_logprobs": [t.logprob for t in lps],
            "top_logprobs": tops, "text_offset": offsets}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _message(c: Constraint, text: str, finish: str, jid: str, index: int) -> tuple[dict[str, Any], str]:
    """The assistant message and finish_reason of one chat choice."""
    call = parse_tool_call(c, text) if finish == "stop" else None
    if call is not None:
        name, args = call
        return ({"role": "assistant", "content": None,
                 "tool_calls": [{"id": f"call_{jid[-12:]}{index}", "type": "function",
                                 "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]},
                "tool_calls")
    return {"role": "assistant", "content": text}, finish


@dataclass
class _Record:
    """One request, for its log line and the metrics."""

    id: str
    endpoint: str
    t0: float = field(default_factory=time.monotonic)
    model: str = ""
    constraint: str = "text"
    cached: bool | None = None
    stream: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft: float | None = None
    outcome: str = "ok"
    status: int = 200
    finish: list[str] = field(default_factory=list)

    def done(self, metrics: Metrics) -> None:
        total = time.monotonic() - self.t0
        metrics.finished(self.endpoint, self.outcome, self.prompt_tokens, self.completion_tokens, self.ttft, total)
        log.info(json.dumps({
            "event": "request", "id": self.id, "endpoint": self.endpoint, "model": self.model,
            "constraint": self.constraint, "cache_hit": self.cached, "stream": self.stream,
            "status": self.status, "outcome": self.outcome, "finish": self.finish,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "ttft_ms": None if self.ttft is None else round(self.ttft * 1000, 1),
            "total_ms": round(total * 1000, 1),
        }))


def _error_response(rec: _Record, exc: BaseException, metrics: Metrics, param: str | None = None) -> JSONResponse:
    if isinstance(exc, asyncio.TimeoutError | RequestTimeout):
        err = HTTPError(408, "the request ran past the server's time limit", type="timeout", code="timeout")
    elif isinstance(exc, Cancelled):
        err = HTTPError(499, "the client closed the request", code="cancelled")
    else:
        err = from_exception(exc, param)
        if err.status >= 500:
            log.error("request %s failed", rec.id, exc_info=exc)
    rec.status, rec.outcome = err.status, err.code or err.type
    rec.done(metrics)
    return JSONResponse(err.body(), status_code=err.status)


async def _await_job(request: Request, job: Job, fut: asyncio.Future[JobResult]) -> JobResult:
    """Wait for a job; a client that goes away cancels it."""
    while True:
        done, _ = await asyncio.wait({fut}, timeout=0.25)
        if done:
            return fut.result()
        if await request.is_disconnected():
            job.cancelled.set()


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


# -- the app --------------------------------------------------------------------------------------


def create_app(config: ServerConfig, runner: Runner | None = None, model_id: str | None = None) -> Guard:
    """The ASGI app. With ``runner`` it serves at once; else it loads ``config.model`` on startup."""
    state = State(config)

    def install(r: Runner, name: str) -> None:
        state.runner = r
        state.model_id = state.model_id or name
        state.names |= {name, config.model} - {""}
        if config.model in ("", "embedded", "default"):
            state.names.add("embedded")

    if runner is not None:
        install(runner, model_id or str(runner.model.name))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = None
        if state.runner is None:
            async def load() -> None:
                try:
                    r, name = await asyncio.to_thread(load_runner, config)
                    install(r, name)
                    log.info(json.dumps({"event": "ready", "model": name}))
                except Exception as exc:  # noqa: BLE001 -- logged; the server stops
                    state.load_error = f"{type(exc).__name__}: {exc}"
                    log.error("the model failed to load: %s", state.load_error)
                    if state.on_fatal is not None:
                        state.on_fatal()  # serve() stops the server and returns 1
            task = asyncio.create_task(load())
        yield
        if task is not None:
            task.cancel()
        if state.runner is not None:
            state.runner.close()

    app = FastAPI(title="tether", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.tether = state

    @app.exception_handler(RequestValidationError)
    async def invalid_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = list(exc.errors())
        first: dict[str, Any] = dict(errs[0]) if errs else {"loc": (), "msg": "invalid request body", "type": ""}
        if first.get("type") == "json_invalid":
            msg = f"the request body is not valid JSON: {first.get('ctx', {}).get('error', first['msg'])}"
            param = None
        else:
            param = _loc(tuple(first.get("loc", ()))) or None
            msg = f"{first['msg']} (at {param})" if param else str(first["msg"])
            if len(errs) > 1:
                msg += f"; and {len(errs) - 1} more problem(s)"
        return JSONResponse(HTTPError(400, msg, param=param, code="invalid_request_body").body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "invalid_request_body", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code,
                                                                                            "http_error")
        return JSONResponse(HTTPError(exc.status_code, str(exc.detail), code=code).body(), status_code=exc.status_code)

    @app.exception_handler(HTTPError)
    async def our_error(request: Request, exc: HTTPError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.get("/health")
    async def health() -> JSONResponse:
        if state.runner is None:
            return JSONResponse({"status": "error" if state.load_error else "loading", "error": state.load_error},
                                status_code=503)
        return JSONResponse({"status": "ok", "model": state.model_id})

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        state.ready()
        return JSONResponse({"object": "list", "data": [
            {"id": state.model_id, "object": "model", "created": 0, "owned_by": "tether"}]})

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        r = state.runner
        text = state.metrics.render(
            cache_hits=r.cache.hits if r else 0, cache_misses=r.cache.misses if r else 0,
            cache_size=len(r.cache) if r else 0, backend=r.backend.stats() if r else {})
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def admitted(rec: _Record, until: float, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work`` holding a slot; the slot is released when ``work`` says so."""
        await state.admission.acquire(max(0.0, until - time.monotonic()))
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                state.admission.release()

        try:
            return await work(), release
        except BaseException:
            release()
            raise

    @app.post("/v1/chat/completions")
    async def chat(req: ChatCompletionRequest, request: Request) -> Any:
        jid = "chatcmpl-" + uuid.uuid4().hex
        rec = _Record(jid, "chat", stream=req.stream)
        until = time.monotonic() + config.request_timeout
        param: str | None = None  # the constraint's field, once known
        try:
            runner = state.ready()
            rec.model = state.check_model(req.model)
            max_tokens, n, stops = _sampling(state, runner, req, req.max_completion_tokens
                                              if req.max_completion_tokens is not None else req.max_tokens)
            if req.top_logprobs and not req.logprobs:
                raise RequestError("top_logprobs needs logprobs=true", "top_logprobs")
            with limits(config.limits):
                c = chat_constraint(req)
            rec.constraint, param = c.kind, c.param
            msgs = chat_messages(req.messages, tools_text=tools_message(req, c) if c.is_tools else "")

            async def setup() -> tuple[Job, Any, Any]:
                compiled, rec.cached = await _compile(runner, c, config.limits.compile_seconds)
                pp, mt = await _in_pool(runner.workers, runner.prepare, msgs, n=n, max_tokens=max_tokens,
                                        timeout=max(1.0, until - time.monotonic()))
                rec.prompt_tokens = len(pp.tokens)
                job = _job(jid, req, runner, pp, compiled, mt, n, stops, req.logprobs, req.top_logprobs or 0, until)
                q, fut = _start(runner, job)
                return job, q, fut

            (job, q, fut), release = await admitted(rec, until, setup)
            fut.add_done_callback(lambda _f: release())
        except Exception as exc:  # noqa: BLE001 -- every error becomes an OpenAI error body
            return _error_response(rec, exc, state.metrics, param)
        created = int(time.time())
        if req.stream:
            return StreamingResponse(_guarded(state, rec, job, c.param,
                                              _chat_stream(state, rec, req, c, job, q, fut, created)),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            res = await _await_job(request, job, fut)
        except Exception as exc:  # noqa: BLE001
            return _error_response(rec, exc, state.metrics, c.param)
        choices = []
        for ch in res.choices:
            msg, finish = _message(c, ch.text, ch.finish_reason, jid, ch.index)
            rec.finish.append(finish)
            choices.append({"index": ch.index, "message": msg,
                            "logprobs": {"content": _logprob_items(ch.logprobs)} if req.logprobs else None,
                            "finish_reason": finish})
        rec.completion_tokens, rec.ttft = res.completion_tokens, res.ttft
        rec.done(state.metrics)
        return JSONResponse({"id": jid, "object": "chat.completion", "created": created, "model": rec.model,
                             "choices": choices, "usage": _usage(res.prompt_tokens, res.completion_tokens),
                             "system_fingerprint": None})

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest, request: Request) -> Any:
        jid = "cmpl-" + uuid.uuid4().hex
        rec = _Record(jid, "completions", stream=req.stream)
        until = time.monotonic() + config.request_timeout
        param: str | None = None
        try:
            runner = state.ready()
            rec.model = state.check_model(req.model)
            max_tokens, n, stops = _sampling(state, runner, req, req.max_tokens)
            if req.suffix:
                raise RequestError("suffix (insertion) is not supported", "suffix")
            if req.best_of is not None and req.best_of != n:
                raise RequestError("best_of other than n is not supported", "best_of")
            if req.echo and req.stream:
                raise RequestError("echo cannot be combined with stream", "echo")
            prompt = req.prompt if isinstance(req.prompt, str) else (req.prompt[0] if len(req.prompt) == 1 else None)
            if prompt is None:
                raise RequestError("give one prompt per request (a string or a list of one string)", "prompt")
            with limits(config.limits):
                c = request_constraint(req)
            rec.constraint, param = c.kind, c.param

            async def setup() -> tuple[Job, Any, Any]:
                compiled, rec.cached = await _compile(runner, c, config.limits.compile_seconds)
                pp, mt = await _in_pool(runner.workers, runner.prepare, prompt, n=n, max_tokens=max_tokens,
                                        timeout=max(1.0, until - time.monotonic()))
                rec.prompt_tokens = len(pp.tokens)
                job = _job(jid, req, runner, pp, compiled, mt, n, stops, req.logprobs is not None,
                           req.logprobs or 0, until)
                q, fut = _start(runner, job)
                return job, q, fut

            (job, q, fut), release = await admitted(rec, until, setup)
            fut.add_done_callback(lambda _f: release())
        except Exception as exc:  # noqa: BLE001
            return _error_response(rec, exc, state.metrics, param)
        created = int(time.time())
        if req.stream:
            return StreamingResponse(_guarded(state, rec, job, None,
                                              _completion_stream(state, rec, req, job, q, fut, created)),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        try:
            res = await _await_job(request, job, fut)
        except Exception as exc:  # noqa: BLE001
            return _error_response(rec, exc, state.metrics, c.param)
        head = prompt if req.echo else ""
        choices = [{"index": ch.index, "text": head + ch.text, "finish_reason": ch.finish_reason,
                    "logprobs": _completion_logprobs(ch.logprobs, len(head), req.logprobs or 0)
                    if req.logprobs is not None else None}
                   for ch in res.choices]
        rec.finish = [ch.finish_reason for ch in res.choices]
        rec.completion_tokens, rec.ttft = res.completion_tokens, res.ttft
        rec.done(state.metrics)
        return JSONResponse({"id": jid, "object": "text_completion", "created": created, "model": rec.model,
                             "choices": choices, "usage": _usage(res.prompt_tokens, res.completion_tokens)})

    return Guard(app, api_key=config.api_key, max_body=config.max_body_bytes)


async def _stream_events(q: asyncio.Queue[Any]) -> AsyncIterator[Delta]:
    while True:
        item = await q.get()
        if item is DONE:
            return
        yield item


SSE_DONE = "data: [DONE]\n\n"


async def _guarded(state: State, rec: _Record, job: Job, param: str | None,
                   events: AsyncGenerator[str, None]) -> AsyncIterator[str]:
    """The tail both SSE streams share: a client that goes away cancels the job (logged as
    499, its slot freed at once); an error once the headers are out is reported in the
    stream (an OpenAI error body), then ``[DONE]``; the job is cancelled in any case."""
    finished = False
    try:
        async for item in events:
            yield item
            finished = item == SSE_DONE
    except (asyncio.CancelledError, GeneratorExit):
        job.cancelled.set()
        rec.outcome, rec.status = "cancelled", 499
        rec.done(state.metrics)
        raise
    except Exception as exc:  # noqa: BLE001 -- the headers are sent: report in the stream
        job.cancelled.set()
        if not finished:
            resp = _error_response(rec, exc, state.metrics, param)
            yield f"data: {bytes(resp.body).decode()}\n\n"
            yield SSE_DONE
    finally:
        job.cancelled.set()
        await events.aclose()


async def _chat_stream(state: State, rec: _Record, req: ChatCompletionRequest, c: Constraint, job: Job,
                       q: asyncio.Queue[Any], fut: asyncio.Future[JobResult], created: int) -> AsyncGenerator[str, None]:
    base = {"id": job.id, "object": "chat.completion.chunk", "created": created, "model": rec.model,
            "system_fingerprint": None}
    usage_wanted = bool(req.stream_options and req.stream_options.include_usage)

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        return _sse({**base, "choices": choices, **extra})

    buffered = c.is_tools  # a tool call is known once complete: its choice is sent at the end
    yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                  "finish_reason": None} for i in range(job.n)])
    async for d in _stream_events(q):
        if buffered:
            continue
        lp = {"content": _logprob_items(d.logprobs)} if req.logprobs else None
        if d.text or lp:
            yield chunk([{"index": d.index, "delta": {"content": d.text}, "logprobs": lp, "finish_reason": None}])
    res = fut.result()
    rec.completion_tokens, rec.ttft = res.completion_tokens, res.ttft
    for ch in res.choices:
        msg, finish = _message(c, ch.text, ch.finish_reason, job.id, ch.index)
        rec.finish.append(finish)
        delta: dict[str, Any] = {}
        if buffered:
            if "tool_calls" in msg:
                delta = {"tool_calls": [{"index": 0, **tc} for tc in msg["tool_calls"]]}
            else:
                delta = {"content": msg["content"]}
        yield chunk([{"index": ch.index, "delta": delta, "logprobs": None, "finish_reason": finish}])
    if usage_wanted:
        yield chunk([], usage=_usage(res.prompt_tokens, res.completion_tokens))
    yield SSE_DONE
    rec.done(state.metrics)


async def _completion_stream(state: State, rec: _Record, req: CompletionRequest, job: Job, q: asyncio.Queue[Any],
                             fut: asyncio.Future[JobResult], created: int) -> AsyncGenerator[str, None]:
    base = {"id": job.id, "object": "text_completion", "created": created, "model": rec.model}
    usage_wanted = bool(req.stream_options and req.stream_options.include_usage)
    offsets = [0] * job.n
    async for d in _stream_events(q):
        lp = None
        if req.logprobs is not None and d.logprobs:
            lp = _completion_logprobs(d.logprobs, offsets[d.index], req.logprobs)
            offsets[d.index] += sum(len(t.token) for t in d.logprobs)
        if d.text or lp:
            yield _sse({**base, "choices": [{"index": d.index, "text": d.text, "logprobs": lp,
                                             "finish_reason": None}]})
    res = fut.result()
    rec.completion_tokens, rec.ttft = res.completion_tokens, res.ttft
    for ch in res.choices:
        rec.finish.append(ch.finish_reason)
        yield _sse({**base, "choices": [{"index": ch.index, "text": "", "logprobs": None,
                                         "finish_reason": ch.finish_reason}]})
    if usage_wanted:
        yield _sse({**base, "choices": [], "usage": _usage(res.prompt_tokens, res.completion_tokens)})
    yield SSE_DONE
    rec.done(state.metrics)


class Guard:
    """ASGI middleware in front of every route: the API key and the body size.

    With an API key, every route but ``/health`` needs ``Authorization: Bearer <key>``
    (compared in constant time): 401 otherwise. A body over ``max_body`` bytes is refused
    with 413 before the app reads it (by its Content-Length, or while it arrives).
    """

    def __init__(self, app: FastAPI, *, api_key: str | None, max_body: int) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None
        self.max_body = max_body
        self.state: State = app.state.tether

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.api_key is not None and scope.get("path") != "/health":
            scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.api_key):
                await self._reply(send, HTTPError(401, "missing or wrong API key (Authorization: Bearer <key>)",
                                                  code="invalid_api_key"),
                                  [(b"www-authenticate", b"Bearer")])
                return
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            length = headers.get(b"content-length")
            if length is not None:
                try:
                    declared = int(length)
                except ValueError:
                    await self._reply(send, HTTPError(400, "bad Content-Length header", code="invalid_request_body"))
                    return
                if declared > self.max_body:
                    await self._too_large(send, declared)
                    return
            body = bytearray()
            more = True
            while more:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                body += msg.get("body", b"")
                more = msg.get("more_body", False)
                if len(body) > self.max_body:
                    await self._too_large(send, len(body))
                    return
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)

    async def _too_large(self, send: Send, size: int) -> None:
        await self._reply(send, HTTPError(413, f"the request body has {size} bytes or more; this server takes at "
                                          f"most {self.max_body}", code="request_too_large"))

    async def _reply(self, send: Send, err: HTTPError, extra: list[tuple[bytes, bytes]] | None = None) -> None:
        data = json.dumps(err.body()).encode()
        await send({"type": "http.response.start", "status": err.status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode()), *(extra or [])]})
        await send({"type": "http.response.body", "body": data})
        self.state.metrics.requests[("any", err.code or "error")] += 1
