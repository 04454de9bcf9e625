"""LexerDfa: lazy rows, terminal sets, growth, the state limit, linear-time patterns."""

from __future__ import annotations

import numpy as np
import pytest

from tether.errors import RegexLimitError
from tether.regex import (
    DEAD,
    UNKNOWN,
    LexerDfa,
    complement,
    concat,
    intersect,
    literal,
    matches,
    parse,
    repeat,
    star,
)
from tether.regex.lowering import ANY_CHAR


def test_rows_start_unknown_and_fill_lazily() -> None:
    dfa = LexerDfa([parse("[0-9]+")])
    s = dfa.start()
    assert (dfa.table[s] == UNKNOWN).all()
    dfa.fill_row(s)
    assert dfa.table[s, ord("5")] >= 0 and dfa.table[s, ord("x")] == DEAD
    assert not (dfa.table[s] == UNKNOWN).any()


def test_states_are_sets_of_terminals() -> None:
    dfa = LexerDfa([parse("if"), parse("[a-z]+"), parse("[0-9]+"), parse('"[^"]*"')])
    s = dfa.start()
    after_i = dfa.step(s, ord("i"))
    assert dfa.live(after_i) == (0, 1) and dfa.accepting(after_i) == (1,)
    after_if = dfa.step(after_i, ord("f"))
    assert dfa.accepting(after_if) == (0, 1)
    after_ifx = dfa.step(after_if, ord("x"))
    assert dfa.live(after_ifx) == (1,)
    assert dfa.step(s, ord("+")) == DEAD
    quote = dfa.run(s, b'"ab')
    assert dfa.live(quote) == (3,) and dfa.accepts[quote] == 0
    assert dfa.accepts[dfa.step(quote, ord('"'))] == 1


def test_start_with_allowed_subset_is_cached() -> None:
    dfa = LexerDfa([parse("a+"), parse("b+"), parse("[ab]")])
    s = dfa.start([1, 2])
    assert dfa.start((2, 1)) == s and dfa.live(s) == (1, 2)
    assert dfa.step(s, ord("a")) >= 0 and dfa.live(dfa.step(s, ord("a"))) == (2,)
    empty = dfa.start([])
    dfa.fill_row(empty)
    assert (dfa.table[empty] == DEAD).all() and dfa.live(empty) == ()
    with pytest.raises(IndexError):
        dfa.start([7])


def test_equal_derivative_sets_share_a_state() -> None:
    dfa = LexerDfa([parse("(ab)*")])
    s = dfa.start()
    assert dfa.run(s, b"abab") == dfa.run(s, b"ab") == s


def test_table_grows_and_accepts_follow() -> None:
    dfa = LexerDfa([parse("[a-z]{0,100}")])
    s = dfa.run(dfa.start(), b"a" * 100)
    assert dfa.n_states == 101 and dfa.table.shape[0] >= 101
    assert dfa.accepts.shape[0] == dfa.table.shape[0]
    assert dfa.accepts[s] == 1 and dfa.step(s, ord("a")) == DEAD


def test_max_states_raises_a_clear_error_instead_of_growing() -> None:
    # (a|b)*a(a|b){12}: the classic exponential DFA
    dfa = LexerDfa([parse("[ab]*a[ab]{12}")], max_states=500)
    with pytest.raises(RegexLimitError, match="more than 500 states"):
        dfa.fill_reachable()


@pytest.mark.parametrize("pattern", ["(a+)+b", "(a|aa)*c", "(a*)*b", "(x+x+)+y", "(a|a)*b"])
def test_catastrophic_backtracking_patterns_run_in_linear_time(pattern: str) -> None:
    dfa = LexerDfa([parse(pattern)])
    text = b"a" * 50_000 if "x" not in pattern else b"x" * 50_000
    s = dfa.run(dfa.start(), text)
    assert s >= 0 and dfa.accepts[s] == 0
    assert dfa.n_states <= 6  # a handful of derivative states, whatever the length
    assert matches(parse(pattern), text + (b"y" if b"x" in text[:1] else b"c" if "c" in pattern else b"b"))


def test_fill_reachable_counts_states() -> None:
    dfa = LexerDfa([parse(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")])
    n = dfa.fill_reachable()
    assert n == dfa.n_states and 5 <= n <= 20
    assert not (dfa.table[:n] == UNKNOWN).any()


def test_boolean_terminals_drop_semantically_empty_derivatives() -> None:
    # a stop-phrase lexeme: any text not containing "END", then "END"
    no_end = complement(concat(star(ANY_CHAR), literal(b"END"), star(ANY_CHAR)))
    upto_end = concat(intersect(star(ANY_CHAR), no_end), literal(b"END"))
    # a terminal whose language is empty though it is not the ∅ node
    impossible = intersect(parse("a+"), parse("b+"))
    dfa = LexerDfa([upto_end, impossible])
    s = dfa.start()
    assert dfa.live(s) == (0,)
    end = dfa.run(s, b"some text END")
    assert dfa.accepting(end) == (0,)
    assert dfa.step(end, ord("x")) == DEAD  # nothing may follow the stop phrase
    assert dfa.live(dfa.run(s, b"EN")) == (0,)


def test_max_length_by_intersection() -> None:
    short = intersect(parse("[a-z]+"), repeat(ANY_CHAR, 0, 3))
    dfa = LexerDfa([short])
    s = dfa.start()
    assert dfa.accepts[dfa.run(s, b"abc")] == 1
    assert dfa.run(s, b"abcd") == DEAD


def test_table_is_numba_friendly() -> None:
    dfa = LexerDfa([parse("x")])
    assert dfa.table.dtype == np.int32 and dfa.table.flags.c_contiguous
    assert dfa.accepts.dtype == np.int8
