"""An SGLang custom logit processor: per-request tether constraints.

Start the server with ``--enable-custom-logit-processor`` (tether installed where the
server runs), then send the processor and each request's constraint::

    import requests
    from tether.integrations.sglang import TetherLogitProcessor, custom_params

    requests.post("http://127.0.0.1:30000/generate", json={
        "text": "A person as JSON: ",
        "custom_logit_processor": TetherLogitProcessor.to_str(),
        "sampling_params": {"temperature": 0, "max_new_tokens": 64,
                            "custom_params": custom_params({"json": {"type": "object"}})},
    })

The constraint is what vLLM's ``extra_args["tether"]`` holds (`requests.request_output`):
``{"json": schema}``, ``{"regex": pattern}``, ``{"choice": [...]}``, ``{"grammar": gbnf}``.
`custom_params` validates it on the client, so a bad one fails before it is sent.

How SGLang runs it (its documented interface): ``to_str()`` names the class (a pickle by
reference: the server imports ``tether.integrations.sglang``); the scheduler makes a fresh
processor object for each batch it builds and calls it with the logits rows of the
requests that named it and one ``custom_params`` dict per row, into which SGLang puts the
request itself as ``"__req__"`` (``rid``, ``output_ids``, ``tokenizer``, ``finished()``).
Because the objects do not live across batches, the per-request states live in one
module-level `RequestStates`, keyed by request id:

* a state is created on a request's first call (its constraint compiled, or refused);
* every call first consumes the request's new output tokens (``output_ids`` past those
  consumed), so the state never depends on which batch the request was in;
* a finished request's state is dropped; one not seen for ``stale_calls`` calls (aborted,
  retracted) is dropped too, and recreated by replaying ``output_ids`` if it returns;
* a bad constraint, a refused token or a request whose ``output_ids`` no longer extend
  what was consumed never unmasks a row: the row allows EOS only and the reason is kept
  in `RequestStates.errors` (and logged). Nothing raises inside the scheduler except a
  call without ``"__req__"`` (an SGLang this module does not fit).

Not supported, refused per row (EOS only, logged): SGLang's beam search (several rows of
one request in one call: their tokens are not told apart). Not verified (no GPU here):
SGLang's overlap scheduler, where ``output_ids`` might lag the step being sampled.

SGLang installs only with CUDA; without it this module imports against a local stand-in
of ``CustomLogitProcessor`` (same ``to_str`` format), so clients and tests need no SGLang.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tether.engine import Matcher, compute_masks
from tether.errors import ConstraintError, TetherError, require
from tether.integrations._common import compile_output
from tether.integrations.requests import request_output
from tether.limits import current
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, apply_mask, ids_to_mask

KEY = "tether"
REQ = "__req__"
log = logging.getLogger(__name__)

try:  # SGLang's base class where SGLang is installed (the server)
    from sglang.srt.sampling.custom_logit_processor import (
        CustomLogitProcessor,
    )
except ImportError:  # clients and tests: a stand-in with the same wire format

    class CustomLogitProcessor:  # type: ignore[no-redef]
        """Stand-in for SGLang's base class (SGLang is not installed here)."""

        def __call__(self, logits: Any, custom_param_list: Any = None) -> Any:
            raise NotImplementedError

        @classmethod
        def to_str(cls) -> str:
            """``{"callable": hex of the class pickled by reference}``, as SGLang reads it."""
            return json.dumps({"callable": pickle.dumps(cls).hex()})

        @classmethod
        def from_str(cls, json_str: str) -> Any:
            return pickle.loads(bytes.fromhex(json.loads(json_str)["callable"]))()


class SglangRequest(Protocol):
    """What tether reads of SGLang's ``Req`` (``custom_params["__req__"]``)."""

    rid: str
    output_ids: Sequence[int]
    tokenizer: Any

    def finished(self) -> bool: ...


