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
from typing import Any, Unpack

import numpy as np

from tether.decoding.beam import beam_search
from tether.decoding.branch import (
    Branch,
    Decoded,
    close_branch,
    completion_overflows,
    near_budget,
    step_scores,
)
from tether.decoding.decoders import Argmax, Beam, BestOf, Decoder, Sample
from tether.decoding.guide import Guide
from tether.decoding.lazy import choose
from tether.decoding.logits import check_prompt_fits
from tether.decoding.options import DecodeOptions, Settings, settings
from tether.decoding.sampling import log_softmax
from tether.decoding.stops import StopScanner
from tether.errors import ArgumentError

__all__ = ["Decoded", "decode", "decode_iter", "open_branch", "step_branches"]


def _sample_settings(decoder: Decoder) -> tuple[Sample | None, int]:
    if isinstance(decoder, Argmax):
        return None, 1
    if isinstance(decoder, Sample):
        return decoder, decoder.n
    if isinstance(decoder, BestOf):
        return decoder.sample, decoder.n
    raise ArgumentError("decoder", decoder, "an Argmax, Sample or BestOf (beam_search runs Beam)")


def _step(model: Any, live: list[Branch], sampler: Sample | None, s: Settings) -> None:
    vocab, max_tokens = model.vocabulary, s.max_tokens
    # 1. forced tokens, no model call
    if s.fast_forward:
        for b in live:
            forced = b.guide.fast_forward()
            for t in forced:
                if len(b.tokens) >= max_tokens:
                    if s.close_on_budget:
                        close_branch(model, b, max_tokens, s.triggers)
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
    pairs, vals = step_scores(model, pairs, selective=s.selective, stop_outside=s.stop_outside)
    # 4. choice
    for (b, ids), v in zip(pairs, vals, strict=True):
        k = choose(b.guide, ids, v, sampler, b.rng, stop_outside=s.stop_outside)  # (lazy matchers: tested in order)
        if k < 0:
            b.finish, b.error = "error", "the constraint allows no token here"
            continue
        token = int(ids[k]) if ids is not None else k
        left = max_tokens - len(b.tokens) - 1  # after this token
        if near_budget(b, left, s):
            after = b.guide.copy()
            if after.consume(token) and token not in vocab.eos_ids and completion_overflows(model, b, after, left, s):
                close_branch(model, b, max_tokens, s.triggers)
                continue  # closed (or, in a free region, closed up to the trigger: choose again)
        b.logprob += float(log_softmax(v)[k])
        b.push(vocab, token, False)


def _start(model: Any, prompt_tokens: Sequence[int], matcher: Any | None, decoder: Decoder,
           s: Settings) -> tuple[list[Branch], Sample | None]:
    sampler, n = _sample_settings(decoder)
    seed = sampler.seed if sampler is not None else None
    base = Guide(matcher, model.vocabulary, s.heal)
    origin = matcher.copy() if matcher is not None else None
    branches = []
    for i in range(n):
        rng = None
        if sampler is not None:
            rng = np.random.default_rng([seed, i]) if seed is not None else np.random.default_rng()
        guide = base if i == n - 1 else base.copy()
        branches.append(Branch(list(prompt_tokens), guide, StopScanner(s.stop), rng, origin))
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(prompt_tokens) * n
    return branches, sampler


def decode_iter(model: Any, prompt_tokens: Sequence[int], matcher: Any | None = None, decoder: Decoder | None = None,
                **options: Unpack[DecodeOptions]) -> Iterator[list[Decoded]]:
    """Like `decode`, yielding the current state of every sequence after each step."""
    decoder = decoder if decoder is not None else Argmax()
    s = settings(model, prompt_tokens, decoder, options)
    branches, sampler = _start(model, prompt_tokens, matcher, decoder, s)
    counted = 0
    while True:
        live = [b for b in branches if b.finish is None]
        if not live:
            break
        _step(model, live, sampler, s)
        total = sum(len(b.tokens) for b in branches)
        model.costs.generated_tokens += total - counted
        counted = total
        yield [b.result() for b in branches]


def decode(model: Any, prompt_tokens: Sequence[int], matcher: Any | None = None, decoder: Decoder | None = None,
           **options: Unpack[DecodeOptions]) -> list[Decoded]:
    """Decode after ``prompt_tokens`` under ``matcher`` (None = free text).

    Returns one `Decoded` per sequence: 1 for Argmax, ``n`` for Sample (in sample
    order), ``n`` for BestOf sorted by log-probability (best first), up to ``n`` for
    Beam (`beam_search`: distinct texts, best score first). Each sequence owns a copy of
    ``matcher`` (the one passed in is used by the last sequence). The keyword options
    (`tether.decoding.options.DecodeOptions`): ``max_tokens`` (256), ``stop``, ``heal``
    (the text token healing removed from the end of the prompt, see `plan_healing`: the
    output starts by writing it again, and it is not part of ``text``), ``fast_forward``
    (True), ``close_on_budget`` (False), ``selective`` (True), ``close_at`` and
    ``reserve`` (budget closing of free regions), ``stop_outside`` (True: what the
    constraint forbids counts as EOS where the output is complete; see the module
    docstring). Beam takes them all too.
    """
    decoder = decoder if decoder is not None else Argmax()
    if isinstance(decoder, Beam):
        return beam_search(model, prompt_tokens, matcher, decoder, **options)
    final: list[Decoded] = []
    for state in decode_iter(model, prompt_tokens, matcher, decoder, **options):
        final = state
    if isinstance(decoder, BestOf):
        final.sort(key=lambda d: (d.finish_reason == "error", -d.logprob))
    return final


# -- branches driven from outside (the query language: one branch per hole, in lockstep) --


def open_branch(model: Any, prompt_tokens: Sequence[int], matcher: Any | None = None, *, heal: bytes = b"",
                stop: Sequence[str | bytes] = (), rng: np.random.Generator | None = None) -> Branch:
    """One sequence to decode after ``prompt_tokens`` under ``matcher`` (healing ``heal``),
    advanced by `step_branches` together with others (each with its own prompt). Counts
    one generate call and the prompt's tokens; raises ContextLengthError for a prompt
    longer than the model's window."""
    check_prompt_fits(model, prompt_tokens)
    origin = matcher.copy() if matcher is not None else None
    b = Branch(list(prompt_tokens), Guide(matcher, model.vocabulary, heal), StopScanner(stop), rng, origin)
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(prompt_tokens)
    return b


def step_branches(model: Any, branches: Sequence[Branch], sampler: Sample | None, s: Settings) -> None:
    """One step of every live branch under ``s`` (its ``stop`` and ``heal`` are the
    branches' own, given to `open_branch`), as `decode` steps its sequences (forced tokens,
    one batched model call where the backend can, the choice, the checks); counts the
    tokens generated. ``sampler`` None: argmax (each branch draws from its own ``rng``)."""
    live = [b for b in branches if b.finish is None]
    if not live:
        return
    before = sum(len(b.tokens) for b in live)
    _step(model, live, sampler, s)
    model.costs.generated_tokens += sum(len(b.tokens) for b in live) - before
