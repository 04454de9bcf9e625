"""Beam search over constrained sequences.

Each beam owns a `Guide` (its matcher forked with ``copy()``). A step scores every live
beam's allowed tokens with the constrained log-probabilities (log-softmax over the
allowed set), keeps the ``width`` best extensions overall, and moves beams that end
(EOS, constraint finished, stop text) to the finished pool. Forced tokens are appended
without a model call (they have probability 1 under the constraint, so the scores are
the same with and without fast-forward). Beams with the same text are merged (the
better score wins), so the results are distinct texts.

The search stops when ``n`` sequences are finished and no live beam scores better than
the n-th finished one (scores only decrease, so none could overtake), or when every
beam reached ``max_tokens``. Results are sorted by score, best first; fewer than ``n``
come back when the constraint admits fewer distinct outputs.

``close_on_budget``: an extension whose shortest completion no longer fits the tokens
left is replaced by its parent closed with the parent's shortest completion (forced
tokens, probability 1), so closed outputs stay within ``max_tokens``.

Regions and ``stop_outside`` as in `tether.decoding.loop` (its helpers): with ``close_at``
triggers (a triggered output), while a beam's shortest completion passes through a trigger
the budget check keeps ``reserve`` more tokens, and closing writes the completion only up to
the end of the trigger (the beam goes on and writes the constrained part). With
``stop_outside`` (the default), where a beam's output is complete the model's probability
of every token the constraint forbids counts toward EOS.

The step is built from public primitives that the query language's scripted beam search
(beams across holes and the program between them) uses too: `score_beams` (one batched
model call for the live beams), `candidates` (a beam's best extensions; a lazy
constraint's best accepted ones), `extend` (a forked beam with one more token, closed on
the budget when needed, then its forced tokens) and `settle` (forced tokens, budget).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import numpy as np

from tether.decoding.branch import Branch, Decoded, close_branch, must_close, step_scores
from tether.decoding.decoders import Beam
from tether.decoding.guide import Guide
from tether.decoding.lazy import best_accepted
from tether.decoding.options import DecodeOptions, Settings, settings
from tether.decoding.sampling import log_softmax
from tether.decoding.stops import StopScanner


def fork(b: Branch) -> Branch:
    """A copy of beam ``b`` that can advance on its own (its guide and stop scanner forked)."""
    return b.fork()


def settle(model: Any, b: Branch, s: Settings) -> bool:
    """Append the forced tokens (fast-forward) and apply the budget; True if ``b`` finished."""
    max_tokens = s.max_tokens
    if s.fast_forward and b.finish is None:
        for t in b.guide.fast_forward():
            if len(b.tokens) >= max_tokens:
                break
            b.push(model.vocabulary, t, True)
            if b.finish:
                break
    if b.finish is None and len(b.tokens) >= max_tokens:
        b.finish = "length"  # (closing happened before the budget, when it was needed)
    return b.finish is not None


def score_beams(model: Any, live: Sequence[Branch], *, selective: bool = True,
                stop_outside: bool = True) -> list[tuple[Branch, Any, Any]]:
    """(beam, allowed ids or None, constrained log-probabilities) for each live beam, from
    one batched model call where the backend can; a beam whose context window is full
    ends with "length" and is left out. With ``stop_outside``, where a beam's output is
    complete the probability of what the constraint forbids counts toward EOS."""
    pairs, vals = step_scores(model, [(b, b.guide.allowed()) for b in live], selective=selective,
                              stop_outside=stop_outside)
    return [(b, ids, log_softmax(v)) for (b, ids), v in zip(pairs, vals, strict=True)]


def candidates(b: Branch, ids: Any, lp: Any, k: int, *, stop_outside: bool = True) -> list[tuple[float, int]]:
    """Up to ``k`` extensions (score, token) of beam ``b`` from its log-probabilities ``lp``
    (a lazy constraint: the ``k`` best it accepts, `tether.decoding.lazy.best_accepted`)."""
    if len(lp) == 0:
        return []
    if b.guide.lazy:
        best = best_accepted(b.guide, ids, lp, k, stop_outside=stop_outside)
        return [(b.logprob + s, int(ids[j]) if ids is not None else j) for j, s in best]
    k = min(k, int(np.isfinite(lp).sum()))
    if k <= 0:
        return []
    top = np.argpartition(-lp, k - 1)[:k] if k < len(lp) else np.arange(len(lp))
    return [(b.logprob + float(lp[j]), int(ids[j]) if ids is not None else int(j)) for j in top]


def extend(model: Any, parent: Branch, score: float, token: int, s: Settings) -> Branch:
    """A new beam: ``parent`` with ``token`` (scored ``score``) and then its forced tokens.
    When the token would leave no room to finish, ``parent`` is closed instead (in a free
    region: up to the end of the trigger, and the beam goes on)."""
    c = fork(parent)
    c.logprob = score
    c.push(model.vocabulary, token, False)
    if must_close(model, c, s):
        c = fork(parent)
        close_branch(model, c, s.max_tokens, s.triggers)
    settle(model, c, s)
    return c


def beam_search(model: Any, prompt_tokens: Sequence[int], matcher: Any | None, decoder: Beam,
                **options: Unpack[DecodeOptions]) -> list[Decoded]:
    """Return up to ``decoder.n`` distinct sequences sorted by score (best first). The
    keyword options: as `tether.decoding.loop.decode`."""
    s = settings(model, prompt_tokens, decoder, options)
    vocab = model.vocabulary
    width = decoder.beam_width
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(prompt_tokens)
    origin = matcher.copy() if matcher is not None else None
    live = [Branch(list(prompt_tokens), Guide(matcher, vocab, s.heal), StopScanner(s.stop), None, origin)]
    finished: dict[bytes, Branch] = {}

    def add_finished(b: Branch) -> None:
        if b.finish == "error":
            return
        key = bytes(b.scanner.text)
        old = finished.get(key)
        if old is None or b.logprob > old.logprob:
            finished[key] = b

    def nth_best() -> float:
        done = [f.logprob for f in finished.values() if f.is_complete()]
        if len(done) < decoder.n:
            return -np.inf
        return sorted(done, reverse=True)[decoder.n - 1]

    for b in live:
        if settle(model, b, s):
            add_finished(b)
    live = [b for b in live if b.finish is None]
    generated = 0
    while live:
        if max(b.logprob for b in live) <= nth_best():
            break
        scored = score_beams(model, live, selective=s.selective, stop_outside=s.stop_outside)
        for b in live:
            if b.finish is not None:  # the context window is full
                add_finished(b)
        live = [b for b, _, _ in scored]
        cands: list[tuple[float, int, int]] = []
        for bi, (b, ids, lp) in enumerate(scored):
            # more than ``width`` candidates per beam: extensions that merge with others
            # (same text by another tokenization) do not take a slot
            cands += [(score, bi, token) for score, token in candidates(b, ids, lp, 4 * width + 4,
                                                                         stop_outside=s.stop_outside)]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        new_live: list[Branch] = []
        seen: set[bytes] = set()
        taken = 0
        for score, bi, token in cands:
            if taken >= width:
                break
            c = extend(model, live[bi], score, token, s)
            generated += 1
            if c.finish is not None:  # a finished beam takes a slot only when its text is new
                key = bytes(c.scanner.text)
                if c.finish != "error" and key not in finished:
                    taken += 1
                add_finished(c)
                continue
            key = bytes(c.scanner.text) + b"\x00" + bytes(c.guide.pending)
            if key in seen:
                continue
            seen.add(key)
            new_live.append(c)
            taken += 1
        live = new_live
    model.costs.generated_tokens += generated
    best = sorted(finished.values(), key=lambda f: (not f.is_complete(), -f.logprob))[: decoder.n]
    if not best:  # nothing finished (budget): return the best live beams as they are
        best = sorted(live, key=lambda f: -f.logprob)[: decoder.n]
    return [b.result() for b in best]
