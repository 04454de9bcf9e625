"""One hole's constraint as a lazy matcher: Final-semantics checks and Follow masking per token.

``HoleMatcher`` is the hole's constraint in the form `tether.decoding` steps through (a
`tether.decoding.lazy.LazyMatcher`): the decoding loop, its decoders, token healing,
fast-forward, selective logits, budget closing and cost accounting are the ones
``generate`` uses. Each candidate token ``t`` is checked with Follow
(``semantics.follow``): the token is masked exactly when the constraint would evaluate to
``fin(False)`` with the value extended by ``t`` (sound, Theorem 5.1). Masking is lazy: the
decoders test candidates in their order of preference until they have what they need (one
token for argmax, a draw for sampling, the best few for a beam), so a step costs a handful
of checks instead of one per vocabulary entry.

Exact parts of a constraint narrow the candidates up front (``candidates``), without
per-token checks: ``V in [...]``/``V == s`` (tokens that are prefixes of a remaining
choice, found by dictionary lookups), ``INT`` (digit tokens), ``len(V) < n`` (token
character lengths), and the engine masks of ``REGEX``/``INT`` and of a typed hole's
output. ``len(TOKENS(V)) < n`` is a token budget: the last token it allows makes the value
final. Stop phrases (``STOPS_AT``/``STOPS_BEFORE``) end the hole at the first occurrence,
cutting a token that overshoots (the cut value is what the constraint sees, so a gated
stop like ``len(TOKENS(S)) > 15 and STOPS_AT(S, ".")`` does not fire early). A single
engine matcher (a typed hole, one ``REGEX``/``INT``) also gives the forced tokens
(fast-forward) and the shortest completion (budget closing).
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.errors import ConstraintError
from tether.lang.semantics import HoleState, Plan, evaluate, plan
from tether.tokens.bitmask import allocate_mask, mask_to_ids


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
    """An accepted token's effect: its text, whether it ends the hole, and how."""

    data: bytes
    ends: bool
    value: str | None  # final value when ``ends``
    reason: str = ""  # why the hole ends: "stop", "budget"
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


