"""A vLLM (v1 engine) logits processor: per-request tether constraints.

::

    from vllm import LLM, SamplingParams

    llm = LLM(model="path/to/hf-model", logits_processors=["tether.integrations.vllm:TetherLogitsProcessor"])
    params = SamplingParams(max_tokens=64, temperature=0,
                            extra_args={"tether": {"json": {"type": "object", ...}}})
    out = llm.generate(["A person as JSON: "], params)

A request is constrained when its ``SamplingParams.extra_args["tether"]`` holds one of
``{"json": schema}``, ``{"regex": pattern}``, ``{"choice": [...]}``, ``{"grammar": gbnf}``
(``"syntax": "lark"`` for Lark); `validate_params` lowers it when the request arrives, so
a bad constraint is refused with a ValueError (HTTP 400 when served). Other requests of
the batch are left alone. Row bookkeeping (added, removed, moved, swapped requests;
output tokens read from the engine's live lists) is `requests.BatchConstraints`.

The vocabulary comes from the model's tokenizer (`Vocabulary.from_hf`, logits width of
the model), EOS from the tokenizer and the model config; compiled constraints are cached
by the engine (grammar content + vocabulary fingerprint).

vLLM ≥ 0.32 on a GPU runs "model runner v2", whose custom logits-processor interface
differs; set ``VLLM_USE_V2_MODEL_RUNNER=0`` there to use this one (the CPU backend uses
the v1 runner).
"""

from __future__ import annotations

from typing import Any

from tether.engine import CompiledConstraint
from tether.engine import compile as compile_constraint
from tether.errors import require
from tether.integrations.requests import BatchConstraints, request_output
from tether.program.outputs import output_spec
from tether.tokens import Vocabulary
from tether.tokens.bitmask import apply_mask

torch = require("torch", "vllm")
require("vllm", "vllm")
from vllm.v1.sample.logits_processor import (  # noqa: E402
    BatchUpdate,
    LogitsProcessor,
    MoveDirectionality,
)

KEY = "tether"


def _spec(params: Any) -> Any:
    extra = getattr(params, "extra_args", None) or {}
    return extra.get(KEY)


def _vocabulary(vllm_config: Any) -> Vocabulary:
    transformers = require("transformers", "vllm")
    mc = vllm_config.model_config
    tok = transformers.AutoTokenizer.from_pretrained(
        mc.tokenizer, revision=getattr(mc, "tokenizer_revision", None),
        trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))
    eos: set[int] = set()
    if isinstance(tok.eos_token_id, int):
        eos.add(tok.eos_token_id)
    cfg_eos = getattr(mc.hf_config, "eos_token_id", None)
    eos |= {cfg_eos} if isinstance(cfg_eos, int) else set(cfg_eos or ())
    return Vocabulary.from_hf(tok, eos_ids=sorted(eos), n_logits=int(mc.get_vocab_size()))


class TetherLogitsProcessor(LogitsProcessor):  # type: ignore[misc]
    """Masks the logits of requests that carry ``extra_args["tether"]`` (module docstring)."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        spec = _spec(sampling_params)
        if spec is not None:
            request_output(spec)  # raises a ValueError (a tether error) if malformed

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        self.device = device
        self.vocabulary = _vocabulary(vllm_config)
        self.batch = BatchConstraints(self.vocabulary, self._compile)

    def _compile(self, output: Any) -> CompiledConstraint:
        spec = output_spec(output)
        assert spec.grammar is not None
        return compile_constraint(spec.grammar, self.vocabulary)

    def is_argmax_invariant(self) -> bool:
        return False

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is not None:
            for index in batch_update.removed:
                self.batch.remove(index)
            for index, params, _prompt, output_tokens in batch_update.added:
                self.batch.add(index, _spec(params), output_tokens)
            for src, dst, direction in batch_update.moved:
                self.batch.move(src, dst, direction == MoveDirectionality.SWAP)
        self.batch.sync()

    def apply(self, logits: Any) -> Any:
        if not self.batch.rows:
            return logits
        rows, masks = self.batch.masks()
        index = torch.tensor(rows, dtype=torch.long, device=logits.device)
        logits[index] = apply_mask(logits[index], masks)
        return logits


__all__ = ["TetherLogitsProcessor"]
