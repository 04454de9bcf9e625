"""fill_mask: a hand-checked walk, the lazy-row protocol and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from tether.tokens import (
    DEAD,
    UNKNOWN,
    TokenTrie,
    Vocabulary,
    allocate_mask,
    fill_mask,
    mask_to_ids,
)


def digits_table() -> np.ndarray:
    """State 0: start, state 1: after one or more digits (an integer lexer)."""
    table = np.full((2, 256), DEAD, np.int32)
    table[0, ord("0") : ord("9") + 1] = 1
    table[1, ord("0") : ord("9") + 1] = 1
    return table


VOCAB = Vocabulary.from_bytes([b"1", b"12", b"1a", b"a", b"", b"007", b"12"], eos_ids=[4])


def test_integer_walk() -> None:
    trie = TokenTrie.from_vocabulary(VOCAB)
    mask = allocate_mask(VOCAB.size)
    fill_mask(trie, digits_table(), 0, mask)
    assert mask_to_ids(mask).tolist() == [0, 1, 5, 6]  # duplicates of "12" both set


def test_clear_false_unions() -> None:
    trie = TokenTrie.from_vocabulary(VOCAB)
    mask = allocate_mask(VOCAB.size)
    mask[0] = 1 << 3
    fill_mask(trie, digits_table(), 0, mask, clear=False)
    assert mask_to_ids(mask).tolist() == [0, 1, 3, 5, 6]


def test_dead_start_allows_nothing() -> None:
    trie = TokenTrie.from_vocabulary(VOCAB)
    mask = allocate_mask(VOCAB.size)
    fill_mask(trie, digits_table(), DEAD, mask)
    assert not mask.any()


class LazyDigits:
    """A LexerDfa-like object: rows start UNKNOWN; filling may reallocate the table."""

    def __init__(self) -> None:
        self.table = np.full((1, 256), UNKNOWN, np.int32)
        self.filled: list[int] = []

    def fill_row(self, state: int) -> None:
        full = digits_table()
        if len(self.table) < 2:
            self.table = np.vstack([self.table, np.full((1, 256), UNKNOWN, np.int32)])
        self.table[state] = full[state]
        self.filled.append(state)


def test_lazy_object_rows_filled_on_demand() -> None:
    trie = TokenTrie.from_vocabulary(VOCAB)
    dfa = LazyDigits()
    mask = allocate_mask(VOCAB.size)
    fill_mask(trie, dfa, 0, mask)
    assert mask_to_ids(mask).tolist() == [0, 1, 5, 6]
    assert sorted(dfa.filled) == [0, 1]


def test_unknown_row_without_fill_row() -> None:
    trie = TokenTrie.from_vocabulary(VOCAB)
    with pytest.raises(ValueError, match="table row of state 0 is UNKNOWN and no fill_row was given"):
        fill_mask(trie, np.full((1, 256), UNKNOWN, np.int32), 0, allocate_mask(VOCAB.size))


def test_bad_mask() -> None:
    trie = TokenTrie.from_vocabulary(VOCAB)
    with pytest.raises(ValueError, match=r"shape \(1,\) for 7 tokens; got C-contiguous uint32 of shape \(2,\)"):
        fill_mask(trie, digits_table(), 0, np.zeros(2, np.uint32))
