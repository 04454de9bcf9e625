"""Continuous batching on one llama.cpp model: many sequences, one forward pass per step.

`BatchedLlama` owns a `LlamaCppModel` and runs every forward pass on one thread of its
own. Callers (one thread per request) `open` a `Session` holding a fixed set of the
model's KV-cache slots (``n_seq``; one slot per sequence of the request) and a share of
the context window; a session is a steerable model (the `Model` protocol plus
``logits_batch``) that ``decode``/``decode_iter`` drive as they drive any model. Each
``logits`` call of a session is queued; the model thread takes every queued call (after
waiting a few milliseconds for the other open sessions to queue theirs), evaluates the
new tokens of all of them in one ``llama_decode`` batch (each token tagged with its
sequence's slot, so attention stays inside the sequence) and hands each caller a copy of
its logits rows. Sessions join and leave between steps (continuous batching).

A slot keeps its sequence's cache across steps: a call trims the slot to the common
prefix of what it holds and the new tokens, and evaluates the rest (usually one token).
A slot also starts from the longest prefix any other slot holds (prefix caching, through
`LlamaCppModel.eval_slots`): the slots of closed sessions keep their caches, so a prompt
served before (a shared system prompt, a repeated request) is not evaluated again.

Cells of the context window are reserved conservatively: a session asks for
``n * (prompt + max_tokens)`` cells when it opens, a free slot's cache counts its length,
and a session that needs cells evicts the caches of free slots (least recently released
first) before it waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from tether.errors import ContextLengthError, ModelArgumentError, ModelError
from tether.models.base import Costs, check_tokens
from tether.models.llama_cpp import LlamaCppModel

if TYPE_CHECKING:
    from tether.tokens import Vocabulary

__all__ = ["BatchStats", "BatchedLlama", "Session"]


@dataclass
class BatchStats:
    """Counters of the model thread (read them for metrics)."""

    batches: int = 0  # llama_decode rounds
    rows: int = 0  # logits rows computed (sequences served)
    evaluated_tokens: int = 0
    max_rows: int = 0  # the largest batch seen


@dataclass
class _Call:
    entries: list[tuple[int, list[int]]]  # (slot, tokens)
    session: Session
    done: threading.Event = field(default_factory=threading.Event)
    result: NDArray[np.float32] | None = None
    error: BaseException | None = None


class Session:
    """A request's view of the batched model: its own slots, costs and context share.

    Implements the `Model` protocol (``vocabulary``, ``costs``, ``name``, ``eos_ids``,
    ``tokenize``, ``detokenize``, ``logits``) and ``logits_batch`` for up to
    ``len(slots)`` sequences. Use it from one thread; close it (or use ``with``) to give
    its slots back.
    """

    def __init__(self, owner: BatchedLlama, slots: list[int], cells: int) -> None:
        self._owner = owner
        self.slots = slots
        self.cells = cells
        self.costs = Costs()
        self.name = owner.model.name
        self.n_ctx = owner.model.n_ctx
        self.closed = False
        self._held: dict[int, list[int]] = {k: [] for k in slots}  # what each slot was last sent

    @property
    def vocabulary(self) -> Vocabulary:
        return self._owner.model.vocabulary

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self._owner.model.eos_ids

    @property
    def bos_id(self) -> int | None:
        return self._owner.model.bos_id

    def tokenize(self, text: str | bytes, *, add_bos: bool = False, special: bool = False) -> list[int]:
        return self._owner.model.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return self._owner.model.detokenize(tokens)

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]:
        """Logits after ``tokens`` (a new array), evaluated in the next shared batch."""
        row: NDArray[np.float32] = self.logits_batch([tokens])[0]
        return row

    def logits_batch(self, seqs: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        """Logits after each of ``seqs`` (at most one per slot of this session).

        Each sequence goes to the slot of this session holding its longest prefix (the
        sequences of a request finish at different steps, so their order shifts)."""
        if len(seqs) > len(self.slots):
            raise ModelArgumentError(f"this session holds {len(self.slots)} sequence slots; got {len(seqs)} sequences")
        toks = [[int(t) for t in s] for s in seqs]
        free = list(self.slots)
        entries = []
        for t in toks:
            k = max(free, key=lambda k: (_common_prefix(self._held[k], t), -free.index(k)))
            free.remove(k)
            self._held[k] = t
            entries.append((k, t))
        return self._owner._call(self, entries)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._owner._release(self)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


class BatchedLlama:
    """Run one `LlamaCppModel` for many sessions; see the module docstring.

    Args:
        model: the model (its ``n_seq`` slots are the sequences that may run at once).
        wait_s: how long the model thread waits for the other open sessions to queue
            their next call before it runs the batch it has.
        prefix_cache: keep the caches of closed sessions' slots for later prompts. The
            numbers llama.cpp gives depend a little on where a sequence's cells lie in
            the cache (its float16 attention sums), so with caches kept a request repeated
            with the same seed may sample differently; without them, a request repeated
            alone gives the same numbers (every prompt is evaluated again).
    """

    def __init__(self, model: LlamaCppModel, *, wait_s: float = 0.02, prefix_cache: bool = True) -> None:
        self.model = model
        self.wait_s = wait_s
        self.prefix_cache = prefix_cache
        self.stats = BatchStats()
        self._cv = threading.Condition()
        self._free = list(range(model.n_seq))  # least recently released first
        self._cached: dict[int, int] = {}  # free slot -> cells its cache may hold (an upper bound)
        self._cells_used = 0  # reserved by open sessions + held by free slots' caches
        self._sessions: set[Session] = set()
        self._pending: list[_Call] = []
        self._ops: list[tuple[str, int]] = []  # ("clear" | "measure", slot), in order, for the model thread
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="tether-llama-batch", daemon=True)
        self._thread.start()

    @property
    def n_slots(self) -> int:
        return self.model.n_seq

    @property
    def n_ctx(self) -> int:
        return int(self.model.n_ctx)

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)

    def open(self, n: int, cells: int, *, timeout: float | None = None,
             cancelled: threading.Event | None = None) -> Session:
        """A session with ``n`` slots and ``cells`` context cells; waits until both are free.

        Raises:
            ContextLengthError: ``cells`` exceed the whole context window.
            ModelArgumentError: ``n`` exceeds the model's slots.
            TimeoutError: ``timeout`` passed first; InterruptedError: ``cancelled`` was set.
        """
        if not 1 <= n <= self.n_slots:
            raise ModelArgumentError(f"a session needs 1 to {self.n_slots} slots; got {n}")
        if cells > self.n_ctx:
            raise ContextLengthError(self.n_ctx, cells)
        end = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                if self._closed:
                    raise ModelError("the batched model is closed")
                if len(self._free) >= n:
                    self._evict_for(cells)
                    if self._cells_used + cells <= self.n_ctx:
                        break
                if cancelled is not None and cancelled.is_set():
                    raise InterruptedError("cancelled while waiting for a sequence slot")
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("no sequence slot came free in time")
                self._cv.wait(0.05 if left is None else min(left, 0.05))
            # empty slots first, then the least recently released; a taken slot's cache is
            # cleared (the session may still copy a prefix from the caches of other slots)
            self._free.sort(key=lambda k: k in self._cached)
            slots = [self._free.pop(0) for _ in range(n)]
            for k in slots:
                if k in self._cached:
                    self._cells_used -= self._cached.pop(k)
                    self._ops.append(("clear", k))
            self._cells_used += cells
            s = Session(self, slots, cells)
            self._sessions.add(s)
            self._cv.notify_all()
            return s

    def close(self) -> None:
        """Stop the model thread (the model itself stays open)."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join(timeout=5)
        with self._cv:  # calls the thread will not serve: their callers must not wait forever
            pending, self._pending = self._pending, []
        for c in pending:
            c.error = ModelError("the batched model is closed")
            c.done.set()

    # -- internals -------------------------------------------------------------------

    def _evict_for(self, cells: int) -> None:
        """Clear free slots' caches (least recently released first) until ``cells`` fit."""
        for k in list(self._free):
            if self._cells_used + cells <= self.n_ctx:
                return
            if k in self._cached:
                self._cells_used -= self._cached.pop(k)
                self._ops.append(("clear", k))

    def _call(self, session: Session, entries: list[tuple[int, list[int]]]) -> NDArray[np.float32]:
        if session.closed:
            raise ModelError("this model session is closed")
        entries = [(slot, check_tokens(toks, self.model.n_vocab, self.n_ctx))
                   for slot, toks in entries]
        call = _Call(entries, session)
        with self._cv:
            if self._closed:
                raise ModelError("the batched model is closed")
            self._pending.append(call)
            self._cv.notify_all()
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def _release(self, session: Session) -> None:
        """Give the session's slots back; their caches stay, counted at the session's share
        of cells until the model thread measures them."""
        with self._cv:
            self._sessions.discard(session)
            if not self.prefix_cache:
                self._ops.extend(("clear", k) for k in session.slots)
                self._cells_used -= session.cells
                self._free.extend(session.slots)
                self._cv.notify_all()
                return
            share = session.cells // len(session.slots)
            for k in session.slots:
                self._cached[k] = share
                self._ops.append(("measure", k))
            self._cells_used -= session.cells - share * len(session.slots)
            self._free.extend(session.slots)
            self._cv.notify_all()

    def _take(self) -> tuple[list[_Call], list[tuple[str, int]]] | None:
        """Wait for work; return the calls of one batch and the slot operations before it."""
        with self._cv:
            while not self._pending and not self._ops:
                if self._closed:
                    return None
                self._cv.wait()
            if self._pending:  # let the other open sessions queue their step too
                end = time.monotonic() + self.wait_s
                while (len({c.session for c in self._pending}) < len(self._sessions)
                       and not self._closed):
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
            calls, ops = self._pending, self._ops
            self._pending, self._ops = [], []
            return calls, ops

    def _loop(self) -> None:
        m = self.model
        while True:
            work = self._take()
            if work is None:
                return
            calls, ops = work
            for op, k in ops:
                if op == "clear":
                    m.clear_slot(k)
                    continue
                with self._cv:  # measure: the cache of a slot that is still free
                    if k in self._cached:
                        held = m.slot_length(k)
                        self._cells_used += held - self._cached[k]
                        self._cached[k] = held
                        self._cv.notify_all()
            if calls:
                self._run(calls)

    def _run(self, calls: list[_Call]) -> None:
        entries = [e for c in calls for e in c.entries]
        try:
            out, evaluated = self.model.eval_slots(entries)
        except BaseException as exc:  # noqa: BLE001 -- handed to every caller of this batch
            for c in calls:
                c.error = exc
                c.done.set()
            return
        self.stats.batches += 1
        self.stats.rows += len(entries)
        self.stats.evaluated_tokens += sum(evaluated)
        self.stats.max_rows = max(self.stats.max_rows, len(entries))
        i = 0
        for c in calls:
            k = len(c.entries)
            c.result = out[i : i + k]
            c.session.costs.model_calls += 1
            c.session.costs.evaluated_tokens += sum(evaluated[i : i + k])
            i += k
            c.done.set()
