"""``horizon_form``: no string of at most ``horizon`` bytes tells a node from its form.

For every byte string ``w`` of at most ``horizon`` bytes (over a small alphabet and one
byte outside it), the node and its form agree on whether ``w`` is in the language and on
whether ``w`` can still be completed (a derivative whose language is not empty): the two
questions a token mask asks. Random nodes mix counted repeats (some large enough to be
relaxed), intersections, complements and stars.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tether.regex import ast as A
from tether.regex import parse
from tether.regex.horizon import SLACK, Horizon, longest_shortest_completion
from tether.regex.language import example, is_empty
from tether.regex.show import to_string

_LEAVES = [A.byte_set(ord("a")), A.byte_set(ord("b")), A.byte_set(ord("a"), ord("b"), ord("c")),
           A.literal(b"ab"), A.literal(b"cab"), A.EPSILON]
_ANY = A.byte_set(ord("a"), ord("b"), ord("c"), ord("d"))


def _lengths() -> st.SearchStrategy[A.Node]:
    """At least k of anything (completions that need many bytes), or exactly k."""
    return st.tuples(st.integers(1, 40), st.booleans()).map(
        lambda p: A.repeat(_ANY, p[0], A.INF if p[1] else p[0]))


def _nodes() -> st.SearchStrategy[A.Node]:
    def extend(children: st.SearchStrategy[A.Node]) -> st.SearchStrategy[A.Node]:
        counted = st.tuples(children, st.integers(0, 45), st.integers(0, 45)).map(
            lambda p: A.repeat(p[0], min(p[1], p[2]), p[2]))
        return st.one_of(
            st.tuples(children, children).map(lambda p: A.concat(*p)),
            st.tuples(children, children).map(lambda p: A.alt(*p)),
            children.map(A.star),
            counted,
            counted,
            st.tuples(children, children).map(lambda p: A.intersect(*p)),
            children.map(A.complement),
        )
    leaves = st.one_of(st.sampled_from(_LEAVES), _lengths())
    # most examples hold a count large enough to be relaxed somewhere
    big = st.tuples(leaves, st.integers(0, 2), st.integers(18, 45)).map(
        lambda p: A.repeat(p[0], min(p[1], p[2]), p[2]))
    nodes = st.recursive(st.one_of(leaves, big), extend, max_leaves=6)
    # half of them: a length bound on top, as a bounded string pattern has
    return st.one_of(nodes, st.tuples(nodes, _lengths()).map(lambda p: A.intersect(*p)))


def _words(horizon: int) -> list[bytes]:
    return [bytes(w) for k in range(horizon + 1) for w in itertools.product(b"abcd", repeat=k)]


def _after(node: A.Node, w: bytes) -> A.Node:
    for b in w:
        node = A.derivative(node, b)
    return node


def _decided(ok: bool) -> None:
    assert ok, "an emptiness test did not finish"


def _disagree(node: A.Node, form: A.Node, horizon: int, undecided=assume) -> bytes | None:  # noqa: ANN001
    """A string of at most ``horizon`` bytes the two tell apart (None: none); hypothesis
    discards the example if an emptiness test does not finish (``undecided``)."""
    for w in _words(horizon):
        n, z = _after(node, w), _after(form, w)
        if n.nullable != z.nullable:
            return w
        en, ez = is_empty(n, limit=20_000), is_empty(z, limit=20_000)
        undecided(en is not None and ez is not None)
        if en != ez:
            return w
    return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=_nodes(), horizon=st.integers(1, 3))
def test_form_agrees_on_every_short_string(node: A.Node, horizon: int) -> None:
    form = Horizon(horizon).form(node)
    assert _disagree(node, form, horizon) is None, (to_string(node), to_string(form))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=_nodes(), horizon=st.integers(1, 3), w=st.binary(max_size=30))
def test_form_of_a_derivative_agrees(node: A.Node, horizon: int, w: bytes) -> None:
    """The counts a lexer state holds are part-way down: derivatives of random nodes."""
    w = bytes(b"abcd"[b % 4] for b in w)
    d = _after(node, w)
    form = Horizon(horizon).form(d)
    assert _disagree(d, form, horizon) is None, (to_string(d), to_string(form))


def test_a_long_count_is_relaxed_and_a_short_one_kept() -> None:
    h = Horizon(4)  # threshold 4 + SLACK = 20 bytes
    long = A.intersect(parse(r"(?:[a-c]+ +){0,30}[a-c]+"), A.repeat(A.byte_set(range(256)), 0, 40))
    form = h.form(long)
    assert form is not long and not form.flags & A.F_COUNTED
    assert h.form(A.derivative(long, ord("a"))) is not A.derivative(long, ord("a"))
    short = A.intersect(parse(r"(?:[a-c]+ +){0,3}[a-c]+"), A.repeat(A.byte_set(range(256)), 0, 12))
    assert h.form(short) is short
    # 9 words of at least 2 bytes reach 18 bytes <= 20: a string of 20 bytes can tell
    words = parse(r"(?:[a-c]+ +){0,9}[a-c]+")
    assert h.form(words) is words
    assert _disagree(long, form, 4, _decided) is None


def test_a_count_that_completions_need_is_kept() -> None:
    """``x{0,30} & a{25}c``: relaxing the first makes no difference to strings of 4 bytes,
    but a completion needs 26 bytes (more than SLACK): kept."""
    node = A.intersect(A.repeat(A.byte_set(ord("a"), ord("c")), 0, 30), parse(r"a{25}c"))
    assert Horizon(4).form(node) is node
    m, _ = longest_shortest_completion(A.repeat(A.byte_set(ord("a")), 0, A.INF), 100)
    assert m == 0
    assert SLACK < 26


def test_counts_under_a_complement_are_kept() -> None:
    node = A.complement(A.repeat(A.byte_set(ord("a")), 0, 40))
    assert Horizon(2).form(node) is node


def test_a_count_is_kept_when_a_short_string_and_its_completion_exceed_it() -> None:
    """``(a|b){0,42}c & .*b{10}c`` at horizon 40: after ``a{40}`` the ten ``b`` no longer
    fit, while with ``(a|b)*`` they do (a completion of 11 bytes, within SLACK). The count
    allows 42 bytes, less than ``40 + SLACK``: kept."""
    ab, b, c = A.byte_set(ord("a"), ord("b")), A.byte_set(ord("b")), A.byte_set(ord("c"))
    tail = A.concat(A.star(_ANY), A.repeat(b, 10, 10), c)
    node = A.intersect(A.concat(A.repeat(ab, 0, 42), c), tail)
    relaxed = A.intersect(A.concat(A.star(ab), c), tail)
    assert Horizon(40).form(node) is node
    w = b"a" * 40
    assert is_empty(_after(node, w)) is True and is_empty(_after(relaxed, w)) is False
    assert Horizon(26).form(node) is relaxed  # 42 >= 26 + SLACK: no string of 26 bytes tells


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=_nodes(), w=st.binary(max_size=6))
def test_min_length_is_a_lower_bound_exact_without_booleans(node: A.Node, w: bytes) -> None:
    """``min_length`` (which decides what may be relaxed) against a shortest member."""
    node = _after(node, bytes(b"abcd"[b % 4] for b in w))  # chains part-way too
    shortest = example(node, limit=20_000)
    assume(shortest is not None or is_empty(node, limit=20_000) is True)
    if shortest is None:
        return
    assert A.min_length(node) <= len(shortest)
    if not node.flags & A.F_BOOLEAN:
        assert A.min_length(node) == len(shortest)
