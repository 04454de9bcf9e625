"""`ScriptedModel`: a deterministic model over a small vocabulary, for tests.

Logits are a pure function of the token sequence, so every decoder's result is
reproducible and checkable by hand:

* by default a pseudo-random score per (sequence, token) from a hash (stable across
  runs and platforms);
* ``target``: tokens that continue the text toward ``target`` get a large bonus
  (longer continuations more), so argmax writes ``target`` with the longest tokens;
* ``script``: any ``Callable[[list[int]], array]`` of your own.

Tokenization is greedy longest-match over the vocabulary (with BOS when asked). It
counts `Costs` as a real backend does: one model call per ``logits``, evaluated tokens
after reuse of the common prefix with the previous call. It also offers
``logits_rows`` (selective logits: the same numbers, computed for some rows only) and
``logits_batch``, so the decoders' paths for both can be tested. ``n_ctx`` (default
None: unbounded) makes it raise `ContextLengthError` like a real backend.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from tether.models.base import Costs, ModelIdioms, check_tokens
from tether.tokens import Vocabulary

DEFAULT_TOKENS = (
    ["<bos>", "<eos>"]
    + [chr(c) for c in range(32, 127)]
    + ["\n", "th", "the", "The", " the", "he", "ing", " a", "an", "and", " is", "is", "url", " url",
       "http", "https", "://", "s://", "ht", "tp", "www", ".com", "yes", "no", "true", "false",
       "{\"", "\":", "\": ", ", \"", "\"}", "name", "age", "null", "12", "123", "00", "ab", "abc",
       "  ", " \"", "\",", "é"]
)


class ScriptedModel(ModelIdioms):
    """Deterministic logits over ``tokens`` (strings or bytes; ``<bos>``/``<eos>`` special)."""

    def __init__(
        self,
        tokens: Sequence[str | bytes] = DEFAULT_TOKENS,
        *,
        target: str | bytes | None = None,
        script: Callable[[list[int]], NDArray[np.float32]] | None = None,
        seed: int = 0,
        name: str = "scripted",
        selective_threshold: int = 16,
        n_ctx: int | None = None,
    ) -> None:
        raw = [t.encode() if isinstance(t, str) else bytes(t) for t in tokens]
        specials = {i for i, t in enumerate(raw) if t in (b"<bos>", b"<eos>", b"<pad>")}
        self._text_of_special = {i: raw[i].decode() for i in specials}
        eos = [i for i in specials if raw[i] == b"<eos>"]
        bos = [i for i in specials if raw[i] == b"<bos>"]
        self.vocabulary = Vocabulary.from_bytes(
            [b"" if i in specials else t for i, t in enumerate(raw)],
            eos_ids=eos, bos_id=bos[0] if bos else None, name=name,
        )
        self.costs = Costs()
        self.name = name
        #: the context window (None: unbounded); longer sequences raise ContextLengthError
        self.n_ctx = n_ctx
        self.target = target.encode() if isinstance(target, str) else target
        self.script = script
        self.seed = seed
        self.selective_threshold = selective_threshold
        self._last: list[int] = []
        self._table: dict[bytes, int] | None = None
        self.calls_log: list[int] = []  # number of tokens evaluated per call, for tests
        #: a Jinja chat template (None: none; `apply_chat_template` then renders turns)
        self.chat_template: str | None = None

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self.vocabulary.eos_ids

    # --- tokenizer ----------------------------------------------------------------------
    def tokenize(self, text: str, *, add_bos: bool = False, special: bool = False) -> list[int]:
        """Greedy longest match over the vocabulary (raises ValueError for a byte no token has)."""
        if self._table is None:
            self._table = {}
            for i, piece in enumerate(self.vocabulary.tokens):
                if piece and piece not in self._table:
                    self._table[piece] = i
        table, longest = self._table, max(len(piece) for piece in self._table)
        out = [self.vocabulary.bos_id] if add_bos and self.vocabulary.bos_id is not None else []
        data, i = text.encode(), 0
        while i < len(data):
            for k in range(min(longest, len(data) - i), 0, -1):
                t = table.get(data[i : i + k])
                if t is not None:
                    out.append(t)
                    i += k
                    break
            else:
                raise ValueError(f"no token of the scripted vocabulary covers byte {data[i]:#04x}")
        return out

    def detokenize(self, tokens: Sequence[int]) -> bytes:
        return self.vocabulary.decode(tokens)

    # --- scores -------------------------------------------------------------------------
    def _compute(self, tokens: list[int]) -> NDArray[np.float32]:
        v = self.vocabulary
        if self.script is not None:
            return np.asarray(self.script(tokens), dtype=np.float32)
        h = zlib.crc32(np.asarray(tokens, dtype=np.int64).tobytes(), self.seed)
        logits = np.random.default_rng(h).standard_normal(v.n_logits).astype(np.float32)
        if self.target is not None:
            text = v.decode(t for t in tokens if t != v.bos_id)
            # the part of the target still to write, if the text so far is on track
            for k in range(len(text), -1, -1):  # longest suffix of text that starts target
                if self.target.startswith(text[len(text) - k :]):
                    rest = self.target[k:]
                    break
            if rest:
                for i, t in enumerate(v.tokens):
                    if t and rest.startswith(t):
                        logits[i] += 10.0 + len(t)
            elif v.eos_ids:
                logits[v.eos_ids[0]] += 20.0
        return logits

    def _account(self, tokens: list[int]) -> None:
        common = 0
        for a, b in zip(self._last, tokens, strict=False):
            if a != b:
                break
            common += 1
        if common == len(tokens) and tokens:
            common -= 1  # a call always evaluates at least one token
        self.costs.model_calls += 1
        self.costs.evaluated_tokens += len(tokens) - common
        self.calls_log.append(len(tokens) - common)
        self._last = list(tokens)

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]:
        toks = check_tokens(tokens, self.vocabulary.n_logits, self.n_ctx)
        self._account(toks)
        return self._compute(toks)

    def logits_rows(self, tokens: Sequence[int], ids: NDArray[np.int64]) -> NDArray[np.float32]:
        """Selective logits: the same values as ``logits(tokens)[ids]``."""
        toks = check_tokens(tokens, self.vocabulary.n_logits, self.n_ctx)
        self._account(toks)
        return self._compute(toks)[np.asarray(ids)]

    def logits_batch(self, seqs: Sequence[Sequence[int]]) -> NDArray[np.float32]:
        """Logits for several sequences in one (counted) call."""
        checked = [check_tokens(s, self.vocabulary.n_logits, self.n_ctx) for s in seqs]
        rows = [self._compute(s) for s in checked]
        self.costs.model_calls += 1
        self.costs.evaluated_tokens += sum(len(s) for s in checked)
        self.calls_log.append(sum(len(s) for s in checked))
        return np.stack(rows)

    def apply_chat_template(self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
        """A fixed, documented template (tests): ``<role>: content\\n`` per message."""
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text + ("assistant: " if add_generation_prompt else "")
