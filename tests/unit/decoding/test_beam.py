"""Beam search: n distinct valid sequences, sorted, equal to exhaustive search when wide."""

from __future__ import annotations

import numpy as np
import pytest
from finite_matcher import FiniteMatcher

from tether.decoding import Beam, decode
from tether.decoding.beam import beam_search
from tether.decoding.sampling import log_softmax
from tether.models.scripted import ScriptedModel

WORDS = ["yes", "no", "maybe", "nothing", "123", "12", "the", "then"]


def exhaustive(m: ScriptedModel, p: list[int], words: list[str]) -> dict[bytes, float]:
    """Best constrained score of every word over all its token paths (DFS)."""
    vocab = m.vocabulary
    best: dict[bytes, float] = {}
    mask = np.zeros((vocab.n_logits + 31) // 32, np.uint32)

    def go(fm: FiniteMatcher, seq: list[int], score: float) -> None:
        fm.compute_mask(mask)
        ids = np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.size])
        lp = log_softmax(m._compute(seq)[ids])
        for j, t in enumerate(ids):
            t = int(t)
            if t in vocab.eos_ids:
                best[fm.text] = max(best.get(fm.text, -np.inf), score + lp[j])
                continue
            c = fm.copy()
            c.consume(t)
            if c.is_finished():
                best[c.text] = max(best.get(c.text, -np.inf), score + lp[j])
            else:
                go(c, seq + [t], score + lp[j])

    go(FiniteMatcher(words, vocab), list(p), 0.0)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_wide_beam_equals_exhaustive_search(seed: int) -> None:
    m = ScriptedModel(seed=seed)
    p = m.tokenize("Q:", add_bos=True)
    ref = exhaustive(m, p, WORDS)
    # the reference scores the plain constrained distribution (stop_outside off)
    ds = beam_search(m, p, FiniteMatcher(WORDS, m.vocabulary), Beam(n=3, width=200), fast_forward=False,
                     stop_outside=False)
    expect = sorted(ref.items(), key=lambda kv: -kv[1])[:3]
    assert [d.text for d in ds] == [w for w, _ in expect]
    assert np.allclose([d.logprob for d in ds], [s for _, s in expect])


@pytest.mark.parametrize("seed", range(5))
def test_beam_returns_n_distinct_sorted_valid(seed: int) -> None:
    m = ScriptedModel(seed=seed)
    p = m.tokenize("Q:", add_bos=True)
    ds = decode(m, p, FiniteMatcher(WORDS, m.vocabulary), Beam(n=4))
    assert len(ds) == 4
    assert len({d.text for d in ds}) == 4
    assert all(d.text.decode() in WORDS and d.complete for d in ds)
    lps = [d.logprob for d in ds]
    assert lps == sorted(lps, reverse=True)


def test_beam_returns_fewer_when_language_is_small() -> None:
    m = ScriptedModel(seed=0)
    ds = decode(m, m.tokenize("Q:", add_bos=True), FiniteMatcher(["yes", "no"], m.vocabulary), Beam(n=5))
    assert sorted(d.text for d in ds) == [b"no", b"yes"]


def test_fast_forward_does_not_change_beam_scores() -> None:
    words = ["the answer is yes", "the answer is no", "the answer is maybe"]
    m = ScriptedModel(seed=6)
    p = m.tokenize("Q:", add_bos=True)
    a = decode(m, p, FiniteMatcher(words, m.vocabulary), Beam(n=3), fast_forward=False)
    b = decode(m, p, FiniteMatcher(words, m.vocabulary), Beam(n=3), fast_forward=True)
    assert sorted(d.text for d in a) == sorted(d.text for d in b)
