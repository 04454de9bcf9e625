"""`TransformersModel`: a causal LM run with Hugging Face transformers (torch), with
selective logits (seed 001).

* ``logits(tokens)`` keeps a KV cache (``DynamicCache``) of the longest common prefix
  with the previous call and runs only the new tokens; the forced run of fast-forward
  is one forward pass.
* ``logits_rows(tokens, ids)`` runs the same forward pass up to the final hidden state
  ``h`` and computes only ``W_u[ids] @ h`` — the rows of the unembedding for the allowed
  tokens — instead of the full ``W_u @ h`` over the vocabulary. The decoder uses it when
  ``len(ids) <= selective_threshold``; the threshold is *measured* at load time
  (`calibrate_selective`): the largest allowed-set size for which gather + small matmul
  beats the full matmul on this machine. Values equal the full logits' up to float
  rounding of the same dot products (``max_selective_error`` checks it).
* The same Gemma 3 270M GGUF as the embedded model loads through transformers' GGUF
  reader (`TransformersModel.embedded()`; converted once to a cache directory, which
  takes minutes: progress is printed on a terminal).

Raises `MissingDependencyError` naming ``tether[transformers]`` when torch or
transformers is missing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from tether.errors import (
    MissingDependencyError,
    ModelArgumentError,
    ModelError,
    TetherError,
    require,
)
from tether.models.base import (
    N_THREADS,
    Costs,
    IntOption,
    ModelIdioms,
    OptionRule,
    check_options,
    check_tokens,
)

if TYPE_CHECKING:
    from tether.tokens import Vocabulary

EMBEDDED_HF_DIR = Path.home() / ".cache" / "tether" / "gemma3-270m-hf"


def _say(msg: str) -> None:
    if sys.stderr.isatty():
        print(f"tether: {msg}", file=sys.stderr, flush=True)


class TransformersModel(ModelIdioms):
    """A steerable transformers model; see the module docstring.

    Args:
        path: a model directory or hub name (or the directory of ``gguf_file``).
        gguf_file: load this GGUF file in ``path`` through transformers' GGUF reader.
        device: torch device ("cpu", "cuda", ...); default CUDA when available.
        dtype: torch dtype name; default float32 on CPU, bfloat16 on CUDA.
        selective_threshold: allowed-set size up to which selective logits are used;
            None measures it (`calibrate_selective`), 0 turns them off.
        n_threads: torch CPU threads (process-wide); default as for llama.cpp.
        n_ctx: context window; default (and maximum) the model's
            ``max_position_embeddings``.

    Raises:
        MissingDependencyError: torch or transformers is missing.
        ModelArgumentError: an option of the wrong type or range (unknown options are
            refused by `load`).
        ModelError: the model cannot be loaded (the library's exception is in the message).
    """

    def __init__(self, path: str | Path, *, gguf_file: str | None = None, device: str | None = None,
                 dtype: str | None = None, selective_threshold: int | None = None,
                 model: Any = None, tokenizer: Any = None, tokenize_with: Any = None,
                 n_threads: int | None = None, n_ctx: int | None = None) -> None:
        check_options(dict(path=path, gguf_file=gguf_file, device=device, dtype=dtype,
                           selective_threshold=selective_threshold, n_threads=n_threads,
                           n_ctx=n_ctx), TRANSFORMERS_OPTIONS | {"path": (str, Path)},
                      "transformers")
        torch = require("torch", "transformers")
        transformers = require("transformers", "transformers")
        self._torch = torch
        if dtype is not None and not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ModelArgumentError(f"option dtype={dtype!r} is not a torch dtype name "
                                     "(float32, bfloat16, float16...)", argument="dtype")
        if device is not None:
            try:
                torch.device(device)
            except (RuntimeError, ValueError, TypeError):
                raise ModelArgumentError(f"option device={device!r} is not a torch device",
                                         argument="device") from None
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cpu":
            # torch's process-wide CPU threads: as for llama.cpp, one thread on machines
            # with two cores or fewer (a multi-token GEMM with 2 threads stalls for seconds
            # when anything else runs there)
            from tether.models.llama_cpp import default_threads

            torch.set_num_threads(n_threads or default_threads())
        tdtype = getattr(torch, dtype) if dtype else (torch.float32 if self.device == "cpu" else torch.bfloat16)
        kw: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        t0 = time.perf_counter()
        try:
            self.tokenizer = tokenizer or transformers.AutoTokenizer.from_pretrained(str(path), **kw)
            self.hf = model or transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=tdtype, **kw)
            self.hf.to(self.device).eval()
        except ImportError as exc:  # e.g. gguf or accelerate missing for a GGUF file
            raise MissingDependencyError(str(exc.name or exc), "transformers") from None
        except TetherError:
            raise
        except Exception as exc:  # noqa: BLE001 -- any library failure is a load failure
            raise ModelError(f"transformers could not load {path}: {type(exc).__name__}: {exc}") from None
        _say(f"loaded {path} with transformers ({time.perf_counter() - t0:.1f} s)")
        self.name = Path(str(path)).name if gguf_file is None else Path(gguf_file).stem
        self.costs = Costs()
        from tether.tokens import Vocabulary

        n_logits = int(self.hf.get_output_embeddings().weight.shape[0])
        # ``tokenize_with``: another backend of the same vocabulary whose tokenizer is the
        # reference (the GGUF's, through llama.cpp); its Vocabulary is used as well
        self._tokenize_with = tokenize_with
        self.vocabulary: Vocabulary
        if tokenize_with is not None:
            self.vocabulary = tokenize_with.vocabulary
            if self.vocabulary.n_logits != n_logits:
                raise ModelError(f"{path}: {n_logits} logits but the tokenizer's vocabulary has "
                                 f"{self.vocabulary.n_logits}")
        else:
            self.vocabulary = Vocabulary.from_hf(self.tokenizer, n_logits=max(n_logits, len(self.tokenizer)))
        self._base = self.hf.base_model
        self._head = self.hf.get_output_embeddings()
        self._softcap = getattr(getattr(self.hf, "config", None), "final_logit_softcapping", None)
        self._cache: Any = None
        self._cached: list[int] = []
        self._h: Any = None  # final hidden state after self._cached
        self.selective_threshold = (self.calibrate_selective() if selective_threshold is None
                                    else int(selective_threshold))
        n_pos = getattr(getattr(self.hf, "config", None), "max_position_embeddings", None)
        trained = int(n_pos) if isinstance(n_pos, int) and n_pos > 0 else None
        if n_ctx is not None and trained is not None and n_ctx > trained:
            raise ModelArgumentError(f"option n_ctx={n_ctx} exceeds the model's "
                                     f"max_position_embeddings ({trained})", argument="n_ctx")
        #: the context window (None: the model's config does not say)
        self.n_ctx: int | None = n_ctx if n_ctx is not None else trained
        self._n_embed = int(self.hf.get_input_embeddings().weight.shape[0])

    @classmethod
    def embedded(cls, **options: Any) -> TransformersModel:
        """The embedded Gemma 3 270M through transformers (converted from the GGUF once,
        `embedded_hf_dir`).

        Tokenization is llama.cpp's on the same GGUF when llama-cpp-python is installed:
        transformers' conversion of this GGUF's tokenizer splits text into characters,
        which would give the network token sequences it never saw in training.
        """
        from tether.models.llama_cpp import embedded_model_path

        gguf = embedded_model_path()
        if "tokenize_with" not in options:
            try:
                from tether.models.llama_cpp import LlamaCppModel

                options["tokenize_with"] = LlamaCppModel(gguf, n_ctx=256)
            except ImportError:
                pass
        return cls(embedded_hf_dir(), **options)

    # --- Model protocol ------------------------------------------------------------------
    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self.vocabulary.eos_ids

    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = False) -> list[int]:
        if self._tokenize_with is not None:
            return list(self._tokenize_with.tokenize(text, add_bos=add_bos, special=special))
        ids = list(self.tokenizer(text, add_special_tokens=False, split_special_tokens=not special)["input_ids"])
        bos = self.tokenizer.bos_token_id
        return ([bos] if add_bos and bos is not None else []) + ids

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return self.vocabulary.decode(tokens)

    @property
    def chat_template(self) -> str | None:
        """The tokenizer's Jinja chat template (`tether.models.base.ChatTemplated`), or None."""
        t = getattr(self.tokenizer, "chat_template", None)
        return t if isinstance(t, str) else None

    def apply_chat_template(self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """The tokenizer's own ``apply_chat_template`` (`tether.models.base.ChatFormatter`):
        the prompt text, special tokens as text. Its errors are the caller's to report."""
        text = self.tokenizer.apply_chat_template(list(messages), tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)
        if not isinstance(text, str):
            raise ModelError(f"the chat template of {self.name!r} returned {type(text).__name__}, not text")
        return text

    def reset(self) -> None:
        self._cache, self._cached, self._h = None, [], None

    def _hidden(self, tokens: Sequence[int]) -> Any:
        """Final hidden state after ``tokens`` (KV cache of the common prefix reused)."""
        torch = self._torch
        toks = check_tokens(tokens, min(self._n_embed, self.vocabulary.n_logits), self.n_ctx)
        if self._h is not None and toks == self._cached:
            return self._h
        keep = 0
        limit = min(len(self._cached), len(toks) - 1)
        while keep < limit and self._cached[keep] == toks[keep]:
            keep += 1
        if self._cache is not None and keep < len(self._cached):
            try:
                self._cache.crop(keep - len(self._cached))  # negative: drop that many tokens
            except Exception:  # noqa: BLE001 -- a cache kind that cannot crop: start over
                self._cache, keep = None, 0
        if self._cache is None:
            from transformers import DynamicCache

            self._cache, keep = DynamicCache(config=self.hf.config), 0
        new = torch.tensor([toks[keep:]], dtype=torch.long, device=self.device)
        try:
            with torch.inference_mode():
                out = self._base(input_ids=new, past_key_values=self._cache, use_cache=True)
        except Exception as exc:  # noqa: BLE001 -- torch's errors (out of memory...) as ModelError
            self.reset()
            raise ModelError(f"the forward pass failed: {type(exc).__name__}: {exc}") from None
        self._cache = out.past_key_values
        self._cached = toks
        self._h = out.last_hidden_state[0, -1]
        self.costs.model_calls += 1
        self.costs.evaluated_tokens += len(toks) - keep
        return self._h

    def _finish(self, z: Any) -> NDArray[np.float32]:
        if self._softcap:
            z = self._torch.tanh(z / self._softcap) * self._softcap
        out: NDArray[np.float32] = z.float().cpu().numpy()
        return out

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]:
        """Full logits ``float32[n_logits]`` after ``tokens``."""
        h = self._hidden(tokens)
        with self._torch.inference_mode():
            return self._finish(self._torch.mv(self._head.weight, h))

    def logits_rows(self, tokens: Sequence[int], ids: NDArray[np.int64]) -> NDArray[np.float32]:
        """Logits of ``ids`` only (selective multiplication): ``W_u[ids] @ h``."""
        h = self._hidden(tokens)
        torch = self._torch
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if len(ids) and (ids.min() < 0 or ids.max() >= self._head.weight.shape[0]):
            raise ModelArgumentError(f"logits_rows(): ids must lie in [0, {self._head.weight.shape[0]})",
                                     argument="ids")
        with torch.inference_mode():
            idx = torch.from_numpy(ids).to(self.device)
            return self._finish(torch.mv(self._head.weight.index_select(0, idx), h))

    def logits_batch(self, seqs: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        return np.stack([self.logits(s).copy() for s in seqs])

    # --- selective logits: switch point and accuracy -------------------------------------
    def calibrate_selective(self, sizes: Sequence[int] = (16, 64, 256, 1024, 4096, 16384, 65536),
                            repeats: int = 5) -> int:
        """Largest allowed-set size (of ``sizes``) for which selective logits are faster
        than the full unembedding here. Cost: a few full matmuls (well under a second)."""
        torch = self._torch
        w = self._head.weight
        h = torch.randn(w.shape[1], dtype=w.dtype, device=self.device)
        rng = np.random.default_rng(0)

        def best(fn: Any) -> float:
            ts = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                if self.device != "cpu":
                    torch.cuda.synchronize()
                ts.append(time.perf_counter() - t0)
            return min(ts)

        with torch.inference_mode():
            full = best(lambda: torch.mv(w, h).float().cpu())
            chosen = 0
            self.calibration: dict[int, float] = {0: full}
            for k in sizes:
                if k >= w.shape[0]:
                    break
                idx = torch.from_numpy(np.sort(rng.choice(w.shape[0], k, replace=False))).to(self.device)
                t = best(lambda idx=idx: torch.mv(w.index_select(0, idx), h).float().cpu())
                self.calibration[k] = t
                if t < 0.8 * full:  # a margin: selective must clearly win
                    chosen = k
                else:
                    break
        return chosen

    def max_selective_error(self, tokens: Sequence[int], ids: NDArray[np.int64]) -> float:
        """max |logits_rows - logits[ids]| (float rounding only; expected ~1e-5)."""
        return float(np.max(np.abs(self.logits_rows(tokens, ids) - self.logits(tokens)[ids])))

    def __repr__(self) -> str:
        return f"TransformersModel({self.name}, device={self.device}, selective<= {self.selective_threshold})"


TRANSFORMERS_OPTIONS: dict[str, OptionRule] = {
    "gguf_file": str, "device": str, "dtype": str, "n_threads": N_THREADS,
    "selective_threshold": IntOption(0, 1 << 31), "n_ctx": IntOption(1, 1 << 24),
    "model": object, "tokenizer": object, "tokenize_with": object,
}


def embedded_hf_dir() -> Path:
    """A Hugging Face folder holding the embedded Gemma 3 270M (float32 weights and the
    tokenizer), converted from the GGUF on first use (about a minute; 1.1 GB in
    ``~/.cache/tether/gemma3-270m-hf``), so that later loads take seconds.

    Raises:
        MissingDependencyError: transformers, torch, gguf or the model package is missing.
        ModelError: the conversion failed.
    """
    if (EMBEDDED_HF_DIR / "config.json").exists() and (EMBEDDED_HF_DIR / "tokenizer_config.json").exists():
        return EMBEDDED_HF_DIR
    torch = require("torch", "transformers")
    transformers = require("transformers", "transformers")
    require("gguf", "transformers")
    from tether.models.llama_cpp import embedded_model_path

    gguf = embedded_model_path()
    _say("converting the embedded GGUF for transformers (once; about a minute)")
    tmp = EMBEDDED_HF_DIR.with_name(EMBEDDED_HF_DIR.name + ".partial")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        hf = transformers.AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                               dtype=torch.float32)
        # the weights are already dequantized to float32: drop the GGUF quantizer marker,
        # which transformers refuses to serialize
        hf.hf_quantizer = None
        if hasattr(hf.config, "quantization_config"):
            del hf.config.quantization_config
        tmp.mkdir(parents=True, exist_ok=True)
        tok.save_pretrained(tmp)
        hf.save_pretrained(tmp)
        if EMBEDDED_HF_DIR.exists():
            import shutil

            shutil.rmtree(EMBEDDED_HF_DIR)
        tmp.rename(EMBEDDED_HF_DIR)
    except ImportError as exc:
        raise MissingDependencyError(str(exc.name or exc), "transformers") from None
    except Exception as exc:  # noqa: BLE001 -- any library failure is a conversion failure
        raise ModelError(f"converting {gguf} for transformers failed: {type(exc).__name__}: {exc}") from None
    return EMBEDDED_HF_DIR


def load(spec: str, **options: Any) -> TransformersModel:
    """`tether.models.load_model` entry: a directory or hub name; "gemma3-270m" for the
    embedded model; ``path/file.gguf`` through transformers' GGUF reader.

    Raises ModelArgumentError for unknown options (naming them)."""
    check_options(options, TRANSFORMERS_OPTIONS, "transformers")
    if spec in ("embedded", "gemma3-270m"):
        return TransformersModel.embedded(**options)
    p = Path(spec)
    if p.suffix == ".gguf":
        return TransformersModel(p.parent, gguf_file=p.name, **options)
    return TransformersModel(spec, **options)
