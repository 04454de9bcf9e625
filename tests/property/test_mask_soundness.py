"""Soundness and completeness of engine masks on random vocabularies (Hypothesis).

* the mask equals the reference recognizer's at every step of a random walk;
* every allowed token has a completion: after it, ``shortest_completion`` finds bytes
  that the reference recognizer accepts as a whole sentence;
* the longest-match tokenization of every valid sample is allowed at every step, and
  EOS at the end.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "engine"))
from engine_reference import (  # noqa: E402
    GRAMMARS,
    greedy_tokenize,
    random_vocab,
    reference_mask,
)

from tether.engine import compile  # noqa: E402
from tether.parser import ByteParser, accepts  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402

NAMES = sorted(GRAMMARS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), seed=st.integers(0, 10**6), n=st.integers(20, 90),
       slices=st.booleans(), data=st.data())
def test_masks_sound_and_complete(name: str, seed: int, n: int, slices: bool, data) -> None:
    build, alphabet, samples = GRAMMARS[name]
    rng = random.Random(seed)
    vocab = random_vocab(alphabet + b"".join(samples), rng, n=n)
    g = build()
    cc = compile(g, vocab, slices=slices)
    m = cc.matcher()
    bp = ByteParser(g)
    out = allocate_mask(vocab.size)
    for _ in range(12):
        m.compute_mask(out)
        got = set(mask_to_ids(out).tolist())
        assert got == reference_mask(bp, vocab)
        eos = set(vocab.eos_ids)
        choices = sorted(got - eos)
        # every allowed token can be completed to a sentence
        for t in choices[:8]:
            w = m.copy()
            assert w.consume(t), w.error
            tail = w.shortest_completion()
            assert accepts(g, bytes(bp.data) + vocab.tokens[t] + tail)
        if not choices:
            break
        t = data.draw(st.sampled_from(choices))
        assert m.consume(t)
        assert bp.feed(vocab.tokens[t])


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(NAMES), seed=st.integers(0, 10**6))
def test_valid_samples_tokenized_are_allowed(name: str, seed: int) -> None:
    build, alphabet, samples = GRAMMARS[name]
    vocab = random_vocab(alphabet + b"".join(samples), random.Random(seed), n=70)
    cc = compile(build(), vocab)
    out = allocate_mask(vocab.size)
    for text in samples:
        m = cc.matcher()
        for t in greedy_tokenize(vocab, text):
            m.compute_mask(out)
            assert t in set(mask_to_ids(out).tolist()), (text, vocab.tokens[t])
            assert m.consume(t)
        assert m.is_accepting()


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NAMES), seed=st.integers(0, 10**6), data=st.data())
def test_masks_sound_and_complete_long(name: str, seed: int, data) -> None:
    test_masks_sound_and_complete.hypothesis.inner_test(name, seed, 80, True, data)
