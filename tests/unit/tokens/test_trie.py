"""TokenTrie layout on hand-made vocabularies (the property tests cover random ones)."""

from __future__ import annotations

import numpy as np

from tether.tokens import TokenTrie, Vocabulary


def test_layout_small() -> None:
    #           0      1      2     3     4      5      6
    tokens = [b"ab", b"a", b"", b"b", b"ab", b"abc", b"\x00"]
    v = Vocabulary.from_bytes(tokens, eos_ids=[2])
    t = TokenTrie.from_vocabulary(v)
    # preorder: root, \x00, a, ab, abc, b
    assert t.byte.tolist() == [0, 0, ord("a"), ord("b"), ord("c"), ord("b")]
    assert t.depth.tolist() == [0, 1, 1, 2, 3, 1]
    assert t.token.tolist() == [-1, 6, 1, 0, 5, 3]
    assert t.end.tolist() == [6, 2, 5, 5, 5, 6]
    assert t.dup_next[0] == 4 and t.dup_next[4] == -1
    assert t.tokens_at(t.find(b"ab")) == [0, 4]
    assert t.find(b"ac") == -1
    assert t.max_depth == 3 and t.n_nodes == 6 and t.vocab_size == 7


def test_special_and_empty_tokens_left_out() -> None:
    v = Vocabulary.from_bytes([b"x", b"y"], special_ids=[1])
    t = TokenTrie.from_vocabulary(v)
    assert t.n_nodes == 2 and t.token.tolist() == [-1, 0]


def test_empty_vocabulary() -> None:
    t = TokenTrie.from_vocabulary(Vocabulary.from_bytes([b""], eos_ids=[0]))
    assert t.n_nodes == 1 and t.end.tolist() == [1]


def test_cached_by_fingerprint() -> None:
    a = TokenTrie.from_vocabulary(Vocabulary.from_bytes([b"q", b"qq"]))
    b = TokenTrie.from_vocabulary(Vocabulary.from_bytes([b"q", b"qq"]))
    assert a is b
    assert a.byte.dtype == np.uint8 and a.end.dtype == np.int32
