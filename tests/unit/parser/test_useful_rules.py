"""ParserTables keeps exactly the productive, reachable rules, numbered as documented,
whatever the order the rules come in (the sweeps and their worklist fallback), and
computes prediction data on first use with the same results as the eager definition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError
from tether.grammar.ir import NT, Grammar, Rule, T, Terminal, symbol_ids
from tether.parser import ParserTables
from tether.parser.tables import _SWEEPS


def _reference(g: Grammar) -> tuple[list[Rule], set[str]]:
    """The useful rules by the textbook fixpoints over names (no ints, no shortcuts)."""
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for r in g.rules:
            ok = all(isinstance(s, T) or s.name in productive for s in r.rhs)
            if ok and r.lhs not in productive:
                productive.add(r.lhs)
                changed = True
    rules = [r for r in g.rules if all(isinstance(s, T) or s.name in productive for s in r.rhs)]
    reach = {g.start}
    changed = True
    while changed:
        changed = False
        for r in rules:
            if r.lhs in reach:
                for s in r.rhs:
                    if isinstance(s, NT) and s.name not in reach:
                        reach.add(s.name)
                        changed = True
    kept = [r for r in rules if r.lhs in reach]
    dropped = {r.lhs for r in g.rules} - reach
    return kept, dropped


def _decode(t: ParserTables) -> list[tuple[str, tuple[str, ...]]]:
    return [
        (t.name(a), tuple(t.name(s) for s in rhs))
        for a, rhs in zip(t.rule_lhs[1:], t.rule_rhs[1:], strict=True)
    ]


NAMES = ["S", "A", "B", "C", "D"]
TERMS = ["a", "b", "c"]


@st.composite
def grammars(draw: st.DrawFn) -> Grammar:
    g = Grammar("S")
    for name in TERMS:
        g.add_terminal(Terminal(name, literal=name))
    n = draw(st.integers(1, 10))
    for _ in range(n):
        lhs = draw(st.sampled_from(NAMES))
        rhs = draw(st.lists(st.sampled_from(NAMES + TERMS), max_size=3))
        g.rules.append(Rule(lhs, tuple(T(w) if w in TERMS else NT(w) for w in rhs)))
    if not any(r.lhs == "S" for r in g.rules):
        g.rules.append(Rule("S", (T("a"),)))
    # rules may only use defined names
    defined = {r.lhs for r in g.rules}
    g.rules = [
        Rule(r.lhs, tuple(s for s in r.rhs if isinstance(s, T) or s.name in defined))
        for r in g.rules
    ]
    return g


@settings(max_examples=300, deadline=None)
@given(grammars())
def test_kept_rules_match_the_textbook_fixpoints(g: Grammar) -> None:
    kept, dropped = _reference(g)
    if "S" not in {r.lhs for r in kept}:
        with pytest.raises(GrammarError, match="derives no finite text"):
            ParserTables.from_grammar(g, nullable_terminals=())
        return
    t = ParserTables.from_grammar(g, nullable_terminals=())
    want = list(dict.fromkeys((r.lhs, tuple(s.name for s in r.rhs)) for r in kept))
    assert _decode(t) == want
    assert set(t.dropped) == dropped
    assert t.nonterminals == ["$start", *dict.fromkeys(r.lhs for r in kept)]
    used = {s.name for r in kept for s in r.rhs if isinstance(s, T)}
    assert [x.name for x in t.terminals] == [n for n in g.terminals if n in used]
    for a in range(t.n_symbols):  # rules_of agrees with rule_lhs
        assert t.rules_of[a] == tuple(r for r, b in enumerate(t.rule_lhs) if b == a)


def _chain(n: int, parents_first: bool) -> Grammar:
    g = Grammar("N0")
    g.add_terminal(Terminal("x", literal="x"))
    rules = [Rule(f"N{i}", (NT(f"N{i + 1}"),)) for i in range(n)] + [Rule(f"N{n}", (T("x"),))]
    g.rules = rules if parents_first else rules[::-1]
    return g


@pytest.mark.parametrize("parents_first", [True, False])
def test_long_chains_in_either_order(parents_first: bool) -> None:
    n = 3 * _SWEEPS  # parents first needs more sweeps than allowed: the worklist finishes
    t = ParserTables.from_grammar(_chain(n, parents_first), nullable_terminals=())
    assert t.dropped == () and t.n_rules == n + 2


def test_rule_names_keep_first_kept_definition_order() -> None:
    # A's first rule is unproductive, so B is defined (among kept rules) before A
    g = Grammar("S")
    g.add_terminal(Terminal("a", literal="a"))
    g.rules = [
        Rule("A", (NT("Z"),)),
        Rule("S", (NT("B"), NT("A"))),
        Rule("B", (T("a"),)),
        Rule("A", (T("a"),)),
        Rule("Z", (NT("Z"),)),
    ]
    t = ParserTables.from_grammar(g, nullable_terminals=())
    assert t.nonterminals == ["$start", "S", "B", "A"]
    assert t.dropped == ("Z",)


def test_terminal_and_rule_may_share_a_name() -> None:
    g = Grammar("x")
    g.add_terminal(Terminal("x", literal="y"))
    g.rules = [Rule("x", (T("x"), NT("x"))), Rule("x", (T("x"),))]
    t = ParserTables.from_grammar(g, nullable_terminals=())
    assert _decode(t) == [("x", ("x", "x")), ("x", ("x",))]
    assert t.rule_rhs[1] == (0, t.start + 1)


def test_undefined_terminal_only_matters_in_a_kept_rule() -> None:
    g = Grammar("S")
    g.add_terminal(Terminal("a", literal="a"))
    g.rules = [Rule("S", (T("a"),)), Rule("U", (T("missing"),))]
    assert ParserTables.from_grammar(g, nullable_terminals=()).dropped == ("U",)
    g.rules.append(Rule("S", (NT("U"),)))
    with pytest.raises(GrammarError, match="'missing' is used but not defined"):
        ParserTables.from_grammar(g, nullable_terminals=())


def test_prediction_data_is_computed_on_first_use() -> None:
    g = _chain(5, True)
    t = ParserTables.from_grammar(g, nullable_terminals=())
    assert t._direct == {}  # nothing computed up front
    pred = t.prediction(frozenset({t.start}))
    assert pred.terminals == {t.terminal_ids["x"]}
    assert len(pred.nts) == 7  # $start and N0..N5
    assert t.pred_closure[t.start + 3] == {t.start + k for k in range(3, 7)}


def _tables_fields(t: ParserTables) -> tuple[object, ...]:
    return (t.rule_lhs, t.rule_rhs, t.nonterminals, [x.name for x in t.terminals], t.dropped,
            list(t.rules_of))


@settings(max_examples=200, deadline=None)
@given(grammars())
def test_a_trimmed_grammar_gives_the_tables_of_the_full_encoding(g: Grammar) -> None:
    # the JSON Schema compiler's prune marks its output trimmed; the tables then skip
    # their own productivity and reachability passes and must come out the same
    from tether.grammar.json_schema.prune import prune

    kept, _ = _reference(g)
    if "S" not in {r.lhs for r in kept}:
        return
    prune(g)
    assert g.trimmed
    fast = ParserTables.from_grammar(g, nullable_terminals=())
    if g.trimmed_ids is not None:  # prune's symbol ids, read by the tables as they stand
        assert g.trimmed_ids == symbol_ids(g)
        g.mark_trimmed()  # the same mark without them: the tables encode the rules
        assert g.trimmed and g.trimmed_ids is None
        assert _tables_fields(ParserTables.from_grammar(g, nullable_terminals=())) == _tables_fields(fast)
    g._trimmed_at = None  # the same grammar, unmarked: the full passes
    assert not g.trimmed
    assert _tables_fields(ParserTables.from_grammar(g, nullable_terminals=())) == _tables_fields(fast)


@settings(max_examples=300, deadline=None)
@given(grammars(), st.booleans())
def test_prune_keeps_the_textbook_useful_rules(g: Grammar, undefined: bool) -> None:
    # the JSON Schema compiler's prune keeps exactly the rules of the fixpoints, in order,
    # and the terminals they use: over integer ids when every name is defined (the ids
    # then kept for the tables when nothing is dropped), by name otherwise (a rule using
    # an undefined name derives nothing)
    from tether.grammar.json_schema.prune import prune

    if undefined:
        g.rules.insert(0, Rule("A", (T("a"), NT("missing"))))
    n_rules = len(g.rules)
    kept, _ = _reference(g)
    used = {s.name for r in kept for s in r.rhs if isinstance(s, T)}
    prune(g)
    assert g.rules == kept
    assert list(g.terminals) == [n for n in TERMS if n in used]
    assert g.trimmed
    every = len(kept) == n_rules and len(used) == len(TERMS)
    assert (g.trimmed_ids is not None) == (every and not undefined)


@pytest.mark.parametrize("parents_first", [True, False])
def test_prune_past_its_sweeps(parents_first: bool) -> None:
    # chains longer than the sweeps, in either order: the worklists finish both passes
    from tether.grammar.json_schema.prune import _SWEEPS as PRUNE_SWEEPS
    from tether.grammar.json_schema.prune import prune

    n = 3 * PRUNE_SWEEPS
    g = Grammar("S")
    g.add_terminal(Terminal("a", literal="a"))
    g.add_terminal(Terminal("b", literal="b"))  # used only by a rule that derives nothing
    chain = [Rule("S", (NT("A0"),)), *(Rule(f"A{k}", (NT(f"A{k + 1}"),)) for k in range(n)),
             Rule(f"A{n}", (T("a"),)), Rule("S", (NT("B"),)), Rule("B", (T("b"), NT("B")))]
    g.rules = chain if parents_first else chain[::-1]
    kept, _ = _reference(g)
    prune(g)
    assert g.rules == kept and len(kept) == n + 2
    assert list(g.terminals) == ["a"]
    assert g.trimmed and g.trimmed_ids is None  # rules dropped: the tables encode again


def test_a_trimmed_mark_lapses_when_the_grammar_changes() -> None:
    g = Grammar("S")
    g.add_terminal(Terminal("a", literal="a"))
    g.add_rule("S", T("a"))
    g.mark_trimmed(symbol_ids(g))
    assert g.trimmed and g.trimmed_ids is not None
    g.rules.append(Rule("Z", (NT("Z"),)))  # unproductive and unreachable
    assert not g.trimmed and g.trimmed_ids is None  # the ids lapse with the mark
    assert ParserTables.from_grammar(g, nullable_terminals=()).dropped == ("Z",)
    g.mark_trimmed()  # a wrong mark is still checked for undefined names
    g.rules.append(Rule("S", (T("missing"),)))
    g.mark_trimmed()
    with pytest.raises(GrammarError, match="'missing' is used but not defined"):
        ParserTables.from_grammar(g, nullable_terminals=())
    for change in (lambda: g.terminals.pop("a"), lambda: setattr(g, "start", "Z"), lambda: g.ignore.append("a")):
        g.mark_trimmed()
        change()
        assert not g.trimmed
