"""EarleyParser over terminal ids: recognition, nullable rules, Leo items, push/pop, keys."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parser_grammars import build, language, strings

from tether.errors import GrammarError
from tether.parser.earley import EarleyParser
from tether.parser.tables import ParserTables


def tables(start, rules, terminals=None):
    return ParserTables.from_grammar(build(start, rules, terminals), nullable_terminals=())


def run(t: ParserTables, words, *, leo=True):
    """(accepted, viable) for a sequence of terminal names."""
    p = EarleyParser(t, leo=leo)
    for w in words:
        if not p.push(t.terminal_ids[w]):
            return False, False
    return p.is_accepting(), True


RIGHT = {"S": ["a S", "a"]}
LEFT = {"S": ["S a", "a"]}
NULLABLE = {"A": ["B B B B B"], "B": ["b", ""]}
AMBIGUOUS = {"E": ["E p E", "n"]}
BALANCED = {"S": ["l S r S", ""]}


@pytest.mark.parametrize(
    "rules, text, accepted, viable",
    [
        (RIGHT, "a", True, True),
        (RIGHT, "aaaa", True, True),
        (RIGHT, "", False, True),
        (LEFT, "aaaa", True, True),
        (NULLABLE, "", True, True),
        (NULLABLE, "bbbbb", True, True),
        (NULLABLE, "bbbbbb", False, False),
        (AMBIGUOUS, "npnpn", True, True),
        (AMBIGUOUS, "npnp", False, True),
        (AMBIGUOUS, "nn", False, False),
        (BALANCED, "llrrlr", True, True),
        (BALANCED, "llr", False, True),
        (BALANCED, "r", False, False),
    ],
)
def test_recognizes(rules, text, accepted, viable) -> None:
    start = next(iter(rules))
    t = tables(start, rules)
    for leo in (True, False):
        assert run(t, text, leo=leo) == (accepted, viable)


def test_right_recursion_rows_stay_small_with_leo() -> None:
    t = tables("S", RIGHT)
    p = EarleyParser(t)
    q = EarleyParser(t, leo=False)
    for _ in range(200):
        assert p.push(0) and q.push(0)
    assert p.is_accepting() and q.is_accepting()
    assert len(p.rows[-1].kernel) <= 3  # Leo: the chain of completions collapses
    assert len(q.rows[-1].kernel) > 200  # without: one completed item per level


def test_push_failure_leaves_parser_unchanged() -> None:
    t = tables("S", {"S": ["a b"]})
    p = EarleyParser(t)
    assert not p.push(t.terminal_ids["b"])
    assert p.n_rows == 1
    assert p.push(t.terminal_ids["a"]) and p.n_rows == 2
    assert p.allowed_terminals() == {t.terminal_ids["b"]}


def test_push_several_terminals_at_once() -> None:
    # one lexeme matched by both 'x' and 'y' (e.g. a keyword that is also a name)
    t = tables("S", {"S": ["x a", "y b"]})
    ids = t.terminal_ids
    p = EarleyParser(t)
    assert p.push([ids["x"], ids["y"]])
    assert p.allowed_terminals() == {ids["a"], ids["b"]}
    assert p.push([ids["y"]]) is False  # neither a nor ... y is not allowed here
    assert p.push([ids["b"]]) and p.is_accepting()


def test_pop_and_reuse_of_rows() -> None:
    t = tables("S", BALANCED)
    ids = t.terminal_ids
    p = EarleyParser(t)
    assert p.push(ids["l"])
    row = p.rows[-1]
    p.pop()
    assert p.n_rows == 1 and p.is_accepting()
    assert p.push(ids["l"]) and p.rows[-1] is row  # rebuilt rows are reused
    with pytest.raises(ValueError, match="cannot pop 2 rows"):
        p.pop(2)
    p.truncate(1)
    assert p.n_rows == 1


def test_copy_is_independent() -> None:
    t = tables("S", BALANCED)
    ids = t.terminal_ids
    p = EarleyParser(t)
    p.push(ids["l"])
    q = p.copy()
    q.push(ids["r"])
    assert p.n_rows == 2 and q.n_rows == 3 and q.is_accepting() and not p.is_accepting()


def test_row_key_equal_for_equal_futures() -> None:
    t = tables("S", RIGHT)
    p = EarleyParser(t)
    keys = []
    for _ in range(6):
        p.push(0)
        keys.append(p.row_key())
    assert len(set(keys)) == 1  # a^n, n ≥ 1: the same future (Leo-compacted)
    t = tables("S", BALANCED)
    ids = t.terminal_ids
    p, q = EarleyParser(t), EarleyParser(t)
    q.push(ids["l"])
    assert p.row_key() != q.row_key()  # after 'l', one more 'r' is needed
    p.push(ids["l"])
    assert p.row_key() == q.row_key()  # (keys are only a sufficient test of equal futures)


def test_cyclic_unit_rules() -> None:
    t = tables("A", {"A": ["B", "a"], "B": ["A", "b"]})
    for text, ok in [("a", True), ("b", True), ("ab", False)]:
        assert run(t, text)[0] is ok


def test_unproductive_and_unreachable_rules_are_dropped() -> None:
    t = tables("S", {"S": ["a", "a L"], "L": ["L b"], "U": ["c"]})
    assert set(t.dropped) == {"L", "U"}
    p = EarleyParser(t)
    p.push(t.terminal_ids["a"])
    assert p.allowed_terminals() == frozenset() and p.is_accepting()


@pytest.mark.parametrize(
    "start, rules, message",
    [
        ("X", {"S": ["a"]}, "start rule 'X' is not defined"),
        ("S", {"S": ["a Q"]}, "rule 'Q' is used in 'S' but not defined"),
        ("S", {"S": ["a S"]}, "start rule 'S' derives no finite text"),
    ],
)
def test_table_errors(start, rules, message) -> None:
    with pytest.raises(GrammarError, match=message):
        tables(start, rules)


def test_undefined_terminal() -> None:
    from tether.grammar.ir import Grammar, T

    g = Grammar("S")
    g.add_rule("S", T("NOPE"))
    with pytest.raises(GrammarError, match="terminal 'NOPE' is used but not defined"):
        ParserTables.from_grammar(g, nullable_terminals=())


def test_nullable_terminal_may_be_absent() -> None:
    t = tables("S", {"S": ["a o b"]})
    t2 = ParserTables.from_grammar(build("S", {"S": ["a o b"]}), nullable_terminals=["o"])
    assert run(t, "ab") == (False, False)
    assert run(t2, "ab") == (True, True) and run(t2, "aob") == (True, True)


# -- against a brute-force oracle -------------------------------------------------------------

NTS = ["S", "A", "B"]
TERMS = ["a", "b", "c"]
symbol = st.sampled_from(NTS + TERMS)
alternative = st.lists(symbol, min_size=0, max_size=3).map(" ".join)
grammar_rules = st.fixed_dictionaries(
    {n: st.lists(alternative, min_size=1, max_size=3) for n in NTS}
)


@settings(max_examples=150, deadline=None)
@given(grammar_rules)
def test_matches_brute_force_language(rules) -> None:
    max_len = 5
    oracle = language(rules, set(TERMS), max_len)["S"]
    try:
        t = tables("S", rules, {x: x for x in TERMS})
    except GrammarError:
        assert not oracle
        return
    prefixes = {w[:k] for w in oracle for k in range(len(w) + 1)}
    for leo in (True, False):
        p = EarleyParser(t, leo=leo)
        # depth-first over all strings ≤ max_len, pushing and popping like the mask engine
        stack = [()]
        while stack:
            w = stack.pop()
            p.truncate(max(1, len(w)))  # back to the state after w[:-1]
            if w:
                ok = p.push(t.terminal_ids.get(w[-1], -1))  # unused terminals are dropped
                if w in prefixes:
                    assert ok, (rules, w)
                if not ok:
                    continue
            assert p.is_accepting() == (w in oracle), (rules, w, leo)
            if len(w) < max_len:
                stack.extend(w + (x,) for x in TERMS)


@settings(max_examples=60, deadline=None)
@given(grammar_rules)
def test_row_keys_agree_on_futures(rules) -> None:
    try:
        t = tables("S", rules, {x: x for x in TERMS})
    except GrammarError:
        return
    # two prefixes with equal keys must accept the same suffixes (checked up to length 3)
    seen: dict[int, tuple[str, ...]] = {}
    for w in strings(TERMS, 3):
        p = EarleyParser(t)
        if all(p.push(t.terminal_ids.get(x, -1)) for x in w):
            k = p.row_key()
            if k in seen and seen[k] != w:
                for suffix in strings(TERMS, 2):
                    assert _accepts(t, seen[k] + suffix) == _accepts(t, w + suffix), (rules, w)
            seen.setdefault(k, w)


def _accepts(t, words) -> bool:
    p = EarleyParser(t)
    return all(p.push(t.terminal_ids.get(x, -1)) for x in words) and p.is_accepting()


BIG_NTS = ["S", "A", "B", "C", "D"]
BIG_TERMS = ["a", "b", "c", "d"]
big_rules = st.fixed_dictionaries(
    {
        n: st.lists(
            st.lists(st.sampled_from(BIG_NTS + BIG_TERMS), max_size=4).map(" ".join),
            min_size=1,
            max_size=4,
        )
        for n in BIG_NTS
    }
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(big_rules)
def test_matches_brute_force_language_larger_grammars(rules) -> None:
    oracle = language(rules, set(BIG_TERMS), 4)["S"]
    try:
        t = tables("S", rules, {x: x for x in BIG_TERMS})
    except GrammarError:
        assert not oracle
        return
    for w in strings(BIG_TERMS, 4):
        for leo in (True, False):
            p = EarleyParser(t, leo=leo)
            ok = all(p.push(t.terminal_ids.get(x, -1)) for x in w)
            assert (ok and p.is_accepting()) == (w in oracle), (rules, w, leo)
