"""Hash-consing, simplification laws, nullable and derivatives of the node algebra."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.regex import (
    ANY_BYTE,
    ANYTHING,
    EMPTY,
    EPSILON,
    alt,
    byte_classes,
    byte_set,
    complement,
    concat,
    derivative,
    intersect,
    literal,
    matches,
    nullable,
    parse,
    repeat,
    star,
)

a, b, c = literal(b"a"), literal(b"b"), literal(b"c")


def test_hash_consing_makes_equal_structures_identical() -> None:
    assert concat(a, b) is concat(a, b)
    assert parse("(ab|c)*") is parse("(?:c|ab)*")


def test_alternation_is_aci_with_empty_unit() -> None:
    ab = concat(a, b)
    assert alt(ab, c) is alt(c, ab)  # commutative
    assert alt(alt(ab, c), a) is alt(ab, alt(c, a))  # associative
    assert alt(ab, ab) is ab  # idempotent
    assert alt(ab, EMPTY) is ab
    assert alt(a, b) is byte_set(ord("a"), ord("b"))  # byte sets merge


def test_epsilon_dropped_when_another_member_is_nullable() -> None:
    assert alt(EPSILON, star(a)) is star(a)


def test_concat_laws() -> None:
    assert concat(a, EPSILON, b) is concat(a, b)
    assert concat(a, EMPTY, b) is EMPTY
    assert concat(concat(a, b), c) is concat(a, concat(b, c))
    assert concat(star(a), star(a)) is star(a)


def test_star_laws() -> None:
    assert star(star(a)) is star(a)
    assert star(concat(a, star(a))) is star(a)  # (a+)* = a*
    assert star(alt(EPSILON, a)) is star(a)
    assert star(EMPTY) is EPSILON and star(EPSILON) is EPSILON


def test_repeat_laws() -> None:
    assert repeat(a, 0, None) is star(a)
    assert repeat(a, 1, 1) is a
    assert repeat(a, 0, 0) is EPSILON
    assert repeat(EMPTY, 0, 3) is EPSILON and repeat(EMPTY, 1, 3) is EMPTY
    assert repeat(star(a), 2, 5) is star(a)


def test_boolean_laws() -> None:
    assert complement(complement(a)) is a
    assert intersect(a, ANYTHING) is a
    assert intersect(a, EMPTY) is EMPTY
    assert intersect(byte_set(range(97, 100)), byte_set(range(98, 110))) is byte_set(98, 99)
    assert intersect(EPSILON, star(a)) is EPSILON and intersect(EPSILON, a) is EMPTY


def test_nullable() -> None:
    assert nullable(EPSILON) and not nullable(EMPTY) and not nullable(a)
    assert nullable(star(a)) and nullable(repeat(a, 0, 3)) and not nullable(repeat(a, 1, 3))
    assert nullable(complement(a)) and not nullable(complement(star(a)))
    assert nullable(intersect(star(a), star(b))) and not nullable(intersect(star(a), b))


def test_derivatives_follow_brzozowski() -> None:
    assert derivative(concat(a, b), ord("a")) is b
    assert derivative(concat(a, b), ord("b")) is EMPTY
    assert derivative(star(a), ord("a")) is star(a)
    assert derivative(repeat(a, 2, 4), ord("a")) is repeat(a, 1, 3)
    # d(a*b, b) = ε because a* is nullable
    assert derivative(concat(star(a), b), ord("b")) is EPSILON
    assert derivative(complement(a), ord("a")) is complement(EPSILON)


def test_byte_classes_partition_and_respect_derivatives() -> None:
    n = parse("[a-f][0-9]|x")
    classes = byte_classes([n])
    total = 0
    for cls in classes:
        total |= cls
        members = [i for i in range(256) if cls >> i & 1]
        ds = {derivative(n, i) for i in members}
        assert len(ds) == 1, "bytes of one class must have one derivative"
    assert total == (1 << 256) - 1
    assert sum(bin(cls).count("1") for cls in classes) == 256
    assert len(byte_classes([ANY_BYTE])) == 1


def test_intersection_and_complement_languages() -> None:
    # strings of a/b with length ≤ 3 that do not contain "ab"
    no_ab = intersect(repeat(byte_set(97, 98), 0, 3), complement(parse("(?s).*ab.*")))
    assert matches(no_ab, "ba") and matches(no_ab, "bbb") and matches(no_ab, "")
    assert not matches(no_ab, "ab") and not matches(no_ab, "bab") and not matches(no_ab, "aaaa")


def test_to_string_is_readable() -> None:
    assert str(parse("a{2,5}b*")) == "a{2,5}b*"
    assert str(EMPTY) == "∅" and str(EPSILON) == "ε"


def test_hide_erases_marker_bytes() -> None:
    from tether.regex.ast import hide

    marker = byte_set(0xFE)
    annotated = concat(a, marker, b, marker, c)  # "a#b#c" with # hidden
    erased = hide(annotated, 1 << 0xFE)
    assert matches(erased, b"abc") and not matches(erased, b"ab") and not matches(erased, b"a\xfebc")
    assert hide(EMPTY, 1) is EMPTY and hide(EPSILON, 1) is EPSILON
    # a marker at the very end (after the last visible byte) is erased too
    assert matches(hide(concat(a, marker), 1 << 0xFE), b"a")


def test_pickle_and_deepcopy_keep_interning() -> None:
    import copy
    import pickle

    n = parse(r"(?=\w)[a-z]+\b|x{2,5}")
    assert pickle.loads(pickle.dumps(n)) is n
    assert copy.deepcopy(n) is n


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=8),
       tail=st.sampled_from([r"", r"a*b", r"[ \t]{0,3}:", r"(?:x|yz)+", r"[a-z]{0,64}", r"(?=a)\w"]))
def test_literal_onto_a_rest_is_the_concatenation(data: bytes, tail: str) -> None:
    rest = parse(tail) if tail else EPSILON
    node = literal(data, rest)
    assert node is concat(literal(data), rest)
    assert node.flags == rest.flags and node.nullable == (not data and rest.nullable)
    assert literal(data, EMPTY) is EMPTY


def test_a_node_gets_a_derivative_cache_of_its_own_at_its_first_derivative() -> None:
    from tether.regex import ast

    a, b = literal(b"q\x01z"), literal(b"q\x02z")  # fresh nodes, never derived
    assert a._deriv is ast._NO_DERIVATIVES and b._deriv is ast._NO_DERIVATIVES
    assert derivative(a, ord("q")) is literal(b"\x01z")
    assert a._deriv is not ast._NO_DERIVATIVES and a._deriv == {ord("q"): literal(b"\x01z")}
    assert not ast._NO_DERIVATIVES  # the shared empty cache is never written
    assert b._deriv is ast._NO_DERIVATIVES
    assert derivative(b, ord("x")) is EMPTY and b._deriv == {ord("x"): EMPTY}
