"""LexerDfa agrees with per-terminal derivatives on random terminal sets and texts."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.regex import DEAD, LexerDfa, matches, parse

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "property"))
from regex_strategies import patterns, texts  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(patterns(anchors=False, flags=False), min_size=1, max_size=4), st.lists(texts, max_size=6),
       st.data())
def test_accepting_and_live_match_each_terminal(pats: list[str], ts: list[str], data: st.DataObject) -> None:
    nodes = [parse(p) for p in pats]
    dfa = LexerDfa(nodes)
    allowed = data.draw(st.sets(st.integers(0, len(nodes) - 1)))
    start = dfa.start(allowed)
    for text in ts:
        raw = text.encode()
        s = dfa.run(start, raw)
        expected = tuple(i for i in sorted(allowed) if matches(nodes[i], raw))
        if s == DEAD:
            assert expected == ()
            continue
        assert dfa.accepting(s) == expected
        assert bool(dfa.accepts[s]) == bool(expected)
        # every live terminal can still be completed, every dropped one cannot
        for i in sorted(allowed):
            from tether.regex import derivative, is_empty

            node = nodes[i]
            for b in raw:
                node = derivative(node, b)
            assert (i in dfa.live(s)) == (is_empty(node) is False)


def test_state_of_and_derivative_of() -> None:
    a, b = parse("ab"), parse("a+")
    dfa = LexerDfa([a, b])
    s = dfa.step(dfa.start(), ord("a"))
    assert dfa.derivative_of(s, 0) is parse("b")
    assert dfa.state_of([(1, dfa.derivative_of(s, 1)), (0, dfa.derivative_of(s, 0))]) == s
    assert dfa.can_continue(s) and dfa.can_continue(s, 0)
    end = dfa.step(s, ord("b"))
    assert dfa.accepting(end) == (0,) and not dfa.can_continue(end)
