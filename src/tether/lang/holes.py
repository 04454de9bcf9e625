"""Decode one hole under its constraint: Final-semantics checks and Follow masking per token.

``HoleDecoder`` holds one hole's decoding state for one branch. Per step the runtime asks
for candidates in the model's order of preference; each candidate token ``t`` is checked
with Follow (``semantics.follow``): the token is masked exactly when the constraint would
evaluate to ``fin(False)`` with the value extended by ``t`` (sound, Theorem 5.1). This is
lazy masking: tokens are checked in order of probability until the decoder has what it
needs (one token for argmax, a sample for sampling — rejection sampling from the masked
distribution is the same distribution — n tokens per beam), so a step costs a handful of
checks instead of one per vocabulary entry.

Exact parts of a constraint narrow the candidates up front, without per-token checks:
``V in [...]``/``V == s`` (tokens that are prefixes of a remaining choice, found by
dictionary lookups), ``INT`` (digit tokens), ``len(TOKENS(V)) < n`` (a token budget),
``len(V) < n`` (token character lengths). Stop phrases (``STOPS_AT``/``STOPS_BEFORE``)
end the hole at the first occurrence, cutting a token that overshoots (the cut value is
what the constraint sees, so a gated stop like ``len(TOKENS(S)) > 15 and STOPS_AT(S,
".")`` does not fire early).
"""

from __future__ import annotations

import ast
import bisect
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tether.decoding.loop import _region_end
from tether.decoding.tokenize import tokens_for_bytes
from tether.errors import TetherError
from tether.lang.semantics import HoleState, Plan, evaluate, plan
from tether.tokens.bitmask import allocate_mask, mask_to_ids

END = -1  # the "end of hole" candidate (EOS, or the model choosing the text after the hole)


def engine_matchers(model: Any, patterns: list[str]) -> list[Any]:
    """Engine matchers for the hole's regular constraints (exact masks over the whole
    vocabulary); [] when the engine cannot take a pattern (then Follow checks decide)."""
    if not patterns:
        return []
    try:
        from tether.engine import compile as compile_constraint  # noqa: PLC0415
        from tether.grammar import Grammar  # noqa: PLC0415

        return [compile_constraint(Grammar.from_regex(p), model.vocabulary).matcher() for p in patterns]
    except Exception:  # noqa: BLE001 - any engine limitation: fall back to lazy checks
        return []


class VocabInfo:
    """Per-model tables the hole decoder needs, built once per model (cached on it)."""

    def __init__(self, model: Any) -> None:
        vocab = model.vocabulary
        toks: list[bytes] = list(vocab.tokens)
        self.token_bytes = toks
        self.eos = frozenset(int(e) for e in model.eos_ids)
        n = len(toks)
        self.size = n
        special = frozenset(getattr(vocab, "special_ids", frozenset()))
        self.skip = np.zeros(n, dtype=bool)  # never candidates (no bytes, not EOS)
        for i, b in enumerate(toks):
            if (not b or i in special) and i not in self.eos:
                self.skip[i] = True
        self.by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(toks):
            if b and not self.skip[i]:
                self.by_bytes.setdefault(b, []).append(i)
        self._digits: np.ndarray | None = None
        self._charlen: np.ndarray | None = None

    @staticmethod
    def of(model: Any) -> VocabInfo:
        info = getattr(model, "_tether_lang_vocab", None)
        if info is None:
            info = VocabInfo(model)
            try:
                model._tether_lang_vocab = info
            except AttributeError:
                pass
        return info

    @property
    def digit_ids(self) -> np.ndarray:
        if self._digits is None:
            pat = re.compile(rb" ?[0-9]+")
            self._digits = np.array([i for i, b in enumerate(self.token_bytes) if b and pat.fullmatch(b)], dtype=np.int64)
        return self._digits

    @property
    def char_len(self) -> np.ndarray:
        if self._charlen is None:
            self._charlen = np.array([len(b.decode("utf-8", "ignore")) if b else 0 for b in self.token_bytes], dtype=np.int32)
        return self._charlen


