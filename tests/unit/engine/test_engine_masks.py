"""Engine masks equal the reference recognizer's, step by step (fixed grammars)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_reference import (  # noqa: E402
    GRAMMARS,
    greedy_tokenize,
    random_vocab,
    reference_mask,
)

from tether.engine import compile  # noqa: E402
from tether.parser import ByteParser  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402


def engine_mask(m, vocab) -> set[int]:
    out = allocate_mask(vocab.size)
    m.compute_mask(out)
    return set(mask_to_ids(out).tolist())


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("slices", [True, False])
def test_random_walk_masks_equal_reference(name: str, slices: bool) -> None:
    build, alphabet, _ = GRAMMARS[name]
    rng = random.Random(f"{name}:{slices}")
    for trial in range(4):
        vocab = random_vocab(alphabet, rng, n=50 + 10 * trial)
        cc = compile(build(), vocab, slices=slices)
        m = cc.matcher()
        bp = ByteParser(build())
        for step in range(25):
            want = reference_mask(bp, vocab)
            got = engine_mask(m, vocab)
            assert got == want, (name, trial, step, bytes(bp.data),
                                 sorted(vocab.tokens[t] for t in got ^ want))
            assert m.is_accepting() == bp.is_accepting()
            choices = sorted(want - set(vocab.eos_ids))
            if not choices:
                break
            t = rng.choice(choices)
            assert m.consume(t), m.error
            assert bp.feed(vocab.tokens[t])


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_valid_samples_allowed_at_every_step(name: str) -> None:
    build, alphabet, samples = GRAMMARS[name]
    rng = random.Random(name)
    vocab = random_vocab(alphabet + b"".join(samples), rng, n=80)
    cc = compile(build(), vocab)
    for text in samples:
        m = cc.matcher()
        out = allocate_mask(vocab.size)
        for t in greedy_tokenize(vocab, text):
            m.compute_mask(out)
            assert out[t >> 5] >> np.uint32(t & 31) & 1, (text, vocab.tokens[t])
            assert m.consume(t), m.error
        m.compute_mask(out)
        assert out[0] & 1, f"EOS not allowed after {text!r}"
        assert m.is_accepting()
        assert m.consume(0) and m.is_finished()


def test_mask_cache_gives_identical_masks() -> None:
    build, alphabet, _ = GRAMMARS["json"]
    text = b'{"ab": [1, 2, 3, {"ab": [1, 2, 3]}]}'
    vocab = random_vocab(alphabet + text, random.Random(7), n=120)
    cc = compile(build(), vocab)
    toks = greedy_tokenize(vocab, text)
    runs: list[list[object]] = [[], [], []]
    hits = []
    for sink in runs:  # a mask is stored at its key's second walk: the third run reads them
        m = cc.matcher()
        h0 = cc.stats["mask_hits"]
        for t in toks:
            sink.append(engine_mask(m, vocab))
            assert m.consume(t)
        hits.append(cc.stats["mask_hits"] - h0)
    assert runs[0] == runs[1] == runs[2]
    assert hits[2] == len(toks)
    assert hits[0] < len(toks)  # the first run walked (keys met twice in it hit the cache)


def test_bounded_string_slices_stop_at_the_characters_left() -> None:
    """Inside a ``maxLength: 4`` string body, text tokens longer than the characters left
    must not come from the slices (a 5-byte ASCII token after ``["`` is refused, a 6-byte
    token of 4 characters is allowed), at every step of the string."""
    from engine_reference import bounded_strings_grammar

    from tether.tokens.vocabulary import Vocabulary

    toks = [b"", b"<s>", *(bytes([b]) for b in b'[],"ab \\n'), b"abab", b"ababa", b"abab ",
            b"aaa", b'["', b"\xc3\xa9\xc3\xa9ab", b"\xc3", b"\xa9", b"\xc3\xa9", b"b\xc3\xa9"]
    vocab = Vocabulary.from_bytes(toks, eos_ids=[0], special_ids=[1])
    cc = compile(bounded_strings_grammar(), vocab)
    for text in (b'["', b'["a', b'["ab', b'["\xc3', b'["\xc3\xa9a', b'["ab","', b'["ab","b\xc3\xa9'):
        m = cc.matcher()
        bp = ByteParser(bounded_strings_grammar())
        for t in greedy_tokenize(vocab, text):
            assert m.consume(t), m.error
        assert bp.feed(text)
        assert engine_mask(m, vocab) == reference_mask(bp, vocab), text
    m = cc.matcher()
    assert m.consume(toks.index(b'["'))
    got = {vocab.tokens[t] for t in engine_mask(m, vocab)}
    assert b"abab" in got and b"\xc3\xa9\xc3\xa9ab" in got and b"ababa" not in got


@pytest.mark.parametrize("name", ["counted_words", "regex_counted"])
def test_far_positions_of_long_counts_share_mask_states(name: str) -> None:
    """The grammars with long counts do reach states mapped to a relaxed one (so the
    random walks above compare those masks with the reference), and a mapped state's
    masks are those of a walk from the state itself."""
    from tether.engine.walk import start_walk

    build, alphabet, samples = GRAMMARS[name]
    vocab = random_vocab(alphabet + b"".join(samples), random.Random(name), n=80)
    cc = compile(build(), vocab)
    mapped = 0
    for text in samples:
        m = cc.matcher()
        for t in greedy_tokenize(vocab, text):
            got = engine_mask(m, vocab)
            if cc.mask_state(m._ls) != m._ls:
                mapped += 1
                own = allocate_mask(vocab.size)
                with cc.lock:
                    start_walk(cc.vindex, cc.steps, m._ls, m._node, own).run()
                want = set(mask_to_ids(own).tolist()) - set(vocab.eos_ids)
                assert got - set(vocab.eos_ids) == want, (text, t)
            assert m.consume(t), m.error
    assert mapped > 0
