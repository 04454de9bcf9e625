"""Byte-level exactness: code point sets compile to exactly their UTF-8 encodings."""

from __future__ import annotations

import itertools

import pytest

from tether.regex import DEAD, LexerDfa, is_equivalent, parse
from tether.regex import charset as cs
from tether.regex.ast import alt, byte_range, concat


def _accepts_all(dfa: LexerDfa, data: bytes) -> bool:
    s = dfa.run(dfa.start(), data)
    return s >= 0 and dfa.accepts[s] == 1


def _one_code_point(data: bytes) -> bool:
    try:
        return len(data.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


def test_dot_dotall_accepts_exactly_one_encoded_code_point_up_to_two_bytes() -> None:
    dfa = LexerDfa([parse("(?s).")])
    for n in (1, 2):
        for data in itertools.product(range(256), repeat=n):
            d = bytes(data)
            assert _accepts_all(dfa, d) == _one_code_point(d), d


def test_dot_dotall_three_and_four_bytes_on_boundary_values() -> None:
    dfa = LexerDfa([parse("(?s).")])
    edges = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC1, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5]
    for n in (3, 4):
        for data in itertools.product(edges, repeat=n):
            d = bytes(data)
            assert _accepts_all(dfa, d) == _one_code_point(d), d


def _table_3_7() -> object:
    """Well-formed UTF-8 byte sequences, as listed in the Unicode Standard, Table 3-7."""
    r = byte_range
    return alt(
        r(0x00, 0x7F),
        concat(r(0xC2, 0xDF), r(0x80, 0xBF)),
        concat(r(0xE0, 0xE0), r(0xA0, 0xBF), r(0x80, 0xBF)),
        concat(r(0xE1, 0xEC), r(0x80, 0xBF), r(0x80, 0xBF)),
        concat(r(0xED, 0xED), r(0x80, 0x9F), r(0x80, 0xBF)),
        concat(r(0xEE, 0xEF), r(0x80, 0xBF), r(0x80, 0xBF)),
        concat(r(0xF0, 0xF0), r(0x90, 0xBF), r(0x80, 0xBF), r(0x80, 0xBF)),
        concat(r(0xF1, 0xF3), r(0x80, 0xBF), r(0x80, 0xBF), r(0x80, 0xBF)),
        concat(r(0xF4, 0xF4), r(0x80, 0x8F), r(0x80, 0xBF), r(0x80, 0xBF)),
    )


def test_dot_dotall_is_equivalent_to_unicode_table_3_7() -> None:
    assert is_equivalent(parse("(?s)."), _table_3_7())  # type: ignore[arg-type]


def test_greek_range_accepts_exactly_its_code_points() -> None:
    dfa = LexerDfa([parse("[α-ω]")])
    start = dfa.start()
    for data in itertools.product(range(256), repeat=1):
        assert not _accepts_all(dfa, bytes(data))
    for data in itertools.product(range(256), repeat=2):
        d = bytes(data)
        expected = _one_code_point(d) and 0x3B1 <= ord(d.decode()) <= 0x3C9
        assert _accepts_all(dfa, d) == expected, d
    # no lead byte of a 3- or 4-byte sequence is alive, so no longer string is accepted
    dfa.fill_row(start)
    assert all(dfa.table[start, lead] == DEAD for lead in range(0xE0, 0x100))
    assert all(dfa.table[start, b] == DEAD for b in range(0x80))


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0, 0x7F), (0x7F, 0x80), (0x7FF, 0x800), (0xFFFF, 0x10000), (0xD7FF, 0xE000), (0x10FFFF, 0x10FFFF),
     (0x3B1, 0x3C9), (0x800, 0xFFFF), (0x1F600, 0x1F64F), (0x80, 0x10FFFF)],
)
def test_utf8_sequences_cover_exactly_the_range(lo: int, hi: int) -> None:
    seqs = cs.utf8_sequences(((lo, hi),))
    probes = {lo, hi, lo - 1, hi + 1, (lo + hi) // 2, 0xD800, 0xDFFF, 0x7F, 0x80, 0x7FF, 0x800,
              0xFFFF, 0x10000, 0xE000, 0xD7FF}
    for cp in probes:
        if not 0 <= cp <= 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode()
        hit = sum(
            1 for seq in seqs if len(seq) == len(enc) and all(a <= x <= b for (a, b), x in zip(seq, enc, strict=True))
        )
        assert hit == (1 if lo <= cp <= hi else 0), hex(cp)


def test_negated_class_never_matches_invalid_utf8() -> None:
    dfa = LexerDfa([parse('[^"\\\\]*')])
    for bad in [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82"]:
        assert not _accepts_all(dfa, bad), bad
    assert _accepts_all(dfa, "héllo 😀".encode())
