"""Byte-level BPE (GPT-2 byte map): every token's bytes equal the tokenizer's own decode."""

from __future__ import annotations

import pytest

from tether.tokens import Vocabulary

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "naïve café, 東京, Ελληνικά, emoji 🙂🚀 and tabs\tand\nnewlines",
    '{"name": "tether", "version": [0, 1, 0], "ok": true}',
    "def f(x):\n    return x ** 2  # square\n",
    "\x00\x01\x7f byte soup \xff",
]


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.add_tokens(["<tool_call>"])  # a non-special added token: its text, as is
    return tok


def test_every_token_matches_decode(tokenizer) -> None:  # type: ignore[no-untyped-def]
    v = Vocabulary.from_hf(tokenizer)
    assert v.size == tokenizer.get_vocab_size(with_added_tokens=True)
    specials = {tokenizer.token_to_id("<|endoftext|>"), tokenizer.token_to_id("<|pad|>")}
    assert v.eos_ids == (tokenizer.token_to_id("<|endoftext|>"),)
    assert specials <= v.special_ids
    checked = 0
    for i in range(v.size):
        if i in specials:
            assert v.tokens[i] == b""
            continue
        # decode() returns str: a token that is part of a UTF-8 character decodes to
        # U+FFFD, so compare through the byte-level alphabet for those
        text = tokenizer.decode([i], skip_special_tokens=False)
        if "\ufffd" in text:
            piece = tokenizer.id_to_token(i)
            assert v.tokens[i] == bytes(_byte_map()[c] for c in piece)
        else:
            assert v.tokens[i] == text.encode(), (i, tokenizer.id_to_token(i))
        checked += 1
    assert checked == v.size - len(specials) > 300
    assert {t for t in v.tokens if len(t) == 1} == {bytes([b]) for b in range(256)}


def test_encode_round_trip(tokenizer) -> None:  # type: ignore[no-untyped-def]
    v = Vocabulary.from_hf(tokenizer)
    for text in [*CORPUS, "unseen wörds ☃ <tool_call> x"]:
        ids = tokenizer.encode(text).ids
        assert v.decode(ids) == text.encode()


def _byte_map() -> dict[str, int]:
    # GPT-2's bytes_to_unicode, inverted, written out independently of tether's copy
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}
