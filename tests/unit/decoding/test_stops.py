"""Stop texts: earliest stop wins, output cut before it, streaming holds back prefixes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.decoding import StopScanner


def test_earliest_stop_wins_and_is_cut() -> None:
    s = StopScanner(["END", "\n\n"])
    assert not s.feed(b"abc\n")
    assert s.feed(b"\nxEND")
    assert bytes(s.text) == b"abc" and s.hit == b"\n\n"


def test_stop_spanning_chunks() -> None:
    s = StopScanner(["</a>"])
    for chunk in (b"hi <", b"/", b"a", b">tail"):
        done = s.feed(chunk)
    assert done and bytes(s.text) == b"hi "


def test_safe_length_holds_back_a_possible_stop_prefix() -> None:
    s = StopScanner(["</a>"])
    s.feed(b"hi </")
    assert s.safe_length() == 3
    s.feed(b"b")
    assert s.safe_length() == len(s.text)


def test_empty_stop_is_rejected() -> None:
    with pytest.raises(ValueError):
        StopScanner([""])


@given(st.lists(st.binary(min_size=0, max_size=4), max_size=12), st.lists(st.binary(min_size=1, max_size=3), min_size=1, max_size=3))
def test_matches_find_on_the_whole_text(chunks, stops) -> None:
    s = StopScanner(stops)
    for c in chunks:
        if s.feed(c):
            break
    whole = b"".join(chunks)
    hits = [whole.find(x) for x in stops if whole.find(x) >= 0]
    if hits:
        assert bytes(s.text) == whole[: min(hits)]
    else:
        assert bytes(s.text) == whole and s.hit is None
