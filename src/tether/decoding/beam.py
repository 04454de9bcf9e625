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

Regions and ``stop_outside`` as in `tether.decoding.loop` (the helpers of `branch.py`): with ``close_at``
triggers (a triggered output), while a beam's shortest completion passes through a trigger
the budget check keeps ``reserve`` more tokens, and closing writes the completion only up to
the end of the trigger (the beam goes on and writes the constrained part). With
``stop_outside`` (the default), where a beam's output is complete the model's probability
of every token the constraint forbids counts toward EOS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tether.decoding.branch import (
    CLOSE_SLACK,
    Branch,
    Decoded,
    check_decode_args,
    close_branch,
    completion_tokens,
    region_end,
    step_scores,
)
from tether.decoding.decoders import Beam, check_bool, check_int
from tether.decoding.guide import Guide
from tether.decoding.sampling import log_softmax
from tether.decoding.stops import StopScanner


def beam_search(
    model: Any,
    prompt_tokens: Sequence[int],
    matcher: Any | None,
    decoder: Beam,
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
    """Return up to ``decoder.n`` distinct sequences sorted by score (best first).
    ``close_at``/``reserve``/``stop_outside``: as `tether.decoding.loop.decode`."""
    check_decode_args(model, prompt_tokens, decoder, max_tokens, stop)
    check_int("reserve", reserve, minimum=0)
    check_bool("stop_outside", stop_outside)
    triggers = [t.encode() if isinstance(t, str) else bytes(t) for t in close_at]
    vocab = model.vocabulary
    width = decoder.beam_width
    model.costs.generate_calls += 1
    model.costs.prompt_tokens += len(prompt_tokens)
    origin = matcher.copy() if matcher is not None else None
    live = [Branch(list(prompt_tokens), Guide(matcher, vocab, heal), StopScanner(stop), None, origin)]
    finished: dict[bytes, Branch] = {}

    def settle(b: Branch) -> bool:
        """Forced tokens and budget; True if the beam finished."""
        if fast_forward and b.finish is None:
            for t in b.guide.fast_forward():
                if len(b.tokens) >= max_tokens:
                    break
                b.push(vocab, t, True)
                if b.finish:
                    break
        if b.finish is None and len(b.tokens) >= max_tokens:
            b.finish = "length"  # (closing happened before the budget, when it was needed)
        return b.finish is not None

    def mustclose_branch(c: Branch) -> bool:
        """``c``'s shortest completion no longer fits the budget (measured only near it)."""
        if not close_on_budget or c.finish is not None or c.guide.free:
            return False
        remaining = max_tokens - len(c.tokens)
        if c.closing_len >= 0 and remaining > c.closing_len + CLOSE_SLACK + reserve:
            return False
        toks = completion_tokens(model, c.guide)
        if toks is None:
            return False
        c.closing_len = len(toks)
        kept = reserve if reserve and region_end(c.guide, triggers) >= 0 else 0  # still in the free region
        return len(toks) + kept > remaining

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
        if settle(b):
            add_finished(b)
    live = [b for b in live if b.finish is None]
    generated = 0
    while live:
        if max(b.logprob for b in live) <= nth_best():
            break
        asked = [(b, b.guide.allowed()) for b in live]
        pairs, vals = step_scores(model, asked, selective=selective, stop_outside=stop_outside)
        for b in live:
            if b.finish is not None:  # the context window is full
                add_finished(b)
        live = [b for b, _ in pairs]
        cands: list[tuple[float, int, int]] = []
        for bi, ((b, ids), v) in enumerate(zip(pairs, vals, strict=True)):
            if len(v) == 0:
                continue
            lp = log_softmax(v)
            # more than ``width`` candidates per beam: extensions that merge with others
            # (same text by another tokenization) do not take a slot
            k = min(4 * width + 4, int(np.isfinite(lp).sum()))
            if k <= 0:
                continue
            top = np.argpartition(-lp, k - 1)[:k] if k < len(lp) else np.arange(len(lp))
            for j in top:
                token = int(ids[j]) if ids is not None else int(j)
                cands.append((b.logprob + float(lp[j]), bi, token))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        new_live: list[Branch] = []
        seen: set[bytes] = set()
        taken = 0
        for score, bi, token in cands:
            if taken >= width:
                break
            c = live[bi].fork()
            c.logprob = score
            c.push(vocab, token, False)
            generated += 1
            if mustclose_branch(c):  # the token would leave no room to finish: close the parent instead
                c = live[bi].fork()
                close_branch(model, c, max_tokens, triggers)  # (in a free region: up to the trigger, and on)
            if settle(c):  # a finished beam takes a slot only when its text is new
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