@dataclass
class Step:
    """An accepted candidate: token (or END), its log-probability and where it leads."""

    token: int
    logprob: float
    ends: bool
    value: str | None  # final value when ``ends``
    reason: str = ""  # why the hole ends: "eos", "stop", "budget"
    n_value: int = -1  # a stop cut the value: tokens that reach into it (-1: all of them)
    stop_text: str = ""  # a stop cut the value: the text up to the end of the stop phrase


def _decode(raw: bytes) -> str:
    """Text of ``raw`` without an incomplete UTF-8 character at its end."""
    return raw.decode("utf-8", "ignore")


def _decode_strict(raw: bytes) -> str | None:
    """Like ``_decode`` but None when ``raw`` holds invalid UTF-8 (not just an incomplete
    last character): such a value can never become text."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason == "unexpected end of data" and len(raw) - exc.start < 4:
            return raw[: exc.start].decode("utf-8", "ignore")
        return None


class HoleDecoder:
    """Decoding state of one hole in one branch (cheap to copy for beams)."""

    def __init__(self, model: Any, info: VocabInfo, prompt_tokens: list[int], name: str,
                 constraint: ast.expr | None, scope: dict[str, Any], future: frozenset[str],
                 post_text: str = "", max_tokens: int = 128, stop_on_masked: bool = True,
                 use_engine: bool = True, typed: Any | None = None) -> None:
        self.model, self.info = model, info
        self.prompt_tokens = prompt_tokens
        self.name = name
        self.constraint = constraint
        self.post_text = post_text
        self.stop_on_masked = stop_on_masked
        self.tokens: list[int] = []
        self.raw = b""
        self.state = HoleState(name, "", False, 0, scope, future - {name} - scope.keys(),
                               lambda s: model.tokenize(s, add_bos=False))
        self.plan: Plan = plan(constraint, self.state)
        self.matchers: list[Any] = engine_matchers(model, self.plan.regexes) if use_engine else []
        # a typed hole: the engine matcher of its lowered output (always first in
        # ``matchers``); it decides every token (there is no Follow fallback for a grammar)
        self.typed = typed is not None
        self.origin = typed.copy() if typed is not None else None  # re-checks a cut value
        if typed is not None:
            self.matchers.insert(0, typed)
        self.stop_outside = self.typed  # what the type forbids counts as ending (`best_steps`; the runtime's
        # ``stop_outside=False`` decoder keyword turns it off)
        self.triggers: list[bytes] = []  # triggered region (AFTER): budget closing stops at a trigger
        self.reserve = 0  # tokens kept for the constrained part while in the free region
        self.max_tokens = max_tokens if self.plan.max_tokens is None else min(max_tokens, self.plan.max_tokens)
        self.logprob = 0.0
        self.done = False
        self.value: str | None = None
        self.reason = ""
        self.checks = 0
        self.closing_len = -1  # tokens of the shortest completion when last measured; -1: never
        self.lens: list[int] = []  # characters of the decoded text after each token
        self.value_tokens = -1  # tokens of the value when a stop phrase cut it (-1: all)
        self.stop_text = ""  # the text up to the end of the stop phrase that ended the hole

    def copy(self) -> HoleDecoder:
        c = object.__new__(HoleDecoder)
        c.__dict__.update(self.__dict__)
        c.tokens = list(self.tokens)
        c.lens = list(self.lens)
        c.matchers = [m.copy() for m in self.matchers]
        return c

    @property
    def text(self) -> str:
        return _decode(self.raw)

    # -- checks -------------------------------------------------------------------------

    def typed_complete(self, text: str) -> bool:
        """``text`` is a complete value of the hole's type (True for untyped holes)."""
        if not self.typed:
            return True
        raw = text.encode()
        if not self.done and raw.startswith(self.raw):  # (a step that ends the hole is not consumed)
            if raw == self.raw:
                return bool(self.matchers[0].is_accepting())
            m = self.matchers[0].copy()  # a candidate's extension: from the current state
            return bool(m.consume_bytes(raw[len(self.raw):]) and m.is_accepting())
        assert self.origin is not None
        m = self.origin.copy()
        return bool(m.consume_bytes(raw) and m.is_accepting())

    def _typed_takes(self, token: int) -> bool:
        m = self.matchers[0]
        if not m.consume(token):
            return False
        m.rollback(1)
        return True

    def _ok(self, text: str, n_tokens: int, final: bool) -> bool:
        if final and not self.typed_complete(text):
            return False
        if self.constraint is None:
            return True
        self.checks += 1
        return not evaluate(self.constraint, self.state.extended(text, n_tokens, final)).fin_false

    def _tail_viable(self, text: str, raw: bytes) -> bool:
        """An incomplete last character under a regex: viable if the regex can take a
        character of that UTF-8 length next (checked on a representative character)."""
        from tether.lang.prefix_regex import compile_prefix  # noqa: PLC0415

        lead = raw[len(text.encode())]
        rep = "\u00e9" if lead < 0xE0 else ("\u4e00" if lead < 0xF0 else "\U0001f600")
        return all(compile_prefix(p).viable(text + rep) for p in self.plan.regexes)

    def end_allowed(self) -> bool:
        return self._ok(self.text, len(self.tokens), True)

    def check(self, token: int) -> Step | None:
        """Follow for a non-END token: None if masked, else the step it makes."""
        info = self.info
        if token in info.eos:
            return Step(END, 0.0, True, self.text, "eos") if self.end_allowed() else None
        if token < 0 or token >= info.size or info.skip[token]:
            return None
        n = len(self.tokens) + 1
        if n > self.max_tokens:
            return None
        if self.typed and not self._typed_takes(token):
            return None
        old = self.text
        raw = self.raw + info.token_bytes[token]
        new = _decode_strict(raw)
        if new is None:
            return None
        if (self.plan.regexes and not self.matchers and len(new.encode()) < len(raw)
                and not self._tail_viable(new, raw)):
            return None
        # stop phrases: the first new occurrence ends the hole if the constraint allows it
        cut_at, cut, full = None, None, ""
        for phrase, keep in self.plan.stops:
            i = new.find(phrase, max(0, len(old) - len(phrase) + 1))
            if i >= 0 and (cut_at is None or i < cut_at):
                cut_at, cut, full = i, new[: i + len(phrase)] if keep else new[:i], new[: i + len(phrase)]
        if cut is not None:
            # only the tokens that reach into the value count for TOKENS(...)
            n_cut = 0 if not cut else bisect.bisect_left([*self.lens, len(new)], len(cut)) + 1
            if self._ok(cut, n_cut, True):
                return Step(token, 0.0, True, cut, "stop", n_cut, full)
            if cut != full and self._ok(full, n, True):
                # the rest of the constraint fixed the value with the phrase (X == "Paris."):
                # STOPS_BEFORE still removes it
                return Step(token, 0.0, True, cut, "stop", n_cut, full)
        if n == self.max_tokens:  # the last token the budget allows: the value is final
            return Step(token, 0.0, True, new, "budget") if self._ok(new, n, True) else None
        if not self._ok(new, n, False):
            return None
        return Step(token, 0.0, False, None)

    def ends_by_post_text(self, token: int) -> bool:
        """The model chose a (masked) token that starts the text after the hole: end here."""
        if not self.post_text or token in self.info.eos or token >= self.info.size:
            return False
        b = self.info.token_bytes[token]
        return bool(b) and b.decode("utf-8", "ignore")[:1] == self.post_text[:1]

    # -- candidates ---------------------------------------------------------------------

    def prefilter(self) -> np.ndarray | None:
        """Token ids the exact parts of the constraint allow next (None: no narrowing).
        Always includes the EOS ids; the END decision is checked separately."""
        info, p = self.info, self.plan
        sets: list[np.ndarray] = []
        if len(self.tokens) >= self.max_tokens:
            return np.array(sorted(info.eos), dtype=np.int64)
        if p.choices is not None:
            ids: set[int] = set()
            for c in p.choices:
                cb = c.encode()
                if cb.startswith(self.raw):
                    rest = cb[len(self.raw):]
                    for k in range(1, len(rest) + 1):
                        ids.update(info.by_bytes.get(rest[:k], ()))
            sets.append(np.array(sorted(ids), dtype=np.int64))
        if p.is_int:
            d = info.digit_ids
            if self.raw:  # only the first token may carry the leading space
                d = d[[not info.token_bytes[i].startswith(b" ") for i in d]] if len(d) else d
            sets.append(d)
        if p.max_chars is not None:
            room = p.max_chars - len(self.text)
            if room < 8:
                sets.append(np.nonzero((info.char_len <= room) & (info.char_len > 0))[0].astype(np.int64))
        for m in self.matchers:  # exact masks from the engine (regex, INT, typed holes)
            mask = allocate_mask(info.size)
            m.compute_mask(mask)
            sets.append(mask_to_ids(mask).astype(np.int64))
        if not sets:
            return None
        out = sets[0]
        for s in sets[1:]:  # sorted id sets: intersect through a table (linear, no sort)
            keep = np.zeros(info.size, dtype=bool)
            keep[s] = True
            out = out[keep[out]]
        eos = np.array(sorted(info.eos), dtype=np.int64)
        at = np.searchsorted(out, eos)
        missing = eos[(at >= len(out)) | (out[np.minimum(at, max(len(out) - 1, 0))] != eos)] if len(out) else eos
        return np.insert(out, np.searchsorted(out, missing), missing) if len(missing) else out

    def ordered(self, logits: np.ndarray, allowed: np.ndarray | None) -> Iterator[int]:
        """Candidate ids, most likely first (lazy: partial sorts, growing). An allowed set
        of up to 8192 ids is sorted at once (stable: ties in id order)."""
        n = self.info.size
        if allowed is not None:
            if len(allowed) == 0:
                return
            row = logits[allowed]
            if len(allowed) <= 8192:
                for j in np.argsort(-row, kind="stable"):
                    yield int(allowed[j])
                return
        else:
            row = logits[:n]
        size = len(row)
        seen = 0
        for k in (32, 512, 8192, size):
            k = min(k, size)
            if k == size:
                idx = np.argsort(-row, kind="stable")
            else:
                part = np.argpartition(-row, k - 1)[:k]
                idx = part[np.argsort(-row[part], kind="stable")]
            for j in idx[seen:]:
                t = int(allowed[j]) if allowed is not None else int(j)
                if allowed is not None or not self.info.skip[t]:
                    yield t
            seen = k
            if k == size:
                return

    def context(self) -> list[int]:
        return self.prompt_tokens + self.tokens

    def accept(self, step: Step) -> None:
        self.logprob += step.logprob
        if step.token != END:
            if self.matchers and not step.ends:
                if not all([m.consume(step.token) for m in self.matchers]):
                    # cannot happen for checked tokens; regex matchers fall back to Follow
                    # checks, a typed hole keeps its own (check() vetted the token with it)
                    self.matchers = self.matchers[:1] if self.typed else []
            self.tokens.append(step.token)
            self.raw += self.info.token_bytes[step.token]
            self.lens.append(len(self.text))
        if step.ends:
            self.done = True
            self.value = step.value if step.value is not None else self.text
            self.value_tokens, self.stop_text = step.n_value, step.stop_text
        self.state = self.state.extended(self.text, len(self.tokens), False)

    def closing(self, token: int | None = None) -> tuple[list[int] | None, bool]:
        """Canonical tokens of the shortest text that completes the hole's regular or
        typed constraint (after ``token`` when given), and whether that text passes
        through a trigger (the hole is still in its free region). None when there is no
        single engine matcher (several regexes, or none) or no completion is found."""
        if len(self.matchers) != 1:
            return None, False
        m = self.matchers[0].copy()
        if token is not None and (token in self.info.eos or not m.consume(token)):
            return None, False
        try:
            toks = tokens_for_bytes(self.model, m.shortest_completion())
        except TetherError:  # no completion within the search limits
            return None, False
        return toks, bool(self.triggers) and _region_end(m, self.triggers) >= 0

    def closing_tokens(self, token: int | None = None) -> list[int] | None:
        return self.closing(token)[0]

    def close(self) -> bool:
        """Append the shortest completion (budget closing) if it fits the tokens left;
        True when the hole is now complete."""
        toks = self.closing_tokens()
        if toks is None or len(self.tokens) + len(toks) > self.max_tokens:
            return False
        for t in toks:
            self.accept(Step(t, 0.0, False, None))
        self.done, self.value = True, self.text
        return True

    def close_to_trigger(self) -> bool:
        """In a triggered hole's free region: append the shortest completion up to the end
        of its trigger (when the whole completion still fits and room is left after the
        trigger), so the model writes the constrained part in the tokens kept for it.
        True when it did; the hole goes on."""
        if not self.triggers or len(self.matchers) != 1:
            return False
        m = self.matchers[0]
        end = _region_end(m, self.triggers)
        if end <= 0:
            return False
        try:
            text = m.shortest_completion()
        except TetherError:
            return False
        head, rest = tokens_for_bytes(self.model, text[:end]), tokens_for_bytes(self.model, text[end:])
        if len(self.tokens) + len(head) + len(rest) > self.max_tokens or len(self.tokens) + len(head) >= self.max_tokens:
            return False
        for t in head:
            self.accept(Step(t, 0.0, False, None))
        self.closing_len = -1  # measure again in the constrained part
        return True

    def finish_forced(self) -> None:
        """No token is allowed (or the budget ran out): end with the value so far."""
        self.done = True
        self.value = self.text


