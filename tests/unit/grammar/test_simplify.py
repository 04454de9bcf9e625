"""simplify / validate on hand-built IR, and ε elimination."""

from __future__ import annotations

import pytest
from grammar_reference import cf_accepts
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError
from tether.grammar import NT, Grammar, T, Terminal, eliminate_epsilon, nullable_rules, simplify


def _g() -> Grammar:
    g = Grammar(start="s")
    a = g.add_terminal(Terminal("A", literal="a"))
    b = g.add_terminal(Terminal("B", regex="b+"))
    g.add_rule("s", NT("x"), a)
    g.add_rule("s", NT("x"), a)  # duplicate
    g.add_rule("x", NT("y"))  # unit chain x -> y -> B
    g.add_rule("y", b)
    g.add_rule("s", NT("s"))  # s -> s is useless
    g.add_rule("dead", a)  # unreachable
    return g


def test_simplify_removes_duplicates_units_and_unreachable() -> None:
    g = simplify(_g())
    assert [repr(r) for r in g.rules] == ["s -> B A"]
    assert any("'dead'" in w for w in g.warnings)
    assert cf_accepts(g, "bba")


def test_undefined_rule_suggests_a_name() -> None:
    g = Grammar(start="s")
    g.add_rule("s", NT("valeu"))
    g.add_rule("value", g.add_terminal(Terminal("X", literal="x")))
    with pytest.raises(GrammarError, match="Did you mean 'value'"):
        simplify(g)


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda g: None, "no rules"),
        (lambda g: g.add_rule("other"), "start rule 's' is not defined"),
        (lambda g: g.add_rule("s", T("NOPE")), "terminal 'NOPE'"),
        (lambda g: (g.add_rule("s", NT("s"), NT("s"))), "can never finish"),
    ],
)
def test_validation_errors(build, fragment: str) -> None:  # type: ignore[no-untyped-def]
    g = Grammar(start="s")
    build(g)
    with pytest.raises(GrammarError, match=fragment):
        simplify(g)


def test_left_recursion_is_kept() -> None:
    g = Grammar(start="s")
    a = g.add_terminal(Terminal("A", literal="a"))
    g.add_rule("s", NT("s"), a)
    g.add_rule("s", a)
    assert cf_accepts(simplify(g), "aaa")


def test_nullable_rules() -> None:
    g = Grammar(start="s")
    a = g.add_terminal(Terminal("A", literal="a"))
    g.add_rule("s", NT("o"), NT("o"), a)
    g.add_rule("o")
    g.add_rule("o", a)
    assert nullable_rules(g) == {"o"}


@st.composite
def bnf(draw: st.DrawFn) -> Grammar:
    g = Grammar(start="r0")
    ts = [g.add_terminal(Terminal(c.upper(), literal=c)) for c in "ab"]
    names = [f"r{i}" for i in range(draw(st.integers(1, 4)))]
    for n in names:
        for _ in range(draw(st.integers(1, 3))):
            rhs = draw(st.lists(st.sampled_from(ts + [NT(m) for m in names]), max_size=4))
            g.add_rule(n, *rhs)
        g.add_rule(n, *draw(st.lists(st.sampled_from(ts), max_size=2)))  # productive
    return g


@settings(max_examples=60, deadline=None)
@given(bnf(), st.lists(st.text("ab", max_size=5), min_size=1, max_size=8))
def test_simplify_and_epsilon_elimination_keep_the_language(g: Grammar, texts: list[str]) -> None:
    s = simplify(g)
    e = eliminate_epsilon(g)
    assert not any(r.rhs == () and r.lhs != e.start for r in e.rules)
    for t in texts:
        want = cf_accepts(g, t)
        assert cf_accepts(s, t) == want, (str(g), t)
        assert cf_accepts(e, t) == want, (str(g), str(e), t)
