"""Running requests on the model: compile cache, prompt preparation, decoding in worker
threads, and the way the model is shared.

Nothing here blocks the event loop: the app awaits `Runner.compile` and
`Runner.prepare` (a small thread pool) and `Runner.start` runs a `Job` on a thread of
its own, handing `Delta` events and the final `JobResult` back through a callback.

The model is shared in one of two ways (`Backend`):

* `BatchBackend` (llama.cpp): `tether.models.llama_batch.BatchedLlama` gives every job
  its own KV-cache slots and runs the forward passes of all running jobs in one batch
  per step (continuous batching);
* `SerialBackend` (any other model): one job at a time holds the model.

The compile cache maps a constraint's key and the model's vocabulary fingerprint to the
lowered output spec and the engine's compiled constraint, so a repeated schema is
lowered and compiled once; its hit and miss counts go to ``/metrics``.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.decoding import Sample, decode_iter
from tether.decoding.branch import end_with_outside
from tether.decoding.guide import Guide
from tether.decoding.logits import full_free_logits
from tether.decoding.sampling import log_softmax
from tether.decoding.stops import StopScanner
from tether.errors import ContextLengthError, LimitError, TetherError
from tether.limits import Limits, deadline, limits
from tether.models.base import BatchLogits, Costs, Model
from tether.program import output_spec
from tether.program.generate import compile_output, prepare_prompt, to_generation
from tether.program.outputs import OutputSpec
from tether.server.constraints import Constraint, RequestError
from tether.tokens import Vocabulary

if TYPE_CHECKING:
    from tether.models.llama_cpp import LlamaCppModel


class Cancelled(Exception):
    """The client went away."""


class RequestTimeout(Exception):
    """The request ran past its time limit."""


# -- the compile cache --------------------------------------------------------------------


@dataclass
class Compiled:
    spec: OutputSpec
    constraint: Any | None  # the engine's CompiledConstraint; None for free text
    seconds: float


class CompileCache:
    """LRU of compiled constraints keyed by (constraint key, vocabulary fingerprint).

    Concurrent requests for one key compile it once (the later ones wait for the first).
    Errors are not cached.
    """

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._done: OrderedDict[tuple[str, str], Compiled] = OrderedDict()
        self._running: dict[tuple[str, str], Future[Compiled]] = {}

    def __len__(self) -> int:
        return len(self._done)

    def _hit(self, key: tuple[str, str]) -> Compiled | None:
        """The cached entry of ``key``, counted as a hit and made the most recent; None
        if it is not cached. Call it holding the lock."""
        hit = self._done.get(key)
        if hit is not None:
            self._done.move_to_end(key)
            self.hits += 1
        return hit

    def peek(self, c: Constraint, model: Model) -> Compiled | None:
        """The compiled constraint if it is cached (a hit), else None; never compiles."""
        with self._lock:
            return self._hit((c.key, model.vocabulary.fingerprint))

    def get(self, c: Constraint, model: Model, lim: Limits) -> tuple[Compiled, bool]:
        """The compiled constraint and whether it came from the cache."""
        key = (c.key, model.vocabulary.fingerprint)
        with self._lock:
            hit = self._hit(key)
            if hit is not None:
                return hit, True
            fut = self._running.get(key)
            owner = fut is None
            if owner:
                fut = self._running[key] = Future()
                self.misses += 1
            else:
                self.hits += 1
        assert fut is not None
        if not owner:
            return fut.result(), True
        try:
            t0 = time.perf_counter()
            with limits(lim), deadline("compile"):
                spec = output_spec(c.output())
                cc = compile_output(model, spec)
            done = Compiled(spec, cc, time.perf_counter() - t0)
        except BaseException as exc:
            with self._lock:
                del self._running[key]
            fut.set_exception(exc)
            raise
        with self._lock:
            del self._running[key]
            self._done[key] = done
            while len(self._done) > self.size:
                self._done.popitem(last=False)
        fut.set_result(done)
        return done, False


# -- model sharing --------------------------------------------------------------------------


class Backend:
    """How jobs get the model: ``session(n, cells, cancelled)`` yields a model to decode on."""

    model: Model
    n_ctx: int
    max_seqs: int

    def session(self, n: int, cells: int, cancelled: threading.Event,
                until: float) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def stats(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


class SerialBackend(Backend):
    """One job at a time holds the model (any backend)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.n_ctx = int(model.n_ctx or 1 << 30)
        self.max_seqs = 1 << 30
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def session(self, n: int, cells: int, cancelled: threading.Event, until: float) -> Iterator[Any]:
        while not self._lock.acquire(timeout=0.05):
            if cancelled.is_set():
                raise Cancelled()
            if time.monotonic() > until:
                raise RequestTimeout()
        try:
            yield self.model
        finally:
            self._lock.release()


