"""The contract names other layers build on exist and behave as documented."""

from __future__ import annotations

import numpy as np

from tether import regex as rx


def test_builders_and_matches() -> None:
    n = rx.concat(rx.literal(b"ab"), rx.star(rx.byte_set(range(0x30, 0x3A))))
    assert rx.matches(n, b"ab123") and not rx.matches(n, b"a")
    assert rx.alt(n, rx.EMPTY) is n
    assert rx.nullable(rx.star(n)) and not rx.nullable(n)
    assert rx.derivative(rx.literal(b"a"), ord("a")) is rx.EPSILON


def test_lexer_dfa_contract() -> None:
    dfa = rx.LexerDfa([rx.parse("[0-9]+"), rx.parse("[a-z]+"), rx.parse("if")])
    s = dfa.start()
    assert dfa.table.dtype == np.int32 and dfa.table.shape[1] == 256
    assert dfa.table[s, ord("i")] == rx.UNKNOWN
    s2 = dfa.step(s, ord("i"))
    assert dfa.live(s2) == (1, 2) and dfa.accepting(s2) == (1,)
    s3 = dfa.step(s2, ord("f"))
    assert dfa.accepting(s3) == (1, 2) and dfa.accepts[s3] == 1
    assert dfa.step(s, ord("!")) == rx.DEAD
    only_digits = dfa.start([0])
    assert dfa.live(only_digits) == (0,) and dfa.start({0}) == only_digits