def log_softmax(logits: np.ndarray, n: int, temperature: float = 1.0) -> np.ndarray:
    row = logits[:n].astype(np.float64) / max(temperature, 1e-6)
    m = row.max()
    return row - (m + math.log(np.exp(row - m).sum()))


class _LazyLogprob:
    """``log_softmax(logits)[t]`` for the few tokens asked (one log-sum-exp, float32)."""

    def __init__(self, logits: np.ndarray, n: int) -> None:
        row = logits[:n]
        m = float(row.max())
        self.row = row
        self.lse = m + math.log(float(np.exp(row - m, dtype=np.float32).sum(dtype=np.float64)))

    def __getitem__(self, t: int) -> float:
        return float(self.row[t]) - self.lse


def _end_wish(dec: HoleDecoder, t: int) -> bool:
    """The model's own choice ``t`` is masked: does it mean "end the hole here"?

    With ``stop_on_masked`` (default) any masked first choice ends the hole when ending
    is allowed (a base model that wants to leave an ``INT`` or a finished choice ends it
    instead of being pushed into more digits); otherwise only a token starting the text
    that follows the hole does.
    """
    return dec.stop_on_masked or dec.stop_outside or dec.ends_by_post_text(t)


def _steps_outside(dec: HoleDecoder, logits: np.ndarray, k: int, limit: int) -> list[Step]:
    """`best_steps` of a typed hole: where its value is complete, END scores the model's
    probability of EOS plus that of every token the type forbids there (a model that
    wants to leave the type means the value has ended: ``int`` after ``"A:"`` ends after
    the digits the model means, not at its digit bound). Tokens are scored as they are."""
    info = dec.info
    lp = log_softmax(logits, info.size)
    allowed = dec.prefilter()
    out: list[Step] = []
    looked = 0
    for t in dec.ordered(logits, allowed):
        if t in info.eos:
            continue
        looked += 1
        s = dec.check(t)
        if s is not None:
            s.logprob = float(lp[t])
            out.append(s)
        if len(out) >= k or looked >= limit:
            break
    if dec.end_allowed():
        outside = ~info.skip
        if allowed is not None:
            outside[allowed] = False
        outside[list(info.eos)] = True
        row = lp[outside]
        top = float(row.max()) if row.size else -math.inf
        end_lp = top + math.log(float(np.exp(row - top).sum())) if math.isfinite(top) else -math.inf
        out.append(Step(END, end_lp, True, dec.text, "eos"))
        out.sort(key=lambda s: -s.logprob)
    return out[:k]


