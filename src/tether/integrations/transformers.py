"""A ``transformers.LogitsProcessor`` that constrains ``model.generate`` with tether.

::

    from transformers import LogitsProcessorList
    from tether.integrations.transformers import LogitsProcessor

    p = LogitsProcessor({"type": "array", "items": {"type": "integer"}}, tokenizer)
    out = model.generate(**tokenizer(["List:", "Numbers:"], return_tensors="pt", padding=True),
                         logits_processor=LogitsProcessorList([p]), max_new_tokens=40)

Greedy search, sampling, beam search (``num_beams > 1``) and batches of left-padded
prompts all work, because the processor keys its state by the tokens of each row, not
by the row's index: at every call the output part of each row of ``input_ids`` (the
columns after the prompt) names its state. A state seen at the previous step with one
token less is the row's parent: the row continues it (consumed in place when one row
continues it, a copy per row when beams fork); rows with equal outputs share one state;
a row whose parent is unknown is replayed from the start. So rows may be reordered,
dropped or forked between calls, as beam search does.

EOS (the tokenizer's, or ``eos_token_id``) is allowed exactly where the output is
complete. After a row's EOS, transformers fills the row with padding: such a row
allows only EOS and the pad token (an all ``-inf`` row would make sampling fail).
A row holding a token the constraint refuses (beam search can carry a ``-inf``
candidate when fewer tokens are allowed than it keeps) allows only EOS.

A new generation is detected when the calls stop extending the previous ones (other
row count, other prompt columns, or not one column more); ``reset()`` forces it.

The vocabulary comes from the tokenizer (`Vocabulary.from_hf`: byte-level BPE,
SentencePiece with byte fallback, added tokens) and is cached per tokenizer; compiled
constraints are cached by the engine (grammar content + vocabulary fingerprint).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine import Matcher
from tether.errors import ConstraintError, require
from tether.integrations._common import compile_output
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, apply_mask, ids_to_mask

torch = require("torch", "transformers")
transformers = require("transformers", "transformers")

_VOCABS: weakref.WeakKeyDictionary[Any, dict[tuple[int, ...] | None, Vocabulary]] = (
    weakref.WeakKeyDictionary())


def hf_vocabulary(tokenizer: Any, eos_ids: Sequence[int] | None = None) -> Vocabulary:
    """The vocabulary of a transformers tokenizer (cached per tokenizer and EOS set).

    Raises:
        VocabularyError: a tokenizer whose tokens have no exact bytes (WordPiece...).
        ConstraintError: ``tokenizer`` is not a transformers fast tokenizer.
    """
    if not hasattr(tokenizer, "backend_tokenizer"):
        raise ConstraintError(
            f"expected a transformers fast tokenizer (with backend_tokenizer), not {type(tokenizer).__name__}")
    key = None if eos_ids is None else tuple(sorted(set(eos_ids)))
    try:
        per_tokenizer = _VOCABS.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        per_tokenizer = {}
    vocab = per_tokenizer.get(key)
    if vocab is None:
        vocab = per_tokenizer[key] = Vocabulary.from_hf(tokenizer, eos_ids=key)
    return vocab


@dataclass
class _Row:
    """The state of one distinct output: a live matcher, or finished (EOS consumed), or
    dead (a token the constraint refuses)."""

    matcher: Matcher | None
    done: bool = False
    error: str | None = None


# transformers' base class, from the module `require` imported (typed Any: a library
# loaded at run time)
_HFLogitsProcessor: Any = transformers.LogitsProcessor


class LogitsProcessor(_HFLogitsProcessor):  # type: ignore[misc]  # subclassing Any (above)
    """Constrain ``model.generate`` to ``output`` (see the module docstring).

    Args:
        output: a JSON Schema dict, a Pydantic model, a Python type, ``tether.regex(...)``,
            a list of choice strings or a Grammar.
        tokenizer: the model's transformers (fast) tokenizer.
        eos_token_id: the token(s) that end generation; default the tokenizer's
            ``eos_token_id``. Pass ``model.generation_config.eos_token_id`` when it differs.

    Attributes:
        errors: per row of the last call, why the row cannot continue (None if it can).

    Raises:
        ConstraintError, SchemaError, RegexError, GrammarError, LimitError: ``output``
            cannot be compiled; VocabularyError: the tokenizer has no exact token bytes.
    """

    def __init__(self, output: Any, tokenizer: Any, *, eos_token_id: int | Sequence[int] | None = None) -> None:
        eos = [eos_token_id] if isinstance(eos_token_id, int) else eos_token_id
        if eos is not None and not all(isinstance(t, int) and not isinstance(t, bool) for t in eos):
            raise ConstraintError(f"eos_token_id must be an int or a list of ints, not {eos_token_id!r}")
        self.vocabulary = hf_vocabulary(tokenizer, eos)
        if not self.vocabulary.eos_ids:
            raise ConstraintError("the tokenizer has no EOS token: pass eos_token_id=")
        self.spec, self.compiled = compile_output(output, self.vocabulary)
        pad = getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id: int | None = pad if isinstance(pad, int) else None
        size = self.vocabulary.size
        self._eos_mask = ids_to_mask(self.vocabulary.eos_ids, size)
        pads = [self.pad_token_id] if self.pad_token_id is not None and 0 <= self.pad_token_id < size else []
        finish = {*self.vocabulary.eos_ids, *pads}
        self._done_mask = ids_to_mask(finish, size)
        self.errors: list[str | None] = []
        self.reset()

    def reset(self) -> None:
        """Forget the current generation: the next call starts a new one."""
        self._prompt: NDArray[np.int64] | None = None
        self._width = 0  # columns of input_ids at the last call
        self._states: dict[tuple[int, ...], _Row] = {}
        self.errors = []

    # -- per call -----------------------------------------------------------------------
    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Mask ``scores`` (``[rows, vocab]``, changed in place and returned)."""
        ids = input_ids.detach().cpu().numpy().astype(np.int64, copy=False)
        rows, width = ids.shape
        if scores.shape[-1] < self.vocabulary.size:
            raise ConstraintError(f"scores have {scores.shape[-1]} columns but the tokenizer has "
                                  f"{self.vocabulary.size} tokens: wrong tokenizer for this model?")
        prompt = self._prompt
        if (prompt is None or prompt.shape[0] != rows or width != self._width + 1
                or not np.array_equal(ids[:, : prompt.shape[1]], prompt)):
            prompt = self._prompt = ids.copy()
            self._states = {(): _Row(self.compiled.matcher())}
        self._width = width
        outputs = [tuple(int(t) for t in row) for row in ids[:, prompt.shape[1]:]]
        self._states = self._advance(outputs)
        masks = allocate_mask(self.vocabulary.size, batch=rows)
        computed: dict[tuple[int, ...], int] = {}
        self.errors = []
        for r, key in enumerate(outputs):
            state = self._states[key]
            self.errors.append(state.error)
            if key in computed:
                masks[r] = masks[computed[key]]
            elif state.error is not None:
                masks[r] = self._eos_mask
            elif state.done:
                masks[r] = self._done_mask
            else:
                assert state.matcher is not None
                state.matcher.compute_mask(masks[r])
                computed[key] = r
        return apply_mask(scores, masks)

    def _advance(self, outputs: list[tuple[int, ...]]) -> dict[tuple[int, ...], _Row]:
        """The state of each distinct output, derived from the previous call's states."""
        prev = self._states
        wanted = dict.fromkeys(outputs)
        children: dict[tuple[int, ...], int] = {}
        for key in wanted:
            if key[:-1] in prev and key not in prev:
                children[key[:-1]] = children.get(key[:-1], 0) + 1
        new: dict[tuple[int, ...], _Row] = {}
        for key in wanted:
            if key in prev:  # unchanged (first call: the empty output)
                new[key] = prev[key]
                continue
            parent = prev.get(key[:-1])
            if parent is None:  # unknown history: replay the output from the start
                row = _Row(self.compiled.matcher())
                for t in key:
                    row = self._step(row, t, shared=False)
                new[key] = row
                continue
            children[key[:-1]] -= 1
            new[key] = self._step(parent, key[-1], shared=children[key[:-1]] > 0)
        return new

    def _step(self, row: _Row, token: int, *, shared: bool) -> _Row:
        """``row`` after ``token`` (``shared``: ``row`` has other children: copy it)."""
        if row.done or row.error is not None:
            return row  # padding after EOS, or a dead row: nothing changes
        assert row.matcher is not None
        if token in self.vocabulary.eos_ids:
            if row.matcher.is_accepting():
                return _Row(None, done=True)
            return _Row(None, error=f"EOS token {token} before the output is complete")
        m = row.matcher.copy() if shared else row.matcher
        if not m.consume(token):
            return _Row(None, error=m.error or f"token {token} refused")
        return _Row(m)


__all__ = ["LogitsProcessor", "hf_vocabulary"]