class BatchBackend(Backend):
    """Continuous batching on a llama.cpp model (`BatchedLlama`)."""

    def __init__(self, model: LlamaCppModel, *, wait_s: float = 0.02, prefix_cache: bool = True) -> None:
        from tether.models.llama_batch import BatchedLlama

        self.model = model
        self.batched = BatchedLlama(model, wait_s=wait_s, prefix_cache=prefix_cache)
        self.n_ctx = self.batched.n_ctx
        self.max_seqs = self.batched.n_slots

    @contextlib.contextmanager
    def session(self, n: int, cells: int, cancelled: threading.Event, until: float) -> Iterator[Any]:
        try:
            s = self.batched.open(n, cells, timeout=max(0.0, until - time.monotonic()), cancelled=cancelled)
        except InterruptedError:
            raise Cancelled() from None
        except TimeoutError:
            raise RequestTimeout() from None
        with s:
            yield s

    def stats(self) -> dict[str, float]:
        st = self.batched.stats
        return {"batches": st.batches, "batch_rows": st.rows, "batch_max_rows": st.max_rows,
                "open_sessions": self.batched.open_sessions}

    def close(self) -> None:
        self.batched.close()


# -- jobs ---------------------------------------------------------------------------------------


@dataclass
class Alternative:
    token: str
    logprob: float
    bytes: list[int]


@dataclass
class TokenLogprob:
    token: str
    logprob: float
    bytes: list[int]
    top: list[Alternative] = field(default_factory=list)  # the most likely tokens at this position


@dataclass
class Delta:
    """New output text of choice ``index`` (and the log-probabilities of its new tokens)."""

    index: int
    text: str
    logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass
class ChoiceResult:
    index: int
    text: str
    finish_reason: str  # stop, length, error
    complete: bool
    error: str | None
    n_tokens: int
    logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass
class JobResult:
    choices: list[ChoiceResult]
    prompt_tokens: int
    completion_tokens: int
    ttft: float | None
    seconds: float


@dataclass
class Prepared:
    text: str
    tokens: list[int]
    heal: bytes


@dataclass
class Job:
    id: str
    prompt: Prepared
    compiled: Compiled
    max_tokens: int
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stops: list[str] = field(default_factory=list)
    logprobs: bool = False
    top_logprobs: int = 0  # alternatives per position (with logprobs)
    until: float = float("inf")  # monotonic deadline
    cancelled: threading.Event = field(default_factory=threading.Event)


