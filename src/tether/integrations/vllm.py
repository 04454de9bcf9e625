"""vLLM logits processors: per-request tether constraints, for both of vLLM's model runners.

::

    from vllm import LLM, SamplingParams

    llm = LLM(model="path/to/hf-model", logits_processors=["tether.integrations.vllm:TetherLogitsProcessor"])
    params = SamplingParams(max_tokens=64, temperature=0,
                            extra_args={"tether": {"json": {"type": "object", ...}}})
    out = llm.generate(["A person as JSON: "], params)

A request is constrained when its ``SamplingParams.extra_args["tether"]`` holds one of
``{"json": schema}``, ``{"regex": pattern}``, ``{"choice": [...]}``, ``{"grammar": gbnf}``
(``"syntax": "lark"`` for Lark), or that object as JSON text (what ``vllm_xargs`` can
carry over HTTP: its values are strings, numbers or lists); `validate_params` lowers it when the request arrives, so
a bad constraint is refused with a ValueError (HTTP 400 when served). Other requests of
the batch are left alone.

vLLM has two custom-processor interfaces, one per model runner:

* ``TetherLogitsProcessor`` — the v1 runner (``vllm.v1.sample.logits_processor``: the
  CPU backend, and GPUs with ``VLLM_USE_V2_MODEL_RUNNER=0``). vLLM reports batch edits
  (added, removed, moved, swapped rows); `requests.BatchConstraints` follows them and
  reads each request's new tokens from the live output list vLLM hands over.
  ``update_state`` runs before the step's forward pass: it starts the step's masks on a
  background thread (`BatchConstraints.prefetch`), so they are computed while the model
  runs, and ``apply`` takes them. vLLM refuses custom processors under speculative
  decoding on this runner.
* ``TetherLogitsProcessorV2`` — "model runner v2", the default on GPUs since vLLM 0.32
  (``vllm.v1.worker.gpu.sample.logits_processor``). State is per request *slot*
  (`SlotConstraints`): ``add_request`` (re)initializes a slot; ``apply`` gets logits
  rows that are reordered every step, one per draft token under speculative decoding,
  and the committed tokens only on the device: each step copies five small per-row
  vectors to the host in one transfer and reads a slot's token history only when more
  than one token was committed since the last step (accepted drafts, a resumed
  request). Draft rows are masked with the drafts before them consumed (then rolled
  back), so constrained requests stay correct under speculative decoding.

Each runner's loader refuses the other's class, so name the one your runner uses.

The vocabulary comes from the model's tokenizer (`Vocabulary.from_hf`, logits width of
the model), EOS from the tokenizer and the model config; compiled constraints are cached
by the engine (grammar content + vocabulary fingerprint). The masks of a step are one
`tether.engine.compute_masks` call; the packed bitmask goes to the device once and is
expanded there (`tether.tokens.bitmask.apply_mask`).

This module imports without vLLM (`SlotConstraints` is plain Python); the processor
classes need it and raise MissingDependencyError naming the ``vllm`` extra otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import CompiledConstraint, Matcher, compute_masks
from tether.engine import compile as compile_constraint
from tether.errors import MissingDependencyError, TetherError, require
from tether.integrations.requests import BatchConstraints, json_text, request_output
from tether.limits import current
from tether.program.outputs import output_spec
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, apply_mask, ids_to_mask

KEY = "tether"


def _spec(params: Any) -> Any:
    """The request's constraint: ``extra_args["tether"]``, a mapping or its JSON text (over
    HTTP, ``vllm_xargs`` values must be strings, numbers or lists of them)."""
    extra = getattr(params, "extra_args", None) or {}
    spec = extra.get(KEY)
    if isinstance(spec, str):
        spec = json_text(spec, "extra_args['tether']", "a JSON object")
    return spec


def _validate(sampling_params: Any) -> None:
    spec = _spec(sampling_params)
    if spec is not None:
        request_output(spec)  # raises a ValueError (a tether error) if malformed


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


def _compiler(vocabulary: Vocabulary) -> Callable[[Any], CompiledConstraint]:
    def compile_output(output: Any) -> CompiledConstraint:
        spec = output_spec(output)
        assert spec.grammar is not None
        return compile_constraint(spec.grammar, vocabulary)
    return compile_output


# ---- model runner v2: per-slot state ------------------------------------------------------
@dataclass
class _Slot:
    cc: CompiledConstraint | None  # None: the constraint was refused (error says why)
    matcher: Matcher | None
    consumed: int = 0  # output tokens consumed
    done: bool = False
    error: str | None = None


class SlotConstraints:
    """Matchers of the constrained requests of vLLM's model runner v2, by request slot.

    Args:
        vocabulary: the model's vocabulary (``n_logits`` = the logits' width).
        compile_output: ``output -> CompiledConstraint`` (cached by the engine).
    """

    def __init__(self, vocabulary: Vocabulary,
                 compile_output: Callable[[Any], CompiledConstraint]) -> None:
        self.vocabulary = vocabulary
        self._compile = compile_output
        self.slots: dict[int, _Slot] = {}
        self._eos_mask = ids_to_mask(vocabulary.eos_ids, vocabulary.size)

    def add(self, slot: int, spec: Any) -> bool:
        """A request enters ``slot`` (whatever it held is dropped); True if constrained.
        A constraint that fails to compile here (it passed `validate_params`) is kept as
        an error: the request's rows allow EOS only."""
        self.slots.pop(slot, None)
        if spec is None:
            return False
        try:
            cc = self._compile(request_output(spec))
        except TetherError as e:
            self.slots[slot] = _Slot(None, None, error=f"constraint refused: {e}")
            return True
        self.slots[slot] = _Slot(cc, cc.matcher())
        return True

    def any_in(self, slots: NDArray[Any]) -> bool:
        """Whether any of ``slots`` (this step's requests, on the host) is constrained."""
        return bool(self.slots) and any(int(s) in self.slots for s in slots)

    def _advance(self, st: _Slot, tokens: Sequence[int]) -> None:
        eos = self.vocabulary.eos_ids
        m = st.matcher
        for t in tokens:
            if st.done or st.error is not None or m is None:
                return
            st.consumed += 1
            if t in eos and m.is_accepting():
                st.done = True
            elif not m.consume(int(t)):
                st.error = m.error or f"token {t} refused"

    def step(self, row_slot: NDArray[Any], local_pos: NDArray[Any], input_ids: NDArray[Any],
             fed_index: NDArray[Any], n_output: NDArray[Any],
             read: Callable[[int, int, int], Sequence[int]]) -> tuple[list[int], NDArray[np.uint32]]:
        """The masks of one step's constrained logits rows.

        Per row (host arrays): its request slot, its offset among its request's rows
        (draft position), the token fed at it, that token's index in the output
        (negative: a prompt token) and the request's committed output length.
        ``read(slot, start, stop)`` returns committed output tokens ``start:stop`` of a
        slot (a device read; called only when the fed token does not extend the state).

        Returns the constrained rows and their masks (``uint32[rows, words]``).
        """
        groups: dict[int, list[int]] = {}
        for r in range(len(row_slot)):
            s = int(row_slot[r])
            if s in self.slots:
                groups.setdefault(s, []).append(r)
        rows: list[int] = []
        masks: list[NDArray[np.uint32] | None] = []  # None: a live row, computed below
        matchers: list[Matcher] = []
        where: list[int] = []
        for s, rs in groups.items():
            st = self.slots[s]
            rs.sort(key=lambda r: int(local_pos[r]))
            first = rs[0]
            n_out = int(n_output[first])
            if n_out < st.consumed and st.cc is not None:  # history rewritten: replay
                st.matcher, st.consumed, st.done, st.error = st.cc.matcher(), 0, False, None
            if n_out > st.consumed:
                if int(local_pos[first]) == 0 and int(fed_index[first]) == st.consumed == n_out - 1:
                    self._advance(st, [int(input_ids[first])])
                else:
                    self._advance(st, [int(t) for t in read(s, st.consumed, n_out)])
            m = st.matcher
            live = m is not None and not st.done and st.error is None
            drafted = 0
            for r in rs:
                if int(local_pos[r]) > 0 and live:
                    assert m is not None
                    t = int(input_ids[r])  # the draft this row follows
                    if t in self.vocabulary.eos_ids or not m.consume(t):
                        m.error = None
                        live = False  # a draft the constraint ends or refuses: EOS only
                    else:
                        drafted += 1
                rows.append(r)
                if live:
                    assert m is not None
                    where.append(len(masks))
                    matchers.append(m.copy() if len(rs) > 1 else m)  # drafts move m on
                    masks.append(None)
                else:
                    masks.append(self._eos_mask)
            if drafted:
                assert m is not None
                m.rollback(drafted)
        out = allocate_mask(self.vocabulary.size, batch=max(len(rows), 1))[: len(rows)]
        step = current().max_batch
        for a in range(0, len(matchers), step):  # one engine call per max_batch rows
            compute_masks(matchers[a:a + step], out, rows=where[a:a + step])
        for k, mk in enumerate(masks):
            if mk is not None:
                out[k] = mk
        return rows, out


