"""Vocabulary constructors: exact bytes, EOS/special ids, padding, fingerprint, errors."""

from __future__ import annotations

import base64
import json

import pytest

from tether.errors import VocabularyError
from tether.tokens import Vocabulary


def test_from_bytes_basics() -> None:
    v = Vocabulary.from_bytes([b"<s>", b"a", b"", b"ab"], eos_ids=[0], n_logits=8)
    assert v.size == len(v) == 4 and v.n_logits == 8
    assert v.eos_ids == (0,)
    assert v.special_ids == frozenset({0, 2})  # EOS and the empty token
    assert v.token_bytes(3) == b"ab"
    assert v.decode([1, 3, 2]) == b"aab"


def test_padding_smaller_than_size_raises() -> None:
    with pytest.raises(VocabularyError, match=r"n_logits \(2\) is smaller than the vocabulary size \(3\)"):
        Vocabulary.from_bytes([b"a", b"b", b"c"], n_logits=2)


def test_eos_outside_vocabulary_raises() -> None:
    with pytest.raises(VocabularyError, match="eos id 5 is outside the vocabulary"):
        Vocabulary.from_bytes([b"a"], eos_ids=[5])


def test_fingerprint_tracks_bytes_and_ids() -> None:
    a = Vocabulary.from_bytes([b"a", b"b"])
    assert a.fingerprint == Vocabulary.from_bytes([b"a", b"b"]).fingerprint
    assert a == Vocabulary.from_bytes([b"a", b"b"])
    others = [
        Vocabulary.from_bytes([b"a", b"c"]),
        Vocabulary.from_bytes([b"ab", b""]),  # same concatenation, other split
        Vocabulary.from_bytes([b"a", b"b"], eos_ids=[1]),
        Vocabulary.from_bytes([b"a", b"b"], n_logits=3),
    ]
    assert len({a.fingerprint, *(o.fingerprint for o in others)}) == 5


def test_special_id_lookup() -> None:
    v = Vocabulary([b"", b"x"], special_ids=[0], special_names={0: "<eos>"})
    assert v.special_id("<eos>") == 0
    with pytest.raises(KeyError, match="no special token '<bos>'"):
        v.special_id("<bos>")


def test_tiktoken_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    ranks = {b"a": 0, b"b": 1, b"ab": 2, b"\xff\x00": 4}  # id 3 is a gap
    path = tmp_path / "tiny.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    v = Vocabulary.from_tiktoken(path, special_tokens={"<|endoftext|>": 5})
    assert v.tokens == [b"a", b"b", b"ab", b"", b"\xff\x00", b""]
    assert v.eos_ids == (5,)
    assert v.special_ids == frozenset({3, 5})
    assert v.special_names[5] == "<|endoftext|>"
    assert Vocabulary.from_tiktoken(ranks).tokens[:3] == [b"a", b"b", b"ab"]


def test_tiktoken_bad_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.tiktoken"
    path.write_text("YQ== 0\nnot-a-line\n")
    with pytest.raises(VocabularyError, match=r"bad.tiktoken:2: expected '<base64 token> <rank>'"):
        Vocabulary.from_tiktoken(path)


_FLAGS = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}


def _sentencepiece_json() -> dict:  # type: ignore[type-arg]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xE2>": 4, "▁hello": 5, "▁": 6,
             "world": 7, "▁▁": 8}
    return {
        "version": "1.0",
        "added_tokens": [
            {"id": 0, "content": "<unk>", "special": True, **_FLAGS},
            {"id": 1, "content": "<s>", "special": True, **_FLAGS},
            {"id": 2, "content": "</s>", "special": True, **_FLAGS},
            {"id": 9, "content": "<tool>", "special": False, **_FLAGS},
        ],
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ",
                                                         "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "vocab": vocab, "merges": [], "byte_fallback": True,
                  "unk_token": "<unk>"},
    }


def test_hf_sentencepiece_style(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_sentencepiece_json()))
    v = Vocabulary.from_hf(path)
    assert v.tokens == [b"", b"", b"", b"\n", b"\xe2", b" hello", b" ", b"world", b"  ", b"<tool>"]
    assert v.eos_ids == (2,)
    assert {0, 1, 2} <= v.special_ids and 9 not in v.special_ids


def test_hf_tokenizer_object_matches_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_sentencepiece_json()))
    tok = tokenizers.Tokenizer.from_file(str(path))
    assert Vocabulary.from_hf(tok).tokens == Vocabulary.from_hf(path).tokens


def test_hf_unknown_decoder_raises(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = _sentencepiece_json()
    spec["decoder"] = {"type": "CTC"}
    spec["model"]["byte_fallback"] = False
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(VocabularyError, match=r"decoder \['CTC'\] cannot be mapped to bytes"):
        Vocabulary.from_hf(path)


def test_hf_wordpiece_raises(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = {"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "run": 1, "##ning": 2}},
            "decoder": {"type": "WordPiece", "prefix": "##"}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(VocabularyError, match="WordPiece tokenizers .* have no exact bytes"):
        Vocabulary.from_hf(path)


def test_gguf_not_gguf(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.gguf"
    path.write_bytes(b"NOPE" + bytes(40))
    with pytest.raises(VocabularyError, match="is not a GGUF file"):
        Vocabulary.from_gguf(path)


def test_gguf_written_with_gguf_package(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A tiny SentencePiece-style GGUF written by the ``gguf`` package reads back exactly."""
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    texts = ["<pad>", "<eos>", "<0x0A>", "▁the", "a▁b", "\n\n", "</s>"]
    types = [3, 3, 6, 1, 1, 4, 1]
    w.add_tokenizer_model("llama")
    w.add_token_list(texts)
    w.add_token_types(types)
    w.add_eos_token_id(1)
    w.add_bos_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    v = Vocabulary.from_gguf(path, n_logits=8)
    # "</s>" is an end-of-generation text: llama.cpp makes it a control token
    assert v.tokens == [b"", b"", b"\n", b" the", b"a b", b"\n\n", b""]
    assert v.eos_ids == (1, 6) and v.special_ids == frozenset({0, 1, 6})
    assert v.bos_id == 0 and v.n_logits == 8
    assert v.special_names[1] == "<eos>"
