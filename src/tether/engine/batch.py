"""``compute_masks(matchers, out2d)``: the masks of a batch of sequences in one call.

One pass over the rows on the calling thread sorts them by what their mask needs:

* a row whose state's mask is in its constraint's cache (``CompiledConstraint.
  stored_mask``), or a finished row (after EOS: nothing allowed), becomes a line of a
  spec that the numba kernel ``_kernels.fill_rows`` writes without the GIL (a copy of a
  dense mask, or zero + the stored non-zero words), in pieces taken by the calling
  thread and, when the batch is large enough, by pool workers;
* a row whose mask is not cached is a walk (``walk.Walk``): started on the calling
  thread (the slices, the depth search), then in rounds every unfinished walk runs its
  kernel, on several threads, and the calling thread fills the table entry each one
  stopped at (the Python slow path); nothing writes a table while kernels run (the
  call holds the constraints' locks meanwhile, ``CompiledConstraint.lock``).

Each row gets what ``matchers[i].compute_mask(out2d[i])`` would write, row after row
(a cached mask is a pure function of its key; a row whose key an earlier row of the
batch computes is written from the cache afterwards). Workers only read stored arrays
the call holds referenced and write rows no other thread writes. The caller never
blocks on a worker that has not started (``_Work``): it takes the pieces left itself and
waits only for pieces in progress, before it returns or raises.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import walk as _walk
from tether.engine.matcher import Matcher
from tether.errors import ConstraintError, TetherError
from tether.limits import check

if TYPE_CHECKING:
    from tether.engine.compiled import StoredMask
    from tether.engine.walk import Walk

MAX_THREADS = 64
# a worker's share must be worth its wake-up (tens of microseconds on a busy machine): at
# least this many words written (1 MiB: 32 Gemma rows, about 30 us of copying)
MIN_WORDS_PER_THREAD = 1 << 18
# cached rows are handed out in pieces of about this many words (256 KiB: 8 Gemma rows)
CHUNK_WORDS = 1 << 16
# a round of walks whose kernels took less than this in all runs the next round on the
# calling thread alone: handing walks to workers and waiting for them costs tens of
# microseconds a round, and rows on first visits stop often (a batch of 32 on 2 threads,
# every state new: 1.8 times the one-thread time without this rule)
_ROUND_MIN_S = 200e-6

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0
_pool_lock = threading.Lock()


def default_threads() -> int:
    """Threads ``compute_masks`` uses unless told: half the cores this process may run
    on (the rest are the serving engine's), at least 1, at most 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(8, cores // 2))


def _workers(n: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``n`` workers (made again after a fork: a child
    inherits the pool object but not its threads)."""
    global _pool, _pool_size, _pool_pid
    with _pool_lock:
        pid = os.getpid()
        if _pool is None or _pool_size < n or _pool_pid != pid:
            if _pool is not None and _pool_pid == pid:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="tether-masks")
            _pool_size, _pool_pid = n, pid
        return _pool


def compute_masks(matchers: Sequence[Matcher], out2d: NDArray[np.uint32], *,
                  rows: Sequence[int] | NDArray[np.integer[Any]] | None = None,
                  threads: int | None = None) -> None:
    """Write each matcher's mask into a row of ``out2d`` (``uint32[rows, words]``).

    Args:
        matchers: Matchers of one vocabulary (of any constraints), at most
            ``Limits.max_batch``.
        out2d: a writeable, C-contiguous ``uint32`` array of the vocabulary's mask width.
        rows: the row of ``out2d`` for each matcher (distinct, in range); default row
            ``i`` for ``matchers[i]``. Rows not named are left alone.
        threads: threads running the kernels (the calling thread included); default
            ``default_threads()``. Cached rows are shared only past 1 MiB a thread
            (``MIN_WORDS_PER_THREAD``); the Python slow path runs on the calling thread.

    Each row gets exactly what ``matchers[i].compute_mask(row)`` writes, including its
    decode-time refusal (a limit reached: a zero row and ``matcher.error`` set).

    Raises:
        ConstraintError (a ValueError): ``matchers`` is not a sequence of Matchers of
            one vocabulary, ``out2d`` is not a writeable, C-contiguous ``uint32`` array of
            shape ``(>= len(matchers), words)`` (or holding every row of ``rows``),
            ``rows`` is not a list of distinct row indices, one per matcher, or
            ``threads`` is not an integer in ``1..MAX_THREADS``.
        LimitError: more matchers than ``Limits.max_batch``.
    """
    n = _check_matchers(matchers)
    if threads is None:
        threads = default_threads()
    elif type(threads) is not int or not 1 <= threads <= MAX_THREADS:
        raise ConstraintError(f"threads must be an integer from 1 to {MAX_THREADS}; got {threads!r}")
    if n == 0:
        return
    words = matchers[0].cc.n_words
    need = n if rows is None else 0
    _check_out(out2d, need, words)
    target = range(n) if rows is None else _check_rows(rows, n, out2d.shape[0])
    _fill(matchers, out2d, target, threads)


def _fill(matchers: Sequence[Matcher], out2d: NDArray[np.uint32], target: Sequence[int],
          threads: int) -> None:
    kernels = _walk._kernels or _walk.kernels()
    fill_rows = kernels.fill_rows
    held: list[StoredMask] = []  # keeps every stored array the kernel reads alive
    spec: list[int] = []  # per kernel row: out2d row, kind, count, idx address, words address
    misses: list[int] = []
    zero = (kernels.ROW_ZERO, 0, 0, 0)
    for j in range(len(target)):
        m = matchers[j]
        key = m.mask_key()
        if key is None:
            spec.append(target[j])
            spec.extend(zero)
            continue
        cc = m.cc
        hit = cc.stored_mask(key)
        if hit is None:
            misses.append(j)
            continue
        cc.stats["mask_hits"] += 1
        held.append(hit)
        spec.append(target[j])
        spec.extend(hit.spec())
    k = len(spec) // 5
    table = np.array(spec, np.int64).reshape(k, 5)
    step = max(1, CHUNK_WORDS // out2d.shape[1])  # rows per piece of work
    pieces = (k + step - 1) // step
    work = _Work(lambda i: fill_rows(out2d, table, i * step, min(k, (i + 1) * step)), pieces)
    helpers = min(threads, pieces, max(1, k * out2d.shape[1] // MIN_WORDS_PER_THREAD)) - 1
    try:
        if helpers > 0:
            work.offer(helpers)
        if misses:
            with ExitStack() as held_locks:  # in one order: no two calls wait on each other
                ccs = {id(matchers[j].cc): matchers[j].cc for j in misses}
                for ident in sorted(ccs):
                    held_locks.enter_context(ccs[ident].lock)
                _fill_misses(matchers, out2d, target, misses, threads)
    finally:
        work.wait()  # the caller's share, then the workers': before ``held`` goes


class _Work:
    """``n`` pieces of work (``run(i)``) taken one at a time by the calling thread and by
    any pool worker that gets to run. The caller never waits for a worker that has not
    started (on a busy machine a woken thread may wait milliseconds for a core): it
    takes the pieces left itself, then waits only for pieces already taken."""

    def __init__(self, run: Callable[[int], object], n: int) -> None:
        self.run, self.n = run, n
        self.next = 0
        self.busy = 0
        self.cond = threading.Condition()
        self.error: BaseException | None = None

    def offer(self, helpers: int) -> None:
        """Let up to ``helpers`` pool workers take pieces too."""
        pool = _workers(helpers)
        for _ in range(helpers):
            pool.submit(self.drain)

    def drain(self) -> None:
        while True:
            with self.cond:
                i = self.next
                if i >= self.n:
                    return
                self.next = i + 1
                self.busy += 1
            try:
                self.run(i)
            except BaseException as e:  # noqa: BLE001 -- handed to the caller by wait()
                self.error = self.error or e
            finally:
                with self.cond:
                    self.busy -= 1
                    if not self.busy:
                        self.cond.notify_all()

    def wait(self) -> None:
        """Take the pieces left, close the work (a worker that starts later finds none:
        nothing the caller frees is read after this returns), wait for the pieces
        workers took; raise a worker's error."""
        if self.error is None:
            self.drain()
        with self.cond:
            self.next = self.n
            while self.busy:
                self.cond.wait()
        if self.error is not None:
            raise self.error


def _fill_misses(matchers: Sequence[Matcher], out2d: NDArray[np.uint32], target: Sequence[int],
                 misses: list[int], threads: int) -> None:
    """The rows whose masks are not cached. Each row's walk is started (slices, Python)
    on this thread; then in rounds: every unfinished walk runs its kernel (on up to
    ``threads`` threads; no table is written meanwhile), and this thread fills the table
    entry each one stopped at (the Python slow path). Done walks are finished (EOS,
    cache) in row order. A row whose key an earlier row of the batch computes is written
    afterwards from the cache, as in the row-by-row loop."""
    jobs: list[tuple[Matcher, Walk]] = []
    first: dict[tuple[int, tuple[int, int, bool] | None], int] = {}
    later: list[int] = []
    for j in misses:
        m = matchers[j]
        ident = (id(m.cc), m.mask_key())
        if ident in first:
            later.append(j)
            continue
        first[ident] = j
        row = out2d[target[j]]
        try:
            jobs.append((m, m.start_mask(row)))
        except TetherError as e:
            _refuse(m, row, e)
    failed: set[int] = set()
    live = list(range(len(jobs)))
    share = threads  # the threads of the next round (see _ROUND_MIN_S)
    while live:
        for cc in {id(m.cc): m.cc for m, _ in (jobs[i] for i in live)}.values():
            cc.steps.sync()
        t0 = time.perf_counter()
        _advance([jobs[i][1] for i in live], share)
        spent = (time.perf_counter() - t0) * min(share, len(live))  # about the kernels' total
        share = threads if spent >= _ROUND_MIN_S else 1
        stopped = []
        for i in live:
            m, walk = jobs[i]
            if walk.p < 0:
                continue
            try:
                walk.fill()
                stopped.append(i)
            except TetherError as e:
                _refuse(m, walk.mask, e)
                failed.add(i)
        live = stopped
    for i, (m, walk) in enumerate(jobs):
        if i not in failed:
            try:
                m.finish_mask(walk)
            except TetherError as e:
                _refuse(m, walk.mask, e)
    for j in later:
        matchers[j].compute_mask(out2d[target[j]])


def _refuse(m: Matcher, row: NDArray[np.uint32], e: Exception) -> None:
    """What ``Matcher.compute_mask`` does on a limit reached: nothing allowed, the reason kept."""
    row.fill(0)
    m.error = str(e)


def _advance(walks: list[Walk], threads: int) -> None:
    """Run each walk's kernel once (``Walk.advance``), on up to ``threads`` threads."""
    n = min(threads, len(walks))
    if n <= 1:
        for w in walks:
            w.advance()
        return
    work = _Work(lambda i: walks[i].advance(), len(walks))
    work.offer(n - 1)
    work.wait()


def _check_matchers(matchers: Any) -> int:
    if not isinstance(matchers, Sequence) or isinstance(matchers, str | bytes):
        raise ConstraintError(f"matchers must be a list of Matcher; got {type(matchers).__name__}")
    n = len(matchers)
    check("max_batch", n, "compute_masks(matchers)")
    if n == 0:
        return 0
    first = matchers[0]
    if not isinstance(first, Matcher):
        raise ConstraintError(f"matchers[0] is a {type(first).__name__}, not a Matcher")
    vocab = first.cc.vocabulary
    for i in range(1, n):
        m = matchers[i]
        if not isinstance(m, Matcher):
            raise ConstraintError(f"matchers[{i}] is a {type(m).__name__}, not a Matcher")
        if m.cc.vocabulary is not vocab and (m.cc.vocabulary != vocab
                                             or m.cc.n_words != first.cc.n_words):
            raise ConstraintError(
                f"matchers[{i}] was compiled for another vocabulary ({m.cc.vocabulary!r}) "
                f"than matchers[0] ({vocab!r})"
            )
    return n


def _check_out(out2d: Any, n: int, words: int) -> None:
    if (isinstance(out2d, np.ndarray) and out2d.ndim == 2 and out2d.shape[0] >= n
            and out2d.shape[1] == words and out2d.dtype == np.uint32 and out2d.flags.carray):
        return
    if isinstance(out2d, np.ndarray):
        layout = "C-contiguous" if out2d.flags.c_contiguous else "non-contiguous"
        if not out2d.flags.writeable:
            layout = "read-only " + layout
        got = f"{layout} {out2d.dtype} of shape {tuple(out2d.shape)}"
    else:
        got = type(out2d).__name__
    raise ConstraintError(
        f"out2d must be a C-contiguous uint32 array of shape ({max(n, 1)}, {words}) (or more "
        f"rows); got {got}"
    )


def _check_rows(rows: Any, n: int, height: int) -> list[int]:
    """``rows`` as a list of ``n`` distinct ints in ``0..height-1``, or ConstraintError."""
    if not isinstance(rows, list | tuple | np.ndarray):
        raise ConstraintError(f"rows must be a list of row indices; got {type(rows).__name__}")
    if isinstance(rows, np.ndarray):
        if rows.ndim != 1 or rows.dtype.kind not in "iu":
            raise ConstraintError(f"rows must be a 1-D integer array; got {rows.dtype} of shape {rows.shape}")
        out = [int(r) for r in rows]
    else:
        out = []
        for r in rows:
            if isinstance(r, bool | np.bool_) or not isinstance(r, int | np.integer):
                raise ConstraintError(f"rows must hold integers; got {type(r).__name__}")
            out.append(int(r))
    if len(out) != n:
        raise ConstraintError(f"rows must name one row per matcher: {n} matchers, {len(out)} rows")
    bad = [r for r in out if not 0 <= r < height]
    if bad:
        shown = str(bad[0]) if bad[0].bit_length() <= 64 else "a huge integer"
        raise ConstraintError(f"rows[...] = {shown} is outside out2d's {height} rows")
    if len(set(out)) != n:
        raise ConstraintError("rows must be distinct (two matchers would write one row)")
    return out