class _LogitsTap:
    """The model a job with ``top_logprobs`` decodes on: it forwards the `Model` protocol
    and keeps the logits row it hands out for each sequence (until ``rows`` is cleared),
    so that the alternatives of each chosen token can be read afterwards. It has no
    selective path: the decoder fetches full rows."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.rows: dict[tuple[int, ...], NDArray[np.float32]] = {}

    @property
    def vocabulary(self) -> Vocabulary:
        return self.model.vocabulary

    @property
    def costs(self) -> Costs:
        return self.model.costs

    @property
    def name(self) -> str:
        return str(self.model.name)

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return tuple(self.model.eos_ids)

    @property
    def bos_id(self) -> int | None:
        return self.model.vocabulary.bos_id

    @property
    def n_ctx(self) -> int | None:
        return self.model.n_ctx

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = False) -> list[int]:
        return self.model.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return self.model.detokenize(tokens)

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]:
        row = np.array(self.model.logits(tokens), dtype=np.float32)  # a view may not outlive the next call
        self.rows[tuple(int(t) for t in tokens)] = row
        return row

    def logits_batch(self, seqs: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        if isinstance(self.model, BatchLogits):
            out = np.asarray(self.model.logits_batch(seqs), dtype=np.float32)
        else:
            out = np.stack([np.array(self.model.logits(s), dtype=np.float32) for s in seqs])
        for seq, row in zip(seqs, out, strict=True):
            self.rows[tuple(int(t) for t in seq)] = row
        return out


class _Alternatives:
    """The distribution each chosen token of one sequence was drawn from, as the decoder
    saw it: the logits row `_LogitsTap` kept, restricted to what a replay of the
    constraint allows (free text: every ordinary token; where the output may end, the
    mass of the tokens the constraint forbids counts toward EOS, as in `decode_iter`)."""

    def __init__(self, tap: _LogitsTap, compiled: Any | None, prompt: list[int], heal: bytes, k: int) -> None:
        self.tap = tap
        self.guide = Guide(compiled.matcher() if compiled is not None else None, tap.vocabulary, heal)
        self.seq = list(prompt)
        self.k = k

    def push(self, token: int) -> tuple[float, list[tuple[int, float]]]:
        """The chosen token's log-probability and the ``k`` most likely tokens at its
        position (a forced token: probability 1, the only one)."""
        row = self.tap.rows.get(tuple(self.seq))
        ids = self.guide.allowed() if row is not None else None
        self.guide.consume(token)
        self.seq.append(token)
        if row is None:
            return 0.0, [(token, 0.0)]
        vocab = self.tap.vocabulary
        full = full_free_logits(self.tap, row)
        if ids is None:
            vals, ids = full, np.arange(len(full))
        elif self.guide.matcher is not None and any(e in set(ids.tolist()) for e in vocab.eos_ids):
            vals = end_with_outside(vocab, full, ids)
        else:
            vals = np.asarray(row[ids], dtype=np.float32)
        lp = log_softmax(vals)
        pos = int(np.searchsorted(ids, token))
        chosen = float(lp[pos]) if pos < len(ids) and int(ids[pos]) == token else float("-inf")
        k = min(self.k, len(ids))
        best = np.argpartition(-lp, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        best = best[np.lexsort((ids[best], -lp[best]))]  # most likely first, ties by token id
        return chosen, [(int(ids[j]), float(lp[j])) for j in best]


class _Choice:
    """Incremental text of one sequence: what is safe to show, and its token logprobs."""

    def __init__(self, index: int, stops: list[str], heal: int, alternatives: _Alternatives | None = None) -> None:
        self.index = index
        self.heal = heal  # prompt bytes token healing re-generates: not part of the output
        self.scanner = StopScanner(stops)
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.sent = 0
        self.n_tokens = 0
        self.logprob = 0.0
        self.logprobs: list[TokenLogprob] = []
        self.alternatives = alternatives

    def update(self, d: Any, vocab: Any, want_logprobs: bool, final: bool) -> Delta | None:
        new_lp: list[TokenLogprob] = []
        if want_logprobs and len(d.tokens) > self.n_tokens:
            new = d.tokens[self.n_tokens:]
            step = d.logprob - self.logprob  # the sampled token's; forced ones had probability 1
            for i, t in enumerate(new):
                b = bytes(vocab.tokens[t])
                cut = min(self.heal, len(b))
                b, self.heal = b[cut:], self.heal - cut
                if self.alternatives is None:
                    new_lp.append(TokenLogprob(b.decode("utf-8", "replace"), step if i == len(new) - 1 else 0.0,
                                               list(b)))
                    continue
                chosen, top = self.alternatives.push(int(t))
                alts = [Alternative(a.decode("utf-8", "replace"), lp, list(a))
                        for a, lp in ((bytes(vocab.tokens[j])[cut:], lp) for j, lp in top)]
                new_lp.append(TokenLogprob(b.decode("utf-8", "replace"), chosen, list(b), alts))
            self.logprobs += new_lp
        self.n_tokens, self.logprob = len(d.tokens), d.logprob
        self.scanner.text, self.scanner.hit = bytearray(d.text), d.stop_text
        safe = len(d.text) if final else self.scanner.safe_length()
        piece = ""
        if safe > self.sent:
            piece = self.utf8.decode(bytes(d.text[self.sent:safe]), final=final)
            self.sent = safe
        elif final:
            piece = self.utf8.decode(b"", final=True)
        if piece or new_lp:
            return Delta(self.index, piece, new_lp)
        return None


def run_job(backend: Backend, job: Job, emit: Callable[[Delta], None]) -> JobResult:
    """Decode ``job`` (in the calling thread); ``emit`` gets each new piece of text.

    Raises:
        Cancelled: ``job.cancelled`` was set; RequestTimeout: ``job.until`` passed.
    """
    t0 = time.monotonic()
    ttft: float | None = None
    pp = job.prompt
    n = job.n
    cells = n * (len(pp.tokens) + job.max_tokens)
    dec = Sample(temperature=job.temperature, top_k=job.top_k, top_p=job.top_p, min_p=job.min_p,
                 seed=job.seed, n=n)
    cc = job.compiled.constraint
    with backend.session(n, cells, job.cancelled, job.until) as model:
        vocab = model.vocabulary
        tap = _LogitsTap(model) if job.logprobs and job.top_logprobs > 0 else None
        choices = [_Choice(i, job.stops, len(pp.heal),
                           _Alternatives(tap, cc, pp.tokens, pp.heal, job.top_logprobs) if tap else None)
                   for i in range(n)]
        if tap is not None:
            model = tap
        before = model.costs.snapshot()
        last: list[Any] = []
        for states in decode_iter(model, pp.tokens, cc.matcher() if cc is not None else None, dec,
                                  max_tokens=job.max_tokens, stop=job.stops, heal=pp.heal):
            last = states
            for ch, d in zip(choices, states, strict=True):
                delta = ch.update(d, vocab, job.logprobs, final=False)
                if delta is not None:
                    if ttft is None and delta.text:
                        ttft = time.monotonic() - t0
                    emit(delta)
            if tap is not None:
                tap.rows.clear()
            if job.cancelled.is_set():
                raise Cancelled()
            if time.monotonic() > job.until:
                raise RequestTimeout()
        costs = model.costs.snapshot() - before
        results = []
        for ch, d in zip(choices, last, strict=True):
            delta = ch.update(d, vocab, False, final=True)
            if delta is not None and delta.text:
                emit(delta)
            g = to_generation(model, d, job.compiled.spec, costs, pp.text)
            results.append(ChoiceResult(ch.index, g.text, d.finish_reason, d.complete, g.error,
                                        len(d.tokens), ch.logprobs))
    if ttft is None:
        ttft = time.monotonic() - t0
    return JobResult(results, len(pp.tokens), sum(r.n_tokens for r in results), ttft, time.monotonic() - t0)


class Runner:
    """The model, its backend, the compile cache and the thread pools of one server."""

    def __init__(self, model: Model, backend: Backend, lim: Limits, *, threads: int = 8) -> None:
        self.model = model
        self.backend = backend
        self.limits = lim
        self.cache = CompileCache()
        self.tools = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tether-compile")
        self.workers = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tether-decode")
        self._ids = itertools.count()

    def compile(self, c: Constraint) -> tuple[Compiled, bool]:
        return self.cache.get(c, self.model, self.limits)

    def prepare(self, prompt: str | list[dict[str, str]], *, n: int, max_tokens: int) -> tuple[Prepared, int]:
        """Render and tokenize ``prompt``; return it and ``max_tokens`` cut to fit the context.

        Raises:
            LimitError: the prompt is longer than ``max_prompt_chars``.
            ContextLengthError: the prompt leaves no room for one output token.
        """
        with limits(self.limits):
            chars = len(prompt) if isinstance(prompt, str) else sum(len(m["content"]) for m in prompt)
            if chars > self.limits.max_prompt_chars:
                raise LimitError("max_prompt_chars", chars, self.limits.max_prompt_chars, "the prompt")
            try:
                pp = prepare_prompt(self.model, prompt, healing=isinstance(prompt, str), chat_template=None)
            except TetherError:
                raise
            except ValueError as exc:  # the prompt's text cannot be tokenized by this model
                raise RequestError(f"the prompt cannot be tokenized: {exc}",
                                   "prompt" if isinstance(prompt, str) else "messages") from None
            if len(pp.text) > self.limits.max_prompt_chars:
                raise LimitError("max_prompt_chars", len(pp.text), self.limits.max_prompt_chars,
                                 "the rendered prompt")
        per_seq = self.backend.n_ctx // max(1, n)
        room = per_seq - len(pp.tokens)
        if room < 1:
            raise ContextLengthError(per_seq, len(pp.tokens) + 1)
        return Prepared(pp.text, list(pp.tokens), pp.heal), min(max_tokens, room)

    def close(self) -> None:
        self.backend.close()
        self.tools.shutdown(wait=False, cancel_futures=True)
        self.workers.shutdown(wait=False, cancel_futures=True)