def best_steps(dec: HoleDecoder, logits: np.ndarray, k: int, limit: int = 20000) -> list[Step]:
    """The ``k`` most likely allowed steps (END included), by raw model log-probability
    (a typed hole: `_steps_outside`)."""
    if dec.stop_outside:
        return _steps_outside(dec, logits, k, limit)
    lp = _LazyLogprob(logits, dec.info.size)
    out: list[Step] = []
    end_ok: bool | None = None

    def add_end(t: int) -> None:
        nonlocal end_ok
        if any(s.token == END for s in out):
            return
        if end_ok is None:
            end_ok = dec.end_allowed()
        if end_ok:
            out.append(Step(END, float(lp[t]), True, dec.text, "eos"))

    top = int(np.argmax(np.where(dec.info.skip, -np.inf, logits[: dec.info.size])))
    if top in dec.info.eos:
        add_end(top)
    else:
        s = dec.check(top)
        if s is not None:
            s.logprob = float(lp[top])
            out.append(s)
        elif _end_wish(dec, top):
            add_end(top)
    if len(out) >= k:
        return out
    looked = 0
    for t in dec.ordered(logits, dec.prefilter()):
        if t == top:
            continue
        looked += 1
        if t in dec.info.eos:
            add_end(t)
        else:
            s = dec.check(t)
            if s is not None:
                s.logprob = float(lp[t])
                out.append(s)
            elif dec.ends_by_post_text(t):
                add_end(t)
        if len(out) >= k or looked >= limit:
            break
    return out