# ---- the vLLM classes -----------------------------------------------------------------------
def _v1_class() -> type:
    torch = require("torch", "vllm")
    require("vllm", "vllm")
    from vllm.v1.sample.logits_processor import (
        BatchUpdate,
        LogitsProcessor,
        MoveDirectionality,
    )

    class TetherLogitsProcessor(LogitsProcessor):  # type: ignore[misc]  # vLLM is untyped: its base class is Any
        """Masks the logits of requests that carry ``extra_args["tether"]`` (v1 model runner)."""

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            _validate(sampling_params)

        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
            self.device = device
            self.vocabulary = _vocabulary(vllm_config)
            self.batch = BatchConstraints(self.vocabulary, _compiler(self.vocabulary))

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
            # the batch of this step is settled, its forward pass not run yet: compute
            # the masks meanwhile (`apply` takes them, or recomputes if a token came after)
            self.batch.prefetch()

        def apply(self, logits: Any) -> Any:
            if not self.batch.rows:
                return logits
            rows, masks = self.batch.masks()
            _mask_rows(torch, logits, rows, masks)
            return logits

    return _published(TetherLogitsProcessor, "TetherLogitsProcessor")


def _v2_class() -> type:
    torch = require("torch", "vllm")
    require("vllm", "vllm")
    try:
        from vllm.v1.worker.gpu.sample.logits_processor.interface import (
            LogitsContext,
            LogitsProcessor,
            LogitsProcRequestState,
        )
    except ImportError as exc:  # a vLLM before model runner v2's processor interface
        raise MissingDependencyError("vllm>=0.32 (model runner v2 logits processors)", "vllm") from exc

    class TetherLogitsProcessorV2(LogitsProcessor):  # type: ignore[misc]  # vLLM is untyped: its base class is Any
        """Masks the logits rows of requests that carry ``extra_args["tether"]`` (model runner v2)."""

        @classmethod
        def validate_params(cls, sampling_params: Any) -> None:
            _validate(sampling_params)

        def __init__(self, vllm_config: Any, req_states: LogitsProcRequestState) -> None:
            self.req_states = req_states
            self.vocabulary = _vocabulary(vllm_config)
            self.slots = SlotConstraints(self.vocabulary, _compiler(self.vocabulary))

        def add_request(self, req_idx: int, sampling_params: Any) -> bool:
            return self.slots.add(int(req_idx), _spec(sampling_params))

        def apply(self, logits: Any, ctx: LogitsContext) -> Any:
            if not self.slots.any_in(ctx.idx_mapping_np):
                return logits
            rs = self.req_states
            slot_t = ctx.expanded_idx_mapping.long()
            host = torch.stack([  # one device -> host transfer per step
                slot_t, ctx.expanded_local_pos.long(), ctx.input_ids.long(), ctx.pos.long(),
                rs.total_len.gpu[slot_t].long()]).cpu().numpy()
            prompt = rs.prompt_len.np[host[0]].astype(np.int64)

            def read(slot: int, start: int, stop: int) -> Sequence[int]:
                p = int(rs.prompt_len.np[slot])
                return rs.all_token_ids.gpu[slot, p + start:p + stop].tolist()  # type: ignore[no-any-return]

            rows, masks = self.slots.step(host[0], host[1], host[2], host[3] - prompt,
                                          host[4] - prompt, read)
            if rows:
                _mask_rows(torch, logits, rows, masks)
            return logits

    return _published(TetherLogitsProcessorV2, "TetherLogitsProcessorV2")


def _mask_rows(torch: Any, logits: Any, rows: list[int], masks: NDArray[np.uint32]) -> None:
    """Mask the rows ``rows`` of the logits tensor in place (``masks``: one row each)."""
    index = torch.tensor(rows, dtype=torch.long, device=logits.device)
    logits[index] = apply_mask(logits[index], masks)


def _published(cls: type, name: str) -> type:
    """``cls`` named as this module's attribute ``name`` (built on access by the module's
    ``__getattr__``), so that it is pickled by reference."""
    cls.__module__ = __name__
    cls.__qualname__ = name
    return cls


_CLASSES: dict[str, Callable[[], type]] = {
    "TetherLogitsProcessor": _v1_class, "TetherLogitsProcessorV2": _v2_class}


def __getattr__(name: str) -> Any:
    """The processor classes are built on first access (they subclass vLLM's)."""
    make = _CLASSES.get(name)
    if make is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    cls = make()
    globals()[name] = cls
    return cls


__all__ = ["KEY", "SlotConstraints", "TetherLogitsProcessor", "TetherLogitsProcessorV2"]  # noqa: F822
