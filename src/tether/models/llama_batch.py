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
Closing a session clears its slots, so the cells of the context window are reserved
exactly: a session asks for ``n * (prompt + max_tokens)`` cells when it opens and waits
until they and its slots are free.

This module reads the model's slot bookkeeping (``_slots``, ``_trim``, ``_decode``): it
is the one other owner of a `LlamaCppModel`, and the model must not be used directly
while a `BatchedLlama` runs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from tether.errors import ContextLengthError, ModelError
from tether.models.base import Costs, ModelArgumentError, check_tokens
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
        return self.logits_batch([tokens])[0]

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
    """

    def __init__(self, model: LlamaCppModel, *, wait_s: float = 0.005) -> None:
        self.model = model
        self.wait_s = wait_s
        self.stats = BatchStats()
        self._cv = threading.Condition()
        self._free = list(range(model.n_seq))
        self._cells_used = 0
        self._sessions: set[Session] = set()
        self._pending: list[_Call] = []
        self._release_q: list[list[int]] = []
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
            while len(self._free) < n or self._cells_used + cells > self.n_ctx:
                if self._closed:
                    raise ModelError("the batched model is closed")
                if cancelled is not None and cancelled.is_set():
                    raise InterruptedError("cancelled while waiting for a sequence slot")
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError("no sequence slot came free in time")
                self._cv.wait(0.05 if left is None else min(left, 0.05))
            slots = [self._free.pop(0) for _ in range(n)]
            self._cells_used += cells
            s = Session(self, slots, cells)
            self._sessions.add(s)
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
        with self._cv:
            self._sessions.discard(session)
            self._cells_used -= session.cells  # the slots are cleared before the next batch runs
            self._release_q.append(session.slots)
            self._cv.notify_all()

    def _take(self) -> tuple[list[_Call], list[list[int]]] | None:
        """Wait for work; return the calls of one batch and the slots to clear."""
        with self._cv:
            while not self._pending and not self._release_q:
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
            calls, released = self._pending, self._release_q
            self._pending, self._release_q = [], []
            return calls, released

    def _loop(self) -> None:
        m = self.model
        while True:
            work = self._take()
            if work is None:
                return
            calls, released = work
            for slots in released:
                for k in slots:
                    m._trim(k, 0)
            if released:
                with self._cv:
                    for slots in released:
                        self._free.extend(slots)
                    self._cv.notify_all()
            if calls:
                self._run(calls)

    def _run(self, calls: list[_Call]) -> None:
        m = self.model
        plan: list[tuple[int, list[int], int]] = []
        try:
            for c in calls:
                for slot, toks in c.entries:
                    keep = min(_common_prefix(m._slots[slot], toks), len(toks) - 1)
                    plan.append((slot, toks, m._trim(slot, keep)))
            rows = m._decode(plan)
            m._last_logits = None
            out = []
            for row in rows:
                ptr = m._lib.llama_get_logits_ith(m._ctx, row)
                out.append(np.array(np.ctypeslib.as_array(ptr, shape=(m.n_vocab,)), dtype=np.float32))
        except BaseException as exc:  # noqa: BLE001 -- handed to every caller of this batch
            for c in calls:
                c.error = exc
                c.done.set()
            return
        evaluated = sum(len(t) - keep for _, t, keep in plan)
        m.costs.model_calls += 1
        m.costs.evaluated_tokens += evaluated
        self.stats.batches += 1
        self.stats.rows += len(plan)
        self.stats.evaluated_tokens += evaluated
        self.stats.max_rows = max(self.stats.max_rows, len(plan))
        i = 0
        for c in calls:
            k = len(c.entries)
            c.result = np.stack(out[i : i + k])
            c.session.costs.model_calls += 1
            c.session.costs.evaluated_tokens += sum(len(t) - keep for _, t, keep in plan[i : i + k])
            i += k
            c.done.set()
