"""Containment L(A) ⊆ L(B) by emptiness of A & ~B (used by the engine's slices)."""

from __future__ import annotations

import pytest

from tether.regex import is_empty, is_equivalent, is_subset, parse

JSON_CHAR = r'([^"\\\x00-\x1F\x7F]|\\(["\\/bfnrt]|u[a-fA-F0-9]{4}))'
SLICE = r'[^"\\\x00-\x1F\x7F]{1,10}'

# (id, A, B, A ⊆ B)
CASES = [
    ("slice-in-json-string-body", SLICE, JSON_CHAR + "*", True),
    ("slice-in-bounded-body", SLICE, JSON_CHAR + "{0,50}", True),
    ("slice-not-in-shorter-bound", r'[^"\\\x00-\x1F\x7F]{1,30}', JSON_CHAR + "{0,20}", False),
    ("slice-not-in-quoted", SLICE, '"' + JSON_CHAR + '*"', False),
    ("digits-in-word", "[0-9]+", r"\w+", True),
    ("word-not-in-digits", r"\w+", "[0-9]+", False),
    ("finite-lang", "ab|ac", "a[bc]", True),
    ("star-in-star", "(ab)*", "(a|b)*", True),
    ("star-not-in-star", "(a|b)*", "(ab)*", False),
    ("greek-in-dot", "[α-ω]+", ".+", True),
    ("dot-not-in-ascii", ".", "[\\x00-\\x7f]", False),
    ("empty-in-anything", "a[]", "b", True),
]


@pytest.mark.parametrize(("a", "b", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_is_subset(a: str, b: str, expected: bool) -> None:
    flavor = "ecma" if "[]" in a else "python"
    assert is_subset(parse(a, flavor=flavor), parse(b)) is expected  # type: ignore[arg-type]


def test_equivalence_of_different_spellings() -> None:
    assert is_equivalent(parse("(a|b)*"), parse("(a*b*)*"))
    assert is_equivalent(parse("a{2,4}"), parse("aaa?a?"))
    assert not is_equivalent(parse("a{2,4}"), parse("aaa?"))


def test_is_empty_is_three_valued_under_a_limit() -> None:
    from tether.regex import intersect

    assert is_empty(intersect(parse("a+"), parse("b+"))) is True
    assert is_empty(intersect(parse("[ab]*a"), parse("[ab]*b"))) is True
    hard = intersect(parse("[ab]*a[ab]{14}"), parse("[ab]*b[ab]{14}"))
    assert is_empty(hard, limit=50) is None  # undecided within the limit
    assert is_subset(parse("[ab]*a[ab]{14}"), parse("[ab]*b[ab]{14}"), limit=50) is False  # sound default


def test_slices_text_char_regex_matches_its_decoder_table() -> None:
    """``slices.TEXT_CHAR`` (the engine's depth shortcut) and the UTF-8 table the slices
    are cut by name the same characters."""
    import random

    from tether.engine.slices import TEXT_CHAR, is_text_prefix
    from tether.regex import matches

    cps = [*range(0x800), *random.Random(1).sample(range(0x800, 0x110000), 2000)]
    for cp in cps:
        if 0xD800 <= cp < 0xE000:
            continue
        b = chr(cp).encode()
        assert bool(matches(TEXT_CHAR, b)) == is_text_prefix(b), hex(cp)
