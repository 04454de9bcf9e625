"""ParserTables: the integer layout, nullable symbols, prediction closures, terminal nodes."""

from __future__ import annotations

from parser_grammars import build

from tether import regex as rx
from tether.grammar.ir import Terminal
from tether.parser import ParserTables
from tether.parser.terminals import is_lazy, lexeme_node, matches_empty, terminal_node


def test_layout() -> None:
    g = build("S", {"S": ["a S b", ""], "X": ["c"]})
    t = ParserTables.from_grammar(g, nullable_terminals=())
    assert [t.name(i) for i in range(t.n_terminals)] == ["a", "b"]  # 'c' only in unreachable X
    assert t.dropped == ("X",)
    assert t.nonterminals == ["$start", "S"]
    assert t.start == t.n_terminals and t.name(t.start) == "$start"
    # $start -> S, S -> a S b, S -> ε : positions with a -1 end marker per rule
    assert t.sym == [t.start + 1, -1, 0, t.start + 1, 1, -1, -1]
    assert t.describe(3) == "S -> a . S b"
    assert t.accept_pos == 1
    assert t.nullable[t.start] and t.nullable[t.start + 1]
    assert not t.nullable[0]


def test_prediction_closure_skips_nullable_prefixes() -> None:
    g = build("S", {"S": ["A B c"], "A": ["a", ""], "B": ["b", ""]})
    t = ParserTables.from_grammar(g, nullable_terminals=())
    s, a, b = (t.n_terminals + k for k in (1, 2, 3))
    assert t.pred_closure[s] == {s, a, b}
    assert t.pred_closure[a] == {a}
    pred = t.prediction(frozenset({s}))
    assert pred.terminals == {t.terminal_ids[x] for x in "abc"}
    assert pred is t.prediction(frozenset({s}))  # cached
    # predicting S creates S -> . A B c, S -> A . B c and S -> A B . c
    assert {t.describe(p) for p in t.own_positions[s]} == {
        "S -> . A B c",
        "S -> A . B c",
        "S -> A B . c",
    }


def test_identical_alternatives_are_merged() -> None:
    t = ParserTables.from_grammar(build("S", {"S": ["a", "a"]}), nullable_terminals=())
    assert t.n_rules == 2  # $start -> S and one S -> a


def test_terminal_nodes() -> None:
    lit = Terminal("K", literal="If", ignore_case=True)
    assert rx.matches(terminal_node(lit), b"iF") and not rx.matches(terminal_node(lit), b"i")
    stop = Terminal("G", regex="[a-z ]*", stop="END", max_len=4)
    node = terminal_node(stop)
    assert rx.matches(node, b"ab cEND") and rx.matches(node, b"END")
    assert not rx.matches(node, b"abcdeEND")  # the value is at most 4 bytes
    assert not rx.matches(node, b"ab")
    assert is_lazy(stop) and not is_lazy(lit)
    opt = Terminal("O", regex="x*")
    assert matches_empty(opt) and not rx.matches(lexeme_node(opt), b"")
    assert rx.matches(lexeme_node(opt), b"xx")


def test_nullable_terminals_from_the_regex_layer() -> None:
    g = build("S", {"S": ["A B"]}, {"A": "a", "B": "?"})
    g.terminals["B"] = Terminal("B", regex="b*")
    t = ParserTables.from_grammar(g)
    assert t.nullable_terminals == {t.terminal_ids["B"]}
    assert not t.nullable[t.terminal_ids["A"]]
