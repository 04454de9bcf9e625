"""ByteParser against lark's Earley parser on generated grammars and strings.

The terminals are a prefix-free set (``a``, ``bc``, ``bd`` and the class ``[de]``): no
terminal's text is a prefix of another's, so every text has at most one split into
lexemes and greedy lexing (ours) cannot differ from lark's dynamic lexer, which tries
every split. With ``%ignore`` a run of spaces may sit between lexemes in both.
Same accept/reject is required for random sentences of the grammar, for their mutations
and for random strings over the alphabet.

A second family adds ``NUM = [0-9]+``, which greedy lexing reads as one lexeme however
long: there the oracle is lark's Earley parser with its *basic* (longest-match) lexer,
which lexes these terminals exactly as ours does.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError
from tether.grammar.ir import NT, Grammar, T, Terminal
from tether.parser import ByteParser

lark = pytest.importorskip("lark", reason="lark is a test dependency: pip install -e '.[dev]'")

TERMINALS = {
    "A": Terminal("A", literal="a"),
    "BC": Terminal("BC", literal="bc"),
    "BD": Terminal("BD", literal="bd"),
    "D": Terminal("D", regex="[de]"),
}
LARK_TERMINALS = {"A": '"a"', "BC": '"bc"', "BD": '"bd"', "D": "/[de]/"}
NTS = ["start", "x1", "x2"]
ALPHABET = ["a", "bc", "bd", "d", "e", "b", "c", " "]
NUM_TERMINALS = {**TERMINALS, "NUM": Terminal("NUM", regex="[0-9]+")}
NUM_LARK_TERMINALS = {**LARK_TERMINALS, "NUM": "/[0-9]+/"}


def grammar_strategy(terminals: dict[str, Terminal]) -> st.SearchStrategy:
    alternative = st.lists(st.sampled_from(NTS + list(terminals)), max_size=4)
    return st.fixed_dictionaries({n: st.lists(alternative, min_size=1, max_size=3) for n in NTS})


grammars = grammar_strategy(TERMINALS)
num_grammars = grammar_strategy(NUM_TERMINALS)


def to_ir(
    rules: dict[str, list[list[str]]], ignore: bool, terminals: dict[str, Terminal] = TERMINALS
) -> Grammar:
    g = Grammar("start")
    for t in terminals.values():
        g.add_terminal(t)
    for lhs, alts in rules.items():
        for alt in alts:
            g.add_rule(lhs, *[T(s) if s in terminals else NT(s) for s in alt])
    if ignore:
        g.add_terminal(Terminal("WS", regex=" +"))
        g.ignore.append("WS")
    return g


def to_lark(
    rules: dict[str, list[list[str]]], ignore: bool, terminals: dict[str, str] = LARK_TERMINALS
) -> str:
    lines = [f"{lhs}: " + " | ".join(" ".join(alt) for alt in alts) for lhs, alts in rules.items()]
    lines += [f"{name}: {text}" for name, text in terminals.items()]
    if ignore:
        lines.append("%ignore / +/")
    return "\n".join(lines) + "\n"


def sentences(rules: dict[str, list[list[str]]], rng: random.Random, n: int) -> list[str]:
    """Up to ``n`` random sentences of the grammar (derivations cut off when too deep)."""
    texts = {"A": "a", "BC": "bc", "BD": "bd"}

    def expand(sym: str, depth: int, budget: list[int]) -> str | None:
        budget[0] -= 1
        if budget[0] < 0 or depth > 12:
            return None
        if sym == "NUM":
            return str(rng.randrange(1000))
        if sym in TERMINALS:
            return rng.choice("de") if sym == "D" else texts[sym]
        parts = []
        for s in rng.choice(rules[sym]):
            x = expand(s, depth + 1, budget)
            if x is None:
                return None
            parts.append(x)
        return "".join(parts)

    out: list[str] = []
    for _ in range(n * 3):
        s = expand("start", 0, [60])
        if s is not None:
            out.append(s)
        if len(out) >= n:
            break
    return out


def lark_accepts(parser, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def check(rules, ignore: bool, seed: int, num: bool = False) -> None:
    lark_terms, terms = (NUM_LARK_TERMINALS, NUM_TERMINALS) if num else (LARK_TERMINALS, TERMINALS)
    alphabet = ALPHABET + ["1", "23", "0"] if num else ALPHABET
    source = to_lark(rules, ignore, lark_terms)
    try:
        lp = lark.Lark(source, parser="earley", lexer="basic" if num else "dynamic")
    except lark.exceptions.LarkError:
        assume(False)  # lark refuses the grammar (e.g. nothing derivable)
        return
    try:
        ours = ByteParser(to_ir(rules, ignore, terms))
    except GrammarError as exc:
        assert "derives no finite text" in str(exc)
        return
    rng = random.Random(seed)
    cases = sentences(rules, rng, 6)
    mutated = []
    for s in cases:
        if s:
            i = rng.randrange(len(s))
            mutated += [s[:i] + s[i + 1 :], s[:i] + rng.choice(alphabet) + s[i:]]
            if ignore:
                mutated.append(s[:i] + " " + s[i:])
    cases += mutated
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(6))) for _ in range(6)]
    for text in cases:
        p = ByteParser(ours.tables, lexer=ours.lexer)
        got = p.feed(text) and p.is_accepting()
        expected = lark_accepts(lp, text)
        assert got == expected, (source, text)
        if expected:  # every prefix of a sentence is viable, byte by byte
            q = ByteParser(ours.tables, lexer=ours.lexer)
            for k in range(len(text)):
                assert q.feed(text[k]), (source, text, k)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(grammars, st.integers(0, 2**16))
def test_same_language_as_lark(rules, seed) -> None:
    check(rules, False, seed)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(grammars, st.integers(0, 2**16))
def test_same_language_as_lark_with_ignore(rules, seed) -> None:
    check(rules, True, seed)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(num_grammars, st.integers(0, 2**16), st.booleans())
def test_greedy_numbers_as_lark_basic_lexer(rules, seed, ignore) -> None:
    check(rules, ignore, seed, num=True)


@pytest.mark.parametrize(
    "rules, text",
    [
        ({"start": [["x1"]], "x1": [["x1", "A"], []], "x2": [["A"]]}, "aaaa"),  # left recursion
        ({"start": [["A", "start"], ["A"]], "x1": [["A"]], "x2": [["A"]]}, "aaaa"),  # right
        ({"start": [["x1", "x1", "x1"]], "x1": [["BC"], []], "x2": [["A"]]}, "bcbc"),  # nullable
        ({"start": [["start", "start"], ["D"]], "x1": [["A"]], "x2": [["A"]]}, "dede"),  # ambiguous
    ],
)
def test_named_cases(rules, text) -> None:
    lp = lark.Lark(to_lark(rules, False), parser="earley", lexer="dynamic")
    ours = ByteParser(to_ir(rules, False))
    for k in range(len(text) + 1):
        p = ByteParser(ours.tables, lexer=ours.lexer)
        assert (p.feed(text[:k]) and p.is_accepting()) == lark_accepts(lp, text[:k])
