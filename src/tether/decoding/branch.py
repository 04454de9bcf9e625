"""One sequence being decoded (`Branch`, its result `Decoded`) and the per-step pieces the
decode loop (`loop.py`) and beam search (`beam.py`) share: budget closing (when:
`near_budget`, `completion_overflows`, `must_close`; how: `close_branch`), scores with the context-window
check (`scores_or_length`), ``stop_outside`` (`eos_position`, `end_with_outside`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tether.decoding.guide import Guide
from tether.decoding.logits import batch_scores, scores
from tether.decoding.options import Settings
from tether.decoding.stops import StopScanner
from tether.decoding.tokenize import tokens_for_bytes
from tether.errors import ContextLengthError


@dataclass
class Decoded:
    """One decoded sequence.

    Attributes:
        tokens: generated token ids (forced ones included; EOS excluded).
        text: output bytes (healed prompt bytes removed, cut before a stop text).
        logprob: sum of log-probabilities of the sampled tokens under the constrained
            distribution (forced tokens count 0: they had probability 1).
        finish_reason: "stop" (EOS, constraint complete, or stop text), "length", "error".
        n_forced: tokens appended by fast-forward or budget closing, without sampling.
        stop_text: the stop text that ended the output, if any.
        error: why the sequence could not continue (finish_reason "error").
    """

    tokens: list[int] = field(default_factory=list)
    text: bytes = b""
    logprob: float = 0.0
    finish_reason: str = "length"
    n_forced: int = 0
    stop_text: bytes | None = None
    error: str | None = None
    complete: bool = False


class Branch:
    """One sequence being decoded: its guide (matcher + healed text), tokens, score,
    stop scanner, and how it ended."""

    __slots__ = ("prompt", "guide", "tokens", "logprob", "scanner", "skip", "finish", "n_forced", "rng",
                 "error", "closing_len", "origin", "cut_complete")

    def __init__(self, prompt: list[int], guide: Guide, scanner: StopScanner, rng: np.random.Generator | None,
                 origin: Any | None = None) -> None:
        self.prompt, self.guide, self.scanner, self.rng = prompt, guide, scanner, rng
        self.origin = origin  # an untouched copy of the matcher: re-checks a cut output
        self.cut_complete: bool | None = None
        self.tokens: list[int] = []
        self.logprob = 0.0
        self.skip = len(guide.pending)
        self.finish: str | None = None
        self.n_forced = 0
        self.error: str | None = None
        self.closing_len = -1  # tokens of the shortest completion when last measured; -1: never

    def fork(self) -> Branch:
        """An independent copy (the guide and stop scanner copied; no random generator:
        beam search does not sample)."""
        c = Branch.__new__(Branch)
        c.prompt, c.guide, c.scanner, c.rng = self.prompt, self.guide.copy(), self.scanner.copy(), None
        c.tokens, c.logprob, c.skip = list(self.tokens), self.logprob, self.skip
        c.finish, c.n_forced, c.error = self.finish, self.n_forced, self.error
        c.closing_len, c.origin, c.cut_complete = self.closing_len, self.origin, self.cut_complete
        return c

    def seq(self) -> list[int]:
        return self.prompt + self.tokens

    def push(self, vocab: Any, token: int, forced: bool) -> None:
        if not self.guide.consume(token):
            self.finish, self.error = "error", self.guide.error
            return
        if token in vocab.eos_ids:
            self.finish = "stop"
            return
        self.tokens.append(token)
        self.n_forced += forced
        b = vocab.tokens[token]
        if self.skip:
            cut = min(self.skip, len(b))
            b, self.skip = b[cut:], self.skip - cut
        if b and self.scanner.feed(b):
            self.finish = "stop"
            self.cut_complete = self._cut_is_complete()
        elif self.guide.is_finished():
            self.finish = "stop"

    def _cut_is_complete(self) -> bool:
        """The output cut before a stop text, matched again from the start of the constraint."""
        if self.origin is None:
            return self.guide.free or self.guide.matcher is None
        m = self.origin.copy()
        try:
            return bool(m.consume_bytes(bytes(self.scanner.text)) and m.is_accepting())
        except AttributeError:  # a matcher without byte input: cannot tell, so not complete
            return False

    def is_complete(self) -> bool:
        """The output as returned is complete under the constraint."""
        if self.finish == "error":
            return False
        return self.cut_complete if self.cut_complete is not None else self.guide.is_accepting()

    def result(self) -> Decoded:
        complete = self.is_complete()
        return Decoded(
            tokens=list(self.tokens),
            text=bytes(self.scanner.text),
            logprob=self.logprob,
            finish_reason=self.finish or "length",
            n_forced=self.n_forced,
            stop_text=self.scanner.hit,
            error=self.error,
            complete=complete,
        )


# The shortest completion is measured (a search in the engine) only while the budget left is
# within this many tokens of the last measured completion length: far from the budget, one
# token cannot make the closing text that much longer in practice, and measuring at every
# step would cost more than the model call.
CLOSE_SLACK = 16


def completion_tokens(model: Any, guide: Guide) -> list[int] | None:
    """Canonical tokens of the shortest completion; None if the engine finds none."""
    try:
        return tokens_for_bytes(model, guide.shortest_completion())
    except Exception:  # noqa: BLE001 -- decode time never raises (ConstraintError: no completion found)
        return None


def near_budget(b: Branch, left: int, s: Settings) -> bool:
    """Budget closing applies to ``b`` (``left`` tokens left after its next one) and its
    shortest completion was last measured within `CLOSE_SLACK` of that, or never: it must
    be measured again (`completion_overflows`)."""
    return s.close_on_budget and not b.guide.free and (
        b.closing_len < 0 or left <= b.closing_len + CLOSE_SLACK + s.reserve)


def completion_overflows(model: Any, b: Branch, guide: Guide, left: int, s: Settings) -> bool:
    """The shortest completion of ``guide`` (``b``'s guide after its next token) does not
    fit in ``left`` tokens (in a free region, `region_end`, ``s.reserve`` more are kept);
    its length is recorded in ``b.closing_len``."""
    toks = completion_tokens(model, guide)
    if toks is None:
        return False
    b.closing_len = len(toks)
    kept = s.reserve if s.reserve and region_end(guide, s.triggers) >= 0 else 0  # still in the free region
    return len(toks) + kept > left


def must_close(model: Any, b: Branch, s: Settings) -> bool:
    """``b``'s shortest completion no longer fits the budget (measured only near it)."""
    left = s.max_tokens - len(b.tokens)
    return b.finish is None and near_budget(b, left, s) and completion_overflows(model, b, b.guide, left, s)


def region_end(guide: Guide, close_at: Sequence[bytes]) -> int:
    """Where the first trigger of ``close_at`` ends in the shortest completion (the free
    region still open); -1 when none is in it, or the engine finds no completion."""
    if not close_at:
        return -1
    try:
        text = guide.shortest_completion()
    except Exception:  # noqa: BLE001 -- decode time never raises
        return -1
    ends = [i + len(t) for t in close_at if (i := text.find(t)) >= 0]
    return min(ends) if ends else -1


def close_branch(model: Any, b: Branch, max_tokens: int, close_at: Sequence[bytes] = ()) -> None:
    """Append the shortest completion (budget closing) if it fits ``max_tokens``; else the
    output ends here, incomplete, with "length" (the budget cannot hold a complete one).
    In a free region (`region_end`), append it only up to the end of the trigger and let
    the sequence go on."""
    toks = completion_tokens(model, b.guide)
    if toks is None or len(b.tokens) + len(toks) > max_tokens:
        b.finish = "length"
        return
    end = region_end(b.guide, close_at)
    if end > 0:
        closing = b.guide.shortest_completion()
        head = tokens_for_bytes(model, closing[:end])
        rest = tokens_for_bytes(model, closing[end:])
        if len(b.tokens) + len(head) + len(rest) <= max_tokens and len(b.tokens) + len(head) < max_tokens:
            for t in head:
                b.push(model.vocabulary, t, True)
                if b.finish is not None:
                    return
            b.closing_len = -1  # measure again in the constrained part
            return
    for t in toks:
        b.push(model.vocabulary, t, True)
        if b.finish == "error":
            return
    if b.finish is None:
        b.finish = "length"


def eos_position(vocab: Any, ids: Any) -> int:
    """Index in ``ids`` of the first EOS id, -1 if none is allowed."""
    for e in vocab.eos_ids:
        k = int(np.searchsorted(ids, e))
        if k < len(ids) and int(ids[k]) == e:
            return k
    return -1


def end_with_outside(vocab: Any, full: Any, ids: Any) -> Any:
    """Logits of ``ids`` from the masked full row ``full``, with the mass of every token
    outside ``ids`` added to the (first allowed) EOS: ``log(p(EOS) + p(forbidden))``."""
    vals = np.array(full[ids], dtype=np.float32)
    outside = np.array(full, dtype=np.float64, copy=True)
    outside[ids] = -np.inf
    top = float(np.max(outside)) if outside.size else -np.inf
    if np.isfinite(top):
        mass = top + float(np.log(np.sum(np.exp(outside - top))))
        k = eos_position(vocab, ids)
        vals[k] = np.float32(np.logaddexp(float(vals[k]), mass))
    return vals


def scores_or_length(
    model: Any, pairs: list[tuple[Branch, Any]], *, selective: bool
) -> tuple[list[tuple[Branch, Any]], list[Any]]:
    """Scores for each (branch, allowed ids); a branch the context window cannot hold any
    more ends with ``"length"`` (and is left out). A branch that has generated nothing
    yet holds only the prompt: its ContextLengthError is raised."""
    try:
        return pairs, batch_scores(model, [b.seq() for b, _ in pairs], [ids for _, ids in pairs], selective=selective)
    except ContextLengthError:
        if len(pairs) == 1 and pairs[0][0].tokens:
            pairs[0][0].finish = "length"
            return [], []
        if len(pairs) == 1:
            raise
    kept, vals = [], []
    for b, ids in pairs:  # one by one: find the sequences that no longer fit
        try:
            vals.append(scores(model, b.seq(), ids, selective=selective))
        except ContextLengthError:
            if not b.tokens:
                raise
            b.finish = "length"
            continue
        kept.append((b, ids))
    return kept, vals


def step_scores(
    model: Any, pairs: list[tuple[Branch, Any]], *, selective: bool, stop_outside: bool
) -> tuple[list[tuple[Branch, Any]], list[Any]]:
    """`scores_or_length` for one step of every live branch; with ``stop_outside``, a
    branch whose output is complete here (EOS allowed under a constraint) gets full
    logits, and the mass of every token the constraint forbids is added to EOS
    (`end_with_outside`). Returns the branches still going and their scores."""
    vocab = model.vocabulary
    ending: dict[int, Any] = {}
    if stop_outside:
        pairs = list(pairs)
        for i, (b, ids) in enumerate(pairs):
            if ids is not None and b.guide.matcher is not None and eos_position(vocab, ids) >= 0:
                ending[id(b)] = ids
                pairs[i] = (b, None)
    pairs, vals = scores_or_length(model, pairs, selective=selective)
    if ending:
        for i, (b, _ids) in enumerate(pairs):
            if id(b) in ending:
                pairs[i] = (b, ending[id(b)])
                vals[i] = end_with_outside(vocab, vals[i], ending[id(b)])
    return pairs, vals
