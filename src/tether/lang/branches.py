"""Decoding a query's holes through `tether.decoding`: branches in lockstep, scripted beam search.

A hole is one `tether.decoding` branch (``open_branch``) whose matcher is the hole's
`HoleMatcher` (a lazy matcher: Follow checks of the ``where`` clause, engine masks of its
exact parts and of a typed hole's output). So a hole gets what ``generate`` gets: token
healing of a plain-text prompt's last token, fast-forward of forced tokens, selective
logits, budget closing (triggered regions included), ``stop_outside`` and cost accounting.

* ``argmax``/``sample(n)`` (`run_lockstep`): each of the n executions runs the program with
  its own decoding (different control flow per branch; each its own random stream); the
  holes pending in all executions advance together (`step_branches`: one batched
  forward pass where the backend can).
* ``beam(n)`` (`run_beam`): scripted beam search — beams advance token by token in
  lockstep, across holes and the Python code between them; each step scores every live
  beam (`score_beams`), takes each beam's best extensions (`candidates`), prunes all of
  them jointly to the n best totals (earlier holes' log-probabilities plus the current
  one's), and extends the survivors (`extend`: forced tokens, budget closing). A beam
  that completes a hole records it in its execution — in place when no other survivor
  shares the execution, else on a re-played copy — and the program runs on to its next hole.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.decoding.beam import candidates, extend, fork, score_beams, settle
from tether.decoding.decoders import Sample
from tether.decoding.healing import plan_healing
from tether.decoding.logits import context_size
from tether.decoding.loop import open_branch, step_branches
from tether.decoding.options import Settings
from tether.lang.decorators import call_decorator
from tether.lang.holes import HoleMatcher
from tether.lang.result import HoleRecord
from tether.lang.semantics import FIN, evaluate, mentions
from tether.program.generate import region_options

if TYPE_CHECKING:
    from tether.lang.runtime import Execution, HoleRequest, Program, Runtime


@dataclass
class Hole:
    """A hole being decoded: its branch (whose guide holds the `HoleMatcher`) and options."""

    branch: Any
    close_at: tuple[str, ...] = ()
    reserve: int = 0

    @property
    def matcher(self) -> HoleMatcher:
        return self.branch.guide.matcher  # type: ignore[no-any-return]

    @property
    def max_tokens(self) -> int:
        """The branch's token budget: the value's budget, plus the token that only re-writes
        healed prompt text when there is one (healing redoes its text in one token; while
        it is pending, one is allowed for)."""
        m = self.matcher
        return m.max_tokens + (1 if self.branch.guide.pending else m.redo)

    def settings(self, rt: Runtime) -> Settings:
        """The settings of this hole's next step: the runtime's, with the hole's budget
        and triggered region."""
        return dataclasses.replace(rt.step_settings(), max_tokens=self.max_tokens, close_at=self.close_at,
                                   reserve=self.reserve)

    def with_branch(self, branch: Any) -> Hole:
        return Hole(branch, self.close_at, self.reserve)


def open_hole(rt: Runtime, ex: Execution, req: HoleRequest, rng: np.random.Generator | None = None) -> Hole:
    """The branch for ``req``: the branch's prompt (healed unless chat-rendered or turned
    off), the hole's matcher (typed output first), its budget and triggered region."""
    assert rt.info is not None
    prompt = rt.prompt_tokens(ex)
    heal = b""
    chat = rt.chat and ex.chat_messages() is not None
    if rt.healing and not chat:
        prompt, heal = plan_healing(rt.model.vocabulary, prompt)
    typed = None
    if req.spec is not None:
        trace = ex.trace()
        lead = req.spec.kind != "triggered" and bool(trace) and not trace[-1].isspace()
        typed = rt.typed_matcher(req.spec, lead)
    m = HoleMatcher(rt.model, rt.info, req.name, req.constraint, req.scope, req.future, rt.max_tokens,
                    rt.use_engine, typed)
    close_at: tuple[str, ...] = ()
    reserve = 0
    if req.spec is not None and req.spec.kind == "triggered":
        region = region_options(req.spec, m.max_tokens)
        close_at, reserve = tuple(region["close_at"]), int(region["reserve"])
    return Hole(open_branch(rt.model, prompt, m, heal=heal, rng=rng), close_at, reserve)


def _how(rt: Runtime, hole: Hole) -> str:
    """Why the hole ended: "eos", "stop" (a stop phrase), "budget", "length" (the context
    window is full) or "masked" (the constraint allowed no token)."""
    b, m = hole.branch, hole.matcher
    if m.reason:
        return m.reason
    if b.finish == "error":
        return "masked"
    if b.finish == "length":
        n_ctx = context_size(rt.model)
        full = n_ctx is not None and len(b.prompt) + len(b.tokens) >= n_ctx and len(b.tokens) < hole.max_tokens
        return "length" if full else "budget"
    return "eos"


def record(rt: Runtime, hole: Hole, req: HoleRequest) -> HoleRecord:
    """The finished hole as a record: its value, why it ended, whether its constraint held."""
    m = hole.matcher
    how = _how(rt, hole)
    text = m.value if m.done and m.value is not None else m.text
    n_tokens = m.value_tokens if m.value_tokens >= 0 else m.n
    ok = True
    if req.constraint is not None:
        # satisfied only when the final value makes the constraint true; a constraint
        # that still reads a later hole cannot be judged yet and counts as kept
        later = any(mentions(req.constraint, h) for h in req.future - {req.name} - req.scope.keys())
        fv = evaluate(req.constraint, m.state.extended(text, n_tokens, True))
        ok = bool(fv.value) if fv.ann == FIN else later
        if not ok and m.stop_text and m.stop_text != text:  # STOPS_BEFORE removed a fixed phrase
            fv = evaluate(req.constraint, m.state.extended(m.stop_text, m.n, True))
            ok = bool(fv.value) if fv.ann == FIN else later
    if m.typed and not m.typed_complete(text):  # a typed value cut short (budget, context)
        ok = False
    return HoleRecord(req.name, text, req.convert(text), query=req.query, stopped=how,
                      n_tokens=n_tokens, satisfied=ok, logprob=float(hole.branch.logprob))