def custom_params(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The ``sampling_params["custom_params"]`` of a request constrained by ``spec``.

    Raises:
        ConstraintError, SchemaError, RegexError, GrammarError, LimitError (ValueErrors):
            ``spec`` is malformed (`requests.request_output`).
    """
    request_output(spec)
    return {KEY: dict(spec)}


def hf_tokenizer_vocabulary(req: SglangRequest, n_logits: int) -> Vocabulary:
    """The vocabulary of the request's tokenizer, ``n_logits`` wide (cached per tokenizer)."""
    tokenizer = req.tokenizer
    if tokenizer is None:
        raise ConstraintError("the SGLang request has no tokenizer (--skip-tokenizer-init is "
                              "not supported by tether's logit processor)")
    key = (id(tokenizer), n_logits)
    vocab = _TOKENIZER_VOCABS.get(key)
    if vocab is None or vocab[0] is not tokenizer:
        eos = tokenizer.eos_token_id
        vocab = (tokenizer, Vocabulary.from_hf(
            tokenizer, eos_ids=[eos] if isinstance(eos, int) else None, n_logits=n_logits))
        _TOKENIZER_VOCABS[key] = vocab
    return vocab[1]


_TOKENIZER_VOCABS: dict[tuple[int, int], tuple[Any, Vocabulary]] = {}


@dataclass
class _State:
    spec: Any  # the request's constraint object (kept: identity is the fast check)
    spec_key: str
    vocabulary: Vocabulary
    matcher: Matcher | None  # None: the constraint was refused (error says why)
    consumed: int = 0
    done: bool = False
    error: str | None = None
    last_seen: int = 0


def _spec_key(spec: Any) -> str:
    try:
        return json.dumps(spec, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(type(spec))


class RequestStates:
    """Matchers of the constrained requests an SGLang server runs, keyed by request id.

    Args:
        vocabulary: ``(request, logits width) -> Vocabulary`` (default: the request's
            tokenizer, `hf_tokenizer_vocabulary`).
        stale_calls: a request absent from this many calls is forgotten (replayed from its
            ``output_ids`` if it comes back).
    """

    def __init__(self, vocabulary: Callable[[SglangRequest, int], Vocabulary] = hf_tokenizer_vocabulary,
                 stale_calls: int = 256) -> None:
        self._vocabulary = vocabulary
        self.stale_calls = stale_calls
        self.states: dict[str, _State] = {}
        self.errors: dict[str, str] = {}  # rid -> why its rows allow EOS only (last few)
        self.calls = 0

    def _new_state(self, spec: Any, key: str, req: SglangRequest, width: int) -> _State:
        vocab = self._vocabulary(req, width)
        try:
            _spec, cc = compile_output(request_output(spec), vocab)
        except TetherError as e:
            return _State(spec, key, vocab, None, error=f"constraint refused: {e}")
        return _State(spec, key, vocab, cc.matcher())

    def _advance(self, state: _State, output_ids: Sequence[int]) -> None:
        if len(output_ids) < state.consumed:
            state.error = state.error or "the request's output_ids shrank below the tokens consumed"
        m = state.matcher
        eos = state.vocabulary.eos_ids
        while state.consumed < len(output_ids) and not state.done and state.error is None and m:
            t = int(output_ids[state.consumed])
            state.consumed += 1
            if t in eos and m.is_accepting():
                state.done = True
            elif not m.consume(t):
                state.error = m.error or f"token {t} refused"

    def apply(self, logits: Any, custom_param_list: Sequence[Any] | None) -> Any:
        """Mask the rows of ``logits`` whose params carry ``"tether"``; return ``logits``."""
        self.calls += 1
        if not custom_param_list:
            self._evict()
            return logits
        width = int(logits.shape[-1])
        rows: list[tuple[int, _State]] = []
        seen: dict[str, int] = {}
        finished: list[str] = []
        for i, params in enumerate(custom_param_list):
            if not isinstance(params, Mapping) or KEY not in params:
                continue
            req = params.get(REQ)
            if req is None:
                raise ConstraintError(
                    "SGLang passed no request ('__req__') in custom_params: this SGLang "
                    "version does not fit tether's logit processor")
            rid = str(req.rid)
            spec = params[KEY]
            state = self.states.get(rid)
            key = "" if state is not None and state.spec is spec else _spec_key(spec)
            output_ids = req.output_ids
            if (state is None or (state.spec is not spec and state.spec_key != key)
                    or state.vocabulary.size != width or len(output_ids) < state.consumed):
                state = self.states[rid] = self._new_state(spec, key or _spec_key(spec), req, width)
            state.last_seen = self.calls
            self._advance(state, output_ids)
            if rid in seen:  # several rows of one request (beam search): refused
                state.error = "several rows of one request in one call (beam search) are not supported"
            seen[rid] = i
            if state.error is not None and self.errors.get(rid) != state.error:
                self.errors[rid] = state.error
                log.warning("tether: request %s allows EOS only: %s", rid, state.error)
            rows.append((i, state))
            if req.finished():
                finished.append(rid)
        if rows:
            self._mask(logits, rows)
        for rid in finished:
            self.states.pop(rid, None)
        self._evict()
        return logits

    def _mask(self, logits: Any, rows: list[tuple[int, _State]]) -> None:
        vocab = rows[0][1].vocabulary
        masks = allocate_mask(vocab.size, batch=len(rows))
        live = [k for k, (_, s) in enumerate(rows) if s.matcher and not s.done and s.error is None]
        # every live row has a matcher (``live`` kept only those): the filter drops nothing
        matchers = [m for k in live if (m := rows[k][1].matcher) is not None]
        out = allocate_mask(vocab.size, batch=max(len(live), 1))
        step = current().max_batch
        for a in range(0, len(live), step):  # one engine call per batch (of at most max_batch)
            compute_masks(matchers[a:a + step], out[a:a + step])
        for j, k in enumerate(live):
            masks[k] = out[j]
        live_set = set(live)
        for k, (_, s) in enumerate(rows):
            if k not in live_set:
                masks[k] = ids_to_mask(s.vocabulary.eos_ids, vocab.size)
        torch = require("torch", "sglang")
        index = torch.tensor([i for i, _ in rows], dtype=torch.long, device=logits.device)
        logits[index] = apply_mask(logits[index], masks)

    def _evict(self) -> None:
        old = [rid for rid, s in self.states.items() if self.calls - s.last_seen > self.stale_calls]
        for rid in old:
            del self.states[rid]
        cap = 4 * current().max_batch
        if len(self.states) > cap:  # bound memory whatever the traffic: oldest seen first
            for rid, _ in sorted(self.states.items(), key=lambda kv: kv[1].last_seen)[: len(self.states) - cap]:
                del self.states[rid]
        if len(self.errors) > cap:
            for rid in list(self.errors)[: len(self.errors) - cap]:
                del self.errors[rid]


STATES = RequestStates()
"""The states every `TetherLogitProcessor` object of this process shares."""


class TetherLogitProcessor(CustomLogitProcessor):  # type: ignore[misc]
    """Masks the rows whose ``custom_params`` carry ``"tether"`` (module docstring)."""

    def __call__(self, logits: Any, custom_param_list: Any = None) -> Any:
        return STATES.apply(logits, custom_param_list)


__all__ = ["KEY", "RequestStates", "STATES", "SglangRequest", "TetherLogitProcessor",
           "custom_params", "hf_tokenizer_vocabulary"]
