"""``Vocabulary.from_hf`` reads a BPE ``tokenizers.Tokenizer`` through its API (vocab, added
tokens, decoder, pre-tokenizer) instead of serialising it to JSON: the same vocabulary.

Checked on small trained tokenizers of both BPE families (byte-level; SentencePiece style
with byte fallback and ``▁``) with special and plain added tokens, and (marked ``model``)
on the embedded Gemma 3 tokenizer when its Hugging Face folder has been converted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tether.tokens import Vocabulary
from tether.tokens.vocabulary import _hf_spec_from_api

tokenizers = pytest.importorskip("tokenizers")

CORPUS = ["The quick brown fox jumps over the lazy dog. " * 3,
          "naïve café, 東京, emoji 🙂 and tabs\tand\nnewlines", '{"a": [1, 2], "ok": true}']


def byte_level() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.add_tokens(["<tool_call>"])
    return tok


def sentencepiece_style() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    specials = ["<pad>", "<eos>", *(f"<0x{b:02X}>" for b in range(256))]
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    tok.add_special_tokens(["<end_of_turn>"])
    tok.add_tokens(["\n\n"])
    return tok


def same_vocabulary(tok: Any, tmp_path: Path) -> None:
    spec = json.loads(tok.to_str())
    fast = _hf_spec_from_api(tok)
    assert fast is not None
    assert fast["model"]["vocab"] == spec["model"]["vocab"]
    assert fast["model"]["byte_fallback"] == bool(spec["model"].get("byte_fallback"))
    assert fast["decoder"] == spec["decoder"] and fast["pre_tokenizer"] == spec["pre_tokenizer"]
    want_added = sorted((a["id"], a["content"], a["special"]) for a in spec["added_tokens"])
    assert sorted((a["id"], a["content"], a["special"]) for a in fast["added_tokens"]) == want_added
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    a, b = Vocabulary.from_hf(tok), Vocabulary.from_hf(path)  # the path is read as JSON
    assert a.tokens == b.tokens
    assert a.special_ids == b.special_ids and a.special_names == b.special_names
    assert a.eos_ids == b.eos_ids and a.fingerprint == b.fingerprint


@pytest.mark.parametrize("make", [byte_level, sentencepiece_style])
def test_api_route_equals_json_route(make: Any, tmp_path: Path) -> None:
    same_vocabulary(make(), tmp_path)


def test_other_models_use_json() -> None:
    from tokenizers import Tokenizer, models

    assert _hf_spec_from_api(Tokenizer(models.Unigram())) is None
    assert _hf_spec_from_api("not a tokenizer") is None


@pytest.mark.model
def test_embedded_tokenizer(tmp_path: Path) -> None:
    path = Path.home() / ".cache" / "tether" / "gemma3-270m-hf" / "tokenizer.json"
    if not path.exists():
        pytest.skip("the embedded model's Hugging Face folder has not been converted")
    same_vocabulary(tokenizers.Tokenizer.from_file(str(path)), tmp_path)