def _stream(req: HoleRequest, hole: Hole) -> None:
    """Streaming decorators see the hole's text so far (its value once it ended)."""
    m = hole.matcher
    for fn in req.streams:
        call_decorator(fn, m.value if m.done and m.value is not None else m.text, req.context)


def run_lockstep(rt: Runtime, program: Program, args: dict[str, Any], n: int) -> list[Execution]:
    """argmax / sample(n): n executions, each with its own control flow, their holes
    decoded in lockstep so their model calls can be batched."""
    exs = [rt.execution(program, args) for _ in range(n)]
    sampler = Sample(temperature=rt.temperature) if rt.decoder.method == "sample" else None
    rngs = [np.random.default_rng([rt.seed, i]) if rt.seed is not None else np.random.default_rng()
            for i in range(n)]
    holes: list[Hole | None] = [None] * n
    while True:
        live = [i for i, ex in enumerate(exs) if not ex.done]
        if not live:
            return exs
        for i in live:
            if holes[i] is None:
                req = exs[i].pending
                assert req is not None
                holes[i] = open_hole(rt, exs[i], req, rngs[i] if sampler is not None else None)
        groups: dict[Settings | int, list[Hole]] = {}
        for i in live:
            h = holes[i]
            assert h is not None
            groups.setdefault(h.settings(rt) if rt.batch else i, []).append(h)
        for group in groups.values():
            step_branches(rt.model, [h.branch for h in group], sampler, group[0].settings(rt))
        for i in live:
            h, req = holes[i], exs[i].pending
            assert h is not None and req is not None
            if req.streams:
                _stream(req, h)
            if h.branch.finish is not None:
                exs[i].resume(record(rt, h, req))
                holes[i] = None


Entry = tuple[float, "Execution", Hole | None]  # (log-probability of the earlier holes, execution, hole)


def run_beam(rt: Runtime, program: Program, args: dict[str, Any], n: int) -> list[Execution]:
    """Scripted beam search over the whole program (all holes jointly)."""
    step = rt.step_settings()
    beams: list[Entry] = [(0.0, rt.execution(program, args), None)]
    for _ in range(100_000):
        if all(ex.done for _, ex, _ in beams):
            break
        pool: list[tuple[float, int, Hole | None, int | None]] = []  # (total, beam, parent hole, token)
        live: list[tuple[int, Hole]] = []
        for bi, (lp, ex, hole) in enumerate(beams):
            if ex.done:
                pool.append((lp, bi, None, None))
                continue
            if hole is None:
                req = ex.pending
                assert req is not None
                hole = open_hole(rt, ex, req)
                settle(rt.model, hole.branch, hole.settings(rt))
                beams[bi] = (lp, ex, hole)
            if hole.branch.finish is not None:  # finished by its forced tokens
                pool.append((lp + hole.branch.logprob, bi, hole, None))
            else:
                live.append((bi, hole))
        scored = score_beams(rt.model, [h.branch for _, h in live], selective=step.selective,
                             stop_outside=step.stop_outside)
        by_branch = {id(b): (ids, lp) for b, ids, lp in scored}
        for bi, hole in live:
            lp0 = beams[bi][0]
            if id(hole.branch) not in by_branch:  # the context window is full
                pool.append((lp0 + hole.branch.logprob, bi, hole, None))
                continue
            ids, lps = by_branch[id(hole.branch)]
            cands = candidates(hole.branch, ids, lps, n, stop_outside=step.stop_outside)
            if not cands:  # no token allowed
                b = fork(hole.branch)
                b.finish, b.error = "error", "the constraint allows no token here"
                pool.append((lp0 + b.logprob, bi, hole.with_branch(b), None))
            for score, token in cands:
                pool.append((lp0 + score, bi, hole, token))
        pool.sort(key=lambda c: -c[0])
        beams = _advance(rt, beams, pool[:n])
    for lp, ex, _ in beams:
        ex.logprob = lp
    return [ex for _, ex, _ in beams]


def _advance(rt: Runtime, beams: list[Entry], survivors: list[tuple[float, int, Hole | None, int | None]]
             ) -> list[Entry]:
    """The survivors as beams: extended by their token; a finished hole is recorded in its
    execution (in place when no other survivor shares it, else on a re-played copy)."""
    users: dict[int, int] = {}  # survivors per execution (several beams may share one)
    for _, bi, _, _ in survivors:
        users[id(beams[bi][1])] = users.get(id(beams[bi][1]), 0) + 1
    out: list[Entry] = []
    for total, bi, hole, token in survivors:
        lp, ex, _ = beams[bi]
        if hole is None:  # a finished execution
            out.append((total, ex, None))
            continue
        if token is not None:
            b = extend(rt.model, hole.branch, total - lp, token, hole.settings(rt))
            rt.model.costs.generated_tokens += 1
            hole = hole.with_branch(b)
        if hole.branch.finish is None:
            out.append((lp, ex, hole))
            continue
        req = ex.pending
        assert req is not None
        rec = record(rt, hole, req)
        for fn in req.streams:
            call_decorator(fn, rec.text, req.context)
        if users[id(ex)] == 1:  # sole survivor of this execution: advance it in place
            ex.resume(rec)
            out.append((lp + rec.logprob, ex, None))
        else:
            users[id(ex)] -= 1
            out.append((lp + rec.logprob, ex.fork(rec), None))
    return out