class HoleMatcher:
    """Decoding state of one hole in one branch (a lazy matcher; cheap to copy for beams)."""

    def __init__(self, model: Any, info: VocabInfo, name: str, constraint: ast.expr | None, scope: dict[str, Any],
                 future: frozenset[str], max_tokens: int = 128, use_engine: bool = True,
                 typed: Any | None = None) -> None:
        self.info = info
        self.name = name
        self.constraint = constraint
        self.n = 0  # tokens of the value so far
        self.redo = 0  # tokens that only redid text token healing removed from the prompt
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
        self.max_tokens = max_tokens if self.plan.max_tokens is None else min(max_tokens, self.plan.max_tokens)
        self.done = False
        self.value: str | None = None
        self.reason = ""  # why the hole ended by itself: "eos", "stop", "budget"
        self.checks = 0
        self.lens: list[int] = []  # characters of the decoded text after each token
        self.value_tokens = -1  # tokens of the value when a stop phrase cut it (-1: all)
        self.stop_text = ""  # the text up to the end of the stop phrase that ended the hole
        self.error: str | None = None
        self._seen: dict[Any, Step | None] = {}  # checks made in the current state
        self._end: bool | None = None

    def copy(self) -> HoleMatcher:
        c = object.__new__(HoleMatcher)
        c.__dict__.update(self.__dict__)
        c.lens = list(self.lens)
        c.matchers = [m.copy() for m in self.matchers]
        c._seen = dict(self._seen)
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
        if not self.done and raw.startswith(self.raw):
            if raw == self.raw:
                return bool(self.matchers[0].is_accepting())
            m = self.matchers[0].copy()  # a candidate's extension: from the current state
            return bool(m.consume_bytes(raw[len(self.raw):]) and m.is_accepting())
        assert self.origin is not None
        m = self.origin.copy()
        return bool(m.consume_bytes(raw) and m.is_accepting())

    def _typed_takes(self, data: bytes, token: int | None) -> bool:
        """The typed matcher takes the token (no copy: consume, then roll back)."""
        m = self.matchers[0]
        if not data:
            return True
        if not (m.consume(token) if token is not None else m.consume_bytes(data)):
            return False
        m.rollback(1)
        return True

    def _ok(self, text: str, n_tokens: int, final: bool, typed: bool = True) -> bool:
        if final and typed and not self.typed_complete(text):
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
        """The value as it is may be final (EOS allowed)."""
        if self._end is None:
            self._end = self._ok(self.text, self.n, True)
        return self._end

    def _check(self, data: bytes, token: int | None) -> Step | None:
        """Follow for a token whose text is ``data``: None if masked, else the step it makes."""
        key = token if token is not None else data
        if key in self._seen:
            return self._seen[key]
        step = self._follow(data, token)
        self._seen[key] = step
        return step

    def _follow(self, data: bytes, token: int | None) -> Step | None:
        if self.done:
            return None
        if not data and token is None:  # a token that only redoes healed prompt text
            return Step(b"", False, None)
        n = self.n + 1
        if n > self.max_tokens:
            return None
        if self.typed and not self._typed_takes(data, token):
            return None
        old = self.text
        raw = self.raw + data
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
                return Step(data, True, cut, "stop", n_cut, full)
            if cut != full and self._ok(full, n, True):
                # the rest of the constraint fixed the value with the phrase (X == "Paris."):
                # STOPS_BEFORE still removes it
                return Step(data, True, cut, "stop", n_cut, full)
        if n == self.max_tokens:
            # the last token the budget allows: the value is final (a typed value may be
            # cut there, as generate cuts it: not satisfied, no value; budget closing,
            # on by default, closes it validly before)
            return Step(data, True, new, "budget") if self._ok(new, n, True, typed=False) else None
        if not self._ok(new, n, False):
            return None
        return Step(data, False, None)

    # -- the lazy matcher (tether.decoding.lazy.LazyMatcher) ------------------------------

    def candidates(self) -> NDArray[np.int64] | None:
        """Token ids the exact parts of the constraint allow next, EOS where the value may
        end (None: no narrowing, every ordinary token and EOS)."""
        info, p = self.info, self.plan
        eos = np.array(sorted(info.eos), dtype=np.int64) if self.end_allowed() else np.zeros(0, dtype=np.int64)
        if self.done or self.n >= self.max_tokens:
            return eos
        sets: list[np.ndarray] = []
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
        keep = np.ones(len(out), dtype=bool)
        keep[info.skip[out]] = False
        keep[np.isin(out, list(info.eos))] = False
        out = out[keep]
        return np.union1d(out, eos).astype(np.int64) if len(eos) else out

    def accepts(self, token: int) -> bool:
        if token in self.info.eos:
            return self.is_accepting()
        if token < 0 or token >= self.info.size or self.info.skip[token]:
            return False
        return self._check(self.info.token_bytes[token], token) is not None

    def accepts_bytes(self, data: bytes) -> bool:
        return self._check(bytes(data), None) is not None

    def is_accepting(self) -> bool:
        return self.done or self.end_allowed()

    def is_finished(self) -> bool:
        return self.done

    def consume(self, token: int) -> bool:
        if token in self.info.eos:
            if not self.is_accepting():
                self.error = "the value is not complete under the constraint"
                return False
            if not self.done:
                self._finish(self.text, "eos")
            return True
        if not self.accepts(token):
            self.error = f"token {token} is masked by the constraint of hole [{self.name}]"
            return False
        return self._apply(self._seen[token], token)  # type: ignore[arg-type]

    def consume_bytes(self, data: bytes) -> bool:
        step = self._check(bytes(data), None)
        if step is None:
            self.error = f"text {bytes(data)!r} is masked by the constraint of hole [{self.name}]"
            return False
        return self._apply(step, None)

    def _apply(self, step: Step, token: int | None) -> bool:
        if self.matchers and not step.ends:
            ok = [m.consume(token) if token is not None else m.consume_bytes(step.data) for m in self.matchers]
            if not all(ok):
                # cannot happen for checked tokens; regex matchers fall back to Follow
                # checks, a typed hole keeps its own (the check vetted the token with it)
                self.matchers = self.matchers[:1] if self.typed else []
        if not step.data and token is None:  # (healing) not a token of the value
            self.redo += 1
            self._seen, self._end = {}, None
            return True
        self.n += 1
        self.raw += step.data
        self.lens.append(len(self.text))
        self._seen, self._end = {}, None
        if step.ends:
            self._finish(step.value if step.value is not None else self.text, step.reason)
            self.value_tokens, self.stop_text = step.n_value, step.stop_text
        self.state = self.state.extended(self.text, self.n, False)
        return True

    def _finish(self, value: str, reason: str) -> None:
        self.done, self.value, self.reason = True, value, reason
        self._seen = {}

    def fast_forward(self) -> list[int]:
        """Tokens a single engine matcher forces next (each checked with Follow on a copy;
        a token that would end the hole is left to the decoder)."""
        if self.done or len(self.matchers) != 1:
            return []
        forced = list(self.matchers[0].fast_forward())
        if not forced:
            return []
        probe, out = self.copy(), []
        for t in forced:
            step = probe._check(self.info.token_bytes[t], t)
            if step is None or step.ends:
                break
            probe._apply(step, t)
            out.append(t)
        return out

    def shortest_completion(self) -> bytes:
        """The shortest text completing a single engine matcher (budget closing); a hole
        with none (free text, several regexes) has no completion to close with."""
        if len(self.matchers) != 1:
            raise ConstraintError(f"hole [{self.name}] has no single regular constraint to close it with")
        return self.matchers[0].shortest_completion()  # type: ignore[no-any-return]