def sample_step(dec: HoleDecoder, logits: np.ndarray, rng: np.random.Generator,
                temperature: float = 1.0, limit: int = 5000) -> Step | None:
    """Sample from the masked distribution by rejection (equal in distribution): draw from
    the model, re-draw while the token is masked."""
    n = dec.info.size
    lp_t = log_softmax(logits, n, temperature)
    base_lp = log_softmax(logits, n)
    end_ok: bool | None = None

    def end_step(t: int) -> Step | None:
        nonlocal end_ok
        if end_ok is None:
            end_ok = dec.end_allowed()
        return Step(END, float(base_lp[t]), True, dec.text, "eos") if end_ok else None

    # the model's own (unconstrained) draw first
    full = np.exp(np.where(dec.info.skip, -np.inf, lp_t))
    t = int(rng.choice(n, p=full / full.sum()))
    if t in dec.info.eos:
        st = end_step(t)
        if st is not None:
            return st
    else:
        s = dec.check(t)
        if s is not None:
            s.logprob = float(base_lp[t])
            return s
        if _end_wish(dec, t):
            st = end_step(t)
            if st is not None:
                return st
    allowed = dec.prefilter()
    ids = allowed if allowed is not None else np.nonzero(~dec.info.skip)[0]
    p = np.exp(lp_t[ids] - lp_t[ids].max())
    for _ in range(limit):
        tot = p.sum()
        if tot <= 0:
            return None
        j = int(rng.choice(len(ids), p=p / tot))
        t = int(ids[j])
        if t in dec.info.eos:
            st = end_step(t)
            if st is not None:
                return st
        else:
            s = dec.check(t)
            if s is not None:
                s.logprob = float(base_lp[t])
                return s
            if dec.ends_by_post_text(t):
                st = end_step(t)
                if st is not None:
                    return st
        p[j] = 0.0
    steps = best_steps(dec, logits, 1)
    return steps[0] if steps else None


def argmax_step(dec: HoleDecoder, logits: np.ndarray) -> Step | None:
    steps = best_steps(dec, logits, 1)
    return steps[0] if steps else None


def score_text(model: Any, prompt_tokens: Sequence[int], cont_tokens: Sequence[int]) -> float:
    """Sum of log-probabilities of ``cont_tokens`` after ``prompt_tokens``."""
    info = VocabInfo.of(model)
    total = 0.0
    ctx = list(prompt_tokens)
    for t in cont_tokens:
        lg = np.asarray(model.logits(ctx))
        total += float(log_softmax(lg, info.size)[t])
        ctx.append(int(t))
    return total
