"""`decode`: run argmax / sampling / best-of over one prompt, token by token.

Per step and per live sequence: forced tokens first (fast-forward: appended without
sampling; the next model call evaluates the whole forced run at once through the KV
prefix reuse), then the allowed set from the matcher, the scores of those tokens only
(`tether.decoding.logits`), the choice, and the checks: EOS, matcher finished, stop
text, token budget. ``n`` sequences advance in lockstep so a backend with
``logits_batch`` serves them in one forward pass. Under a lazy matcher
(`tether.decoding.lazy`) the allowed set is a superset and the choice tests candidates in
the decoder's order. `open_branch`/`step_branches` step sequences with different prompts
together (the query language's holes).

``close_on_budget=True``: before a token is taken, the decoder checks that the shortest
completion of the constraint still fits in the remaining budget after it; when it would
not, the shortest completion is appended instead, so the output is complete and valid
within ``max_tokens``. Closing never exceeds ``max_tokens``: when even the shortest
completion does not fit, the output ends incomplete with ``finish_reason="length"``.

Regions (``close_at`` triggers with ``reserve`` tokens, for triggered outputs): while the
shortest completion passes through a trigger (the output is still in its free region),
the budget check keeps ``reserve`` more tokens, and closing appends the shortest
completion only up to the end of the trigger; the model then writes the constrained part
in the tokens kept for it (closed again, fully, if it would not fit).

``stop_outside=True`` (the default): where the output is complete (EOS allowed) under a
constraint, the model's probability of every token the constraint forbids counts toward
EOS, because a model that wants to leave the language there means that the value has
ended (a number followed by a newline or a word). So ``int`` after ``"A:"`` ends after
the digits the model means instead of running to its digit bound. The mask is unchanged;
only the choice among allowed tokens is (full logits are fetched on such steps).

Decode time never raises for constraint reasons: a sequence that cannot continue ends
with ``finish_reason="error"`` and the matcher's message in ``error``.

Truthful ends: ``complete`` is True only when the output *as returned* is complete under
the constraint. A stop text cuts the output before the constraint saw its end, so the
cut text is matched again from the start (``complete`` only if it is itself complete).
When the model's context fills up mid-output (the backend raises `ContextLengthError`)
the sequence ends with ``finish_reason="length"``; a prompt that does not fit raises
`ContextLengthError` before anything is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tether.decoding.decoders import (
    Argmax,
    ArgumentError,
    Beam,
    BestOf,
    Decoder,
    Sample,
    check_bool,
    check_int,
    check_limits,
)
from tether.decoding.guide import Guide
from tether.decoding.lazy import choose
from tether.decoding.logits import batch_scores, check_prompt_fits, scores
from tether.decoding.sampling import log_softmax
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


class _Branch:
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


def _sample_settings(decoder: Decoder) -> tuple[Sample | None, int]:
    if isinstance(decoder, Argmax):
        return None, 1
    if isinstance(decoder, Sample):
        return decoder, decoder.n
    if isinstance(decoder, BestOf):
        return decoder.sample, decoder.n
    raise ArgumentError("decoder", decoder, "an Argmax, Sample or BestOf (beam_search runs Beam)")


# The shortest completion is measured (a search in the engine) only while the budget left is
# within this many tokens of the last measured completion length: far from the budget, one
# token cannot make the closing text that much longer in practice, and measuring at every
# step would cost more than the model call.
CLOSE_SLACK = 16


def _completion_tokens(model: Any, guide: Guide) -> list[int] | None:
    """Canonical tokens of the shortest completion; None if the engine finds none."""
    try:
        return tokens_for_bytes(model, guide.shortest_completion())
    except Exception:  # noqa: BLE001 -- decode time never raises (ConstraintError: no completion found)
        return None


def _region_end(guide: Guide, close_at: Sequence[bytes]) -> int:
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


def _close(model: Any, b: _Branch, max_tokens: int, close_at: Sequence[bytes] = ()) -> None:
    """Append the shortest completion (budget closing) if it fits ``max_tokens``; else the
    output ends here, incomplete, with "length" (the budget cannot hold a complete one).
    In a free region (`_region_end`), append it only up to the end of the trigger and let
    the sequence go on."""
    toks = _completion_tokens(model, b.guide)
    if toks is None or len(b.tokens) + len(toks) > max_tokens:
        b.finish = "length"
        return
    end = _region_end(b.guide, close_at)
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


def _step(
    model: Any,
    live: list[_Branch],
    sampler: Sample | None,
    *,
    max_tokens: int,
    fast_forward: bool,
    close_on_budget: bool,
    selective: bool,
    close_at: Sequence[bytes] = (),
    reserve: int = 0,
    stop_outside: bool = False,
) -> None:
    vocab = model.vocabulary
    # 1. forced tokens, no model call
    if fast_forward:
        for b in live:
            forced = b.guide.fast_forward()
            for t in forced:
                if len(b.tokens) >= max_tokens:
                    if close_on_budget:
                        _close(model, b, max_tokens, close_at)
                    else:
                        b.finish = "length"
                    break
                b.push(vocab, t, True)
                if b.finish:
                    break
    for b in live:
        if b.finish is None and len(b.tokens) >= max_tokens:
            b.finish = "length"
    live = [b for b in live if b.finish is None]
    if not live:
        return
    # 2. allowed sets, 3. scores (one batched call where the model can)
    ids_list = [b.guide.allowed() for b in live]
    for b, ids in zip(live, ids_list, strict=True):
        if ids is not None and len(ids) == 0:
            b.finish, b.error = "error", "the constraint allows no token here"
    pairs = [(b, ids) for b, ids in zip(live, ids_list, strict=True) if b.finish is None]
    if not pairs:
        return
    ending: dict[int, Any] = {}
    if stop_outside:  # complete outputs: full logits, to count what leaves the language as EOS
        for i, (b, ids) in enumerate(pairs):
            if ids is not None and b.guide.matcher is not None and _eos_position(vocab, ids) >= 0:
                ending[id(b)] = ids
                pairs[i] = (b, None)
    pairs, vals = scores_or_length(model, pairs, selective=selective)
    if ending:
        for i, (b, _ids) in enumerate(pairs):
            if id(b) in ending:
                pairs[i] = (b, ending[id(b)])
                vals[i] = end_with_outside(vocab, vals[i], ending[id(b)])
    # 4. choice
    for (b, ids), v in zip(pairs, vals, strict=True):
        k = choose(b.guide, ids, v, sampler, b.rng, stop_outside=stop_outside)  # (lazy matchers: tested in order)
        if k < 0:
            b.finish, b.error = "error", "the constraint allows no token here"
            continue
        token = int(ids[k]) if ids is not None else k
        remaining = max_tokens - len(b.tokens)
        if close_on_budget and not b.guide.free and (
            b.closing_len < 0 or remaining - 1 <= b.closing_len + CLOSE_SLACK + reserve
        ):
            g2 = b.guide.copy()
            ok = g2.consume(token) and token not in vocab.eos_ids
            after = _completion_tokens(model, g2) if ok else []
            if after is not None:
                b.closing_len = len(after)
            kept = reserve if ok and reserve and _region_end(g2, close_at) >= 0 else 0
            if after is not None and len(after) + kept > remaining - 1:
                _close(model, b, max_tokens, close_at)
                continue  # closed (or, in a free region, closed up to the trigger: choose again)
        b.logprob += float(log_softmax(v)[k])
        b.push(vocab, token, False)


def _eos_position(vocab: Any, ids: Any) -> int:
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
        k = _eos_position(vocab, ids)
        vals[k] = np.float32(np.logaddexp(float(vals[k]), mass))
    return vals


def scores_or_length(
    model: Any, pairs: list[tuple[_Branch, Any]], *, selective: bool
) -> tuple[list[tuple[_Branch, Any]], list[Any]]:
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


def check_decode_args(model: Any, prompt_tokens: Sequence[int], decoder: Decoder, max_tokens: int,
                      stop: Sequence[str | bytes]) -> None:
    """The checks every decoding entry point makes before the first model call."""
    if not isinstance(decoder, Argmax | Sample | Beam | BestOf):
        raise ArgumentError("decoder", decoder, "an Argmax, Sample, Beam or BestOf")
    check_limits(decoder)
    check_int("max_tokens", max_tokens, minimum=0, limit="max_tokens")
    if isinstance(stop, str | bytes) or not all(isinstance(s, str | bytes) and s for s in stop):
        raise ArgumentError("stop", stop, "a list of non-empty strings")
    check_prompt_fits(model, prompt_tokens)


def _start(
    model: Any,
    prompt_tokens: Sequence[int],
    matcher: Any | None,
    decoder: Decoder,
    stop: Sequence[str | bytes],
    heal: bytes,
) -> tuple[list[_Branch], Sample | None]:
    sampler, n = _sample_settings(decoder)
    seed = sampler.seed if sampler is not None else None
    base = Guide(matcher, model.vocabulary, heal)
    origin = matcher.copy() if matcher is not None else None
    branches = []
    for i in range(n):
        rng = None
        if sampler is not None:
            rng = np.random.default_rng([seed, i]) if seed is not None else np.random.default_rng()
        guide = base if i == n - 1 else base.copy()
        branches.append(_Branch(list(prompt_tokens), guide, StopScanner(stop), rng, origin))
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(prompt_tokens) * n
    return branches, sampler


def decode_iter(
    model: Any,
    prompt_tokens: Sequence[int],
    matcher: Any | None = None,
    decoder: Decoder | None = None,
    *,
    max_tokens: int = 256,
    stop: Sequence[str | bytes] = (),
    heal: bytes = b"",
    fast_forward: bool = True,
    close_on_budget: bool = False,
    selective: bool = True,
    close_at: Sequence[str | bytes] = (),
    reserve: int = 0,
    stop_outside: bool = True,
) -> Iterator[list[Decoded]]:
    """Like `decode`, yielding the current state of every sequence after each step."""
    decoder = decoder if decoder is not None else Argmax()
    check_decode_args(model, prompt_tokens, decoder, max_tokens, stop)
    branches, sampler = _start(model, prompt_tokens, matcher, decoder, stop, heal)
    triggers = [t.encode() if isinstance(t, str) else bytes(t) for t in close_at]
    check_int("reserve", reserve, minimum=0)
    check_bool("stop_outside", stop_outside)
    counted = 0
    while True:
        live = [b for b in branches if b.finish is None]
        if not live:
            break
        _step(
            model, live, sampler, max_tokens=max_tokens, fast_forward=fast_forward,
            close_on_budget=close_on_budget, selective=selective, close_at=triggers, reserve=reserve,
            stop_outside=stop_outside,
        )
        total = sum(len(b.tokens) for b in branches)
        model.costs.generated_tokens += total - counted
        counted = total
        yield [b.result() for b in branches]


def decode(
    model: Any,
    prompt_tokens: Sequence[int],
    matcher: Any | None = None,
    decoder: Decoder | None = None,
    *,
    max_tokens: int = 256,
    stop: Sequence[str | bytes] = (),
    heal: bytes = b"",
    fast_forward: bool = True,
    close_on_budget: bool = False,
    selective: bool = True,
    close_at: Sequence[str | bytes] = (),
    reserve: int = 0,
    stop_outside: bool = True,
) -> list[Decoded]:
    """Decode after ``prompt_tokens`` under ``matcher`` (None = free text).

    Returns one `Decoded` per sequence: 1 for Argmax, ``n`` for Sample (in sample
    order), ``n`` for BestOf sorted by log-probability (best first), up to ``n`` for
    Beam (`beam_search`: distinct texts, best score first). ``heal`` is the text
    token healing removed from the end of the prompt (see `plan_healing`); the output
    must start by re-generating it and it is not part of ``text``. Each sequence owns a
    copy of ``matcher`` (the one passed in is used by the last sequence). ``close_at`` and
    ``reserve``: budget closing of free regions; ``stop_outside``: what the constraint
    forbids counts as EOS where the output is complete (see the module docstring; Beam
    takes both too).
    """
    decoder = decoder if decoder is not None else Argmax()
    check_decode_args(model, prompt_tokens, decoder, max_tokens, stop)
    if isinstance(decoder, Beam):
        from tether.decoding.beam import beam_search

        return beam_search(
            model, prompt_tokens, matcher, decoder, max_tokens=max_tokens, stop=stop, heal=heal,
            fast_forward=fast_forward, close_on_budget=close_on_budget, selective=selective,
            close_at=close_at, reserve=reserve, stop_outside=stop_outside,
        )
    final: list[Decoded] = []
    for state in decode_iter(
        model, prompt_tokens, matcher, decoder, max_tokens=max_tokens, stop=stop, heal=heal,
        fast_forward=fast_forward, close_on_budget=close_on_budget, selective=selective,
        close_at=close_at, reserve=reserve, stop_outside=stop_outside,
    ):
        final = state
    if isinstance(decoder, BestOf):
        final.sort(key=lambda d: (d.finish_reason == "error", -d.logprob))
    return final


# -- branches driven from outside (the query language: one branch per hole, in lockstep) --


def open_branch(model: Any, prompt_tokens: Sequence[int], matcher: Any | None = None, *, heal: bytes = b"",
                stop: Sequence[str | bytes] = (), rng: np.random.Generator | None = None) -> _Branch:
    """One sequence to decode after ``prompt_tokens`` under ``matcher`` (healing ``heal``),
    advanced by `step_branches` together with others (each with its own prompt). Counts
    one generate call and the prompt's tokens; raises ContextLengthError for a prompt
    longer than the model's window."""
    check_prompt_fits(model, prompt_tokens)
    origin = matcher.copy() if matcher is not None else None
    b = _Branch(list(prompt_tokens), Guide(matcher, model.vocabulary, heal), StopScanner(stop), rng, origin)
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(prompt_tokens)
    return b


def step_branches(model: Any, branches: Sequence[_Branch], sampler: Sample | None = None, *, max_tokens: int,
                  fast_forward: bool = True, close_on_budget: bool = False, selective: bool = True,
                  close_at: Sequence[str | bytes] = (), reserve: int = 0, stop_outside: bool = True) -> None:
    """One step of every live branch, as `decode` steps its sequences (forced tokens, one
    batched model call where the backend can, the choice, the checks); counts the tokens
    generated. ``sampler`` None: argmax (each branch draws from its own ``rng``)."""
    live = [b for b in branches if b.finish is None]
    if not live:
        return
    before = sum(len(b.tokens) for b in live)
    triggers = [t.encode() if isinstance(t, str) else bytes(t) for t in close_at]
    _step(model, live, sampler, max_tokens=max_tokens, fast_forward=fast_forward, close_on_budget=close_on_budget,
          selective=selective, close_at=triggers, reserve=reserve, stop_outside=stop_outside)
    model.costs.generated_tokens += sum(len(b.tokens) for b in live) - before
