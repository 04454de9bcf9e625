"""Containment L(A) ⊆ L(B) by emptiness of A & ~B (used by the engine's slices)."""

from __future__ import annotations

import pytest

from tether.regex import is_empty, is_equivalent, is_subset, parse
from tether.regex.ast import Node

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

    cps = [*range(0x800), *range(0x2000, 0x2100), *random.Random(1).sample(range(0x800, 0x110000), 2000)]
    for cp in cps:
        if 0xD800 <= cp < 0xE000:
            continue
        b = chr(cp).encode()
        assert bool(matches(TEXT_CHAR, b)) == is_text_prefix(b), hex(cp)


def test_is_empty_splits_concatenations_alternations_repeats_and_hides() -> None:
    """Structural emptiness (a concatenation is empty iff a part is, an alternation iff
    every member is, ``x{lo,hi}`` with ``lo > 0`` and ``hide`` iff their body is) agrees
    with a search of the whole node, and records what it decides in ``known``."""
    from tether.regex.ast import alt, concat, hide, intersect, literal, repeat
    from tether.regex.language import _is_empty_at

    none = intersect(parse("a+"), parse("b+"))  # empty, but not the ∅ node
    some = intersect(parse("[ab]+"), parse("b+"))  # b+
    text = parse("x+")
    cases = [
        (concat(text, none, literal("y")), True),
        (concat(text, some, literal("y")), False),
        (concat(some, none), True),
        (alt(concat(text, none), concat(literal("z"), none)), True),
        (alt(concat(text, none), concat(literal("z"), some)), False),
        (repeat(none, 2, 5), True),
        (repeat(concat(none, text), 0, 5), False),  # nullable: ε
        (repeat(some, 3, 7), False),
        (hide(concat(literal("q"), some), 1 << ord("q")), False),
    ]
    for node, empty in cases:
        known: dict[Node, bool] = {}
        assert is_empty(node, known=known) is empty, node
        assert known.get(node, empty) is empty
        # the same answer when the node is searched whole (no splitting)
        assert _is_empty_at(node, [10_000], None, 10**9) is empty, node


def test_is_empty_split_is_three_valued_under_a_limit() -> None:
    """A part undecided within the limit leaves the whole undecided, unless another
    part is decided empty."""
    from tether.regex.ast import alt, concat, intersect, literal

    hard = intersect(parse("[ab]*a[ab]{14}"), parse("[ab]*b[ab]{14}"))
    none = intersect(parse("a+"), parse("b+"))
    assert is_empty(concat(literal("x"), hard), limit=50) is None
    assert is_empty(concat(hard, literal("x"), none), limit=50) is True
    # the parts share one budget: two parts that each fit in it alone need it twice
    easy = intersect(parse("[ab]*a[ab]{3}"), parse("[ab]*b[ab]{3}"))  # empty
    alone = 10_000 - _budget_left(easy)
    assert is_empty(easy, limit=alone) is True
    assert is_empty(alt(concat(literal("x"), easy), concat(literal("y"), easy)), limit=alone) is None


def _budget_left(node: Node) -> int:
    """The budget left after ``is_empty(node, limit=10_000)`` (no memo)."""
    from tether.regex.language import _is_empty_at

    budget = [10_000]
    _is_empty_at(node, budget, None, 0)
    return budget[0]


def test_nodes_take_their_first_childs_classes() -> None:
    """``firsts_child``: a node whose firsts are its child's has the same byte classes
    (one tuple object) and the classes of ``classes_of`` over it alone."""
    from tether.regex.ast import Node, classes_of, firsts, firsts_child, node_classes

    for pattern in ["abc", "a*b", "(ab|cd)+e", "[a-f]{2,5}x", "x(?!ab)y", "(?:a|b)?c"]:
        node = parse(pattern)
        seen = [node]
        while seen:
            n = seen.pop()
            child = firsts_child(n)
            if child is not None:
                assert firsts(n) == firsts(child)
                assert node_classes(n) is node_classes(child)
            assert set(node_classes(n)) == set(classes_of((n,)))
            seen.extend(a for a in n.args if isinstance(a, Node))
