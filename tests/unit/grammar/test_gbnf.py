"""GBNF front end: syntax, lowering policy (greedy-safe terminals), llama.cpp data."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from grammar_reference import cf_accepts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError
from tether.grammar import Grammar
from tether.grammar.ast import Lit, Seq
from tether.grammar.gbnf import parse_gbnf
from tether.grammar.lower import Lowering

DATA = Path(__file__).resolve().parents[3] / "../shared/data/grammars"


def test_literals_classes_and_escapes() -> None:
    g = Grammar.from_gbnf(r'root ::= "a\x41\u00e9\t\"" [^\n\x00-\x1F] . "\\"')
    assert cf_accepts(g, 'aAé\t"x\U0001F600\\')
    assert not cf_accepts(g, 'aAé\t"\nz\\')


@pytest.mark.parametrize(
    ("rule", "yes", "no"),
    [
        ('root ::= "a"*', ["", "a", "aaaa"], ["b"]),
        ('root ::= "a"+', ["a", "aaa"], [""]),
        ('root ::= "a"?', ["", "a"], ["aa"]),
        ("root ::= [ab]{4}", ["abab"], ["aba", "ababa"]),
        ("root ::= [ab]{2,}", ["ab", "abbb"], ["a"]),
        ("root ::= [ab]{0,2}", ["", "b", "ab"], ["aba"]),
        ('root ::= ("0x" [A-F0-9]{2} " "?){3,5}', ["0xFF 0x00 0x1A", "0xFF0x000x1A0xAB0xCD"], ["0xFF 0x00", "0xFF 0x00 0x1A 0x1B 0x1C 0x1D"]),
        ("root ::= x\nx ::= \"a\" x | \"b\"", ["b", "aab"], ["a", "ba"]),
        ("root ::= root \"a\" | \"b\"", ["b", "baa"], ["ab"]),  # left recursion is allowed
        ("root ::= | \"x\"  # comment\n", ["", "x"], ["xx"]),
    ],
)
def test_operators(rule: str, yes: list[str], no: list[str]) -> None:
    g = Grammar.from_gbnf(rule)
    for s in yes:
        assert cf_accepts(g, s), s
    for s in no:
        assert not cf_accepts(g, s), s


def test_multiline_rules_and_groups() -> None:
    g = Grammar.from_gbnf('root ::=\n  "{" (\n    "a" |\n    "b"\n  )* "}"\nother ::= "x"\n')
    assert cf_accepts(g, "{abba}")
    assert any("other" in w for w in g.warnings)


def test_ws_before_mandatory_newline_stays_character_level() -> None:
    # greedy [ \t\n]* would swallow the final "\n": it must not become one terminal
    g = Grammar.from_gbnf('root ::= item "\\n"\nitem ::= "x" ws item | "y" ws\nws ::= [ \\t\\n]*')
    pats = {t.pattern for t in g.terminals.values()}
    assert r"[\x09\x0a\ ]" in pats
    assert not any(p.endswith("*") or p.endswith("+") for p in pats)
    assert any(d.startswith("split") for d in g.lowering)
    parser = pytest.importorskip("tether.parser")
    assert parser.accepts(g, "x\n y \n")
    assert not parser.accepts(g, "x y ")


def test_regular_context_is_absorbed_into_one_exact_terminal() -> None:
    # inside one regex the regex engine resolves the choice: no lexing problem at all
    g = Grammar.from_gbnf('root ::= "x" ws "\\n"\nws ::= [ \\t\\n]*')
    assert [t.regex for t in g.terminals.values()] == ["x[\\x09\\x0a\\ ]*\\x0a"]


def test_safe_repetition_becomes_one_terminal() -> None:
    g = Grammar.from_gbnf('root ::= "[" list "]"\nlist ::= num | num "," list\nnum ::= [0-9]+')
    assert any(t.regex == "[0-9]+" for t in g.terminals.values())


def test_keyword_and_identifier_stay_apart() -> None:
    g = Grammar.from_gbnf('root ::= ("if" "(" id ")" | id "=" id) ";"\nid ::= [a-z]+')
    for s in ["if(x);", "if=x;", "ifx=y;"]:
        assert cf_accepts(g, s), s


def test_whole_regular_grammar_is_one_terminal() -> None:
    g = Grammar.from_gbnf('root ::= item+\nitem ::= "- " [^\\n]+ "\\n"')
    assert len(g.terminals) == 1 and len(g.rules) == 1


def test_underscore_names_and_strict_mode() -> None:
    text = 'root ::= a_b\na_b ::= "x"'
    assert cf_accepts(Grammar.from_gbnf(text), "x")
    with pytest.raises(GrammarError):
        Grammar.from_gbnf(text, strict=True)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('root ::= "a" | root "a"', "left-recursive"),
        ('root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | empty asdf "d" | "e"\nempty ::= "blah" | ', "left-recursive"),
    ],
)
def test_strict_mode_rejects_left_recursion(text: str, fragment: str) -> None:
    assert Grammar.from_gbnf(text).rules
    with pytest.raises(GrammarError, match=fragment):
        Grammar.from_gbnf(text, strict=True)


@pytest.mark.skipif(not DATA.exists(), reason="shared grammar data is absent")
@pytest.mark.parametrize("path", sorted(DATA.glob("gbnf/*/*.gbnf")) if DATA.exists() else [], ids=lambda p: p.name)
def test_every_data_gbnf_loads(path: Path) -> None:
    g = Grammar.from_gbnf(path.read_text(), source=path.name)
    assert g.rules and g.terminals


# ---------------------------------------------------------------------------
# differential: the lowered grammar under greedy lexing (tether.parser.ByteParser)
# accepts exactly the character-level language (every character its own terminal)

ALPHA = "abc"


def _char_level(text: str) -> Grammar:
    """The oracle lowering: every character is a terminal (no lexing choices at all)."""
    rules, _ = parse_gbnf(text)

    def split(n):  # type: ignore[no-untyped-def]
        from dataclasses import replace

        if isinstance(n, Lit):
            return Seq(tuple(Lit(c) for c in n.text)) if len(n.text) > 1 else n
        if hasattr(n, "items"):
            return replace(n, items=tuple(split(i) for i in n.items))
        if hasattr(n, "item"):
            return replace(n, item=split(n.item))
        return n

    rules = {k: split(v) for k, v in rules.items()}
    return Lowering(rules, "root", mode="lexeme").run()


@st.composite
def gbnf_grammars(draw: st.DrawFn) -> str:
    n_rules = draw(st.integers(1, 3))
    names = ["root"] + [f"r{i}" for i in range(1, n_rules)]

    def expr(depth: int) -> str:
        kind = draw(st.sampled_from(["lit", "cls", "ref", "seq", "alt", "rep"] if depth < 3 else ["lit", "cls"]))
        if kind == "lit":
            return '"' + draw(st.text(ALPHA, min_size=1, max_size=3)) + '"'
        if kind == "cls":
            neg = draw(st.sampled_from(["", "", "^"]))
            if neg and draw(st.booleans()):
                return "."
            return "[" + neg + "".join(sorted(draw(st.sets(st.sampled_from(ALPHA), min_size=1)))) + "]"
        if kind == "ref":
            return draw(st.sampled_from(names))
        if kind == "seq":
            return " ".join(expr(depth + 1) for _ in range(draw(st.integers(2, 3))))
        if kind == "alt":
            return "(" + " | ".join(expr(depth + 1) for _ in range(2)) + ")"
        return "(" + expr(depth + 1) + ")" + draw(st.sampled_from(["*", "+", "?", "{1,2}", "{2}", "{0,3}", "{1,}"]))

    # every rule gets a terminating alternative so the grammar is productive
    return "\n".join(f"{n} ::= {expr(0)} | {expr(2)}" for n in names)


def _samples(g: Grammar, rnd: random.Random, k: int) -> list[str]:
    """Random derivations of ``g`` (depth-limited), as positive examples."""
    import re as _re

    by: dict[str, list] = {}
    for r in g.rules:
        by.setdefault(r.lhs, []).append(r.rhs)
    out = []
    for _ in range(k * 3):
        budget = [30]

        def gen(name: str, budget: list[int] = budget) -> str | None:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            rhs = rnd.choice(by[name])
            s = ""
            for sym in rhs:
                if sym.__class__.__name__ == "NT":
                    x = gen(sym.name)
                    if x is None:
                        return None
                    s += x
                else:
                    t = g.terminals[sym.name]
                    if t.literal is not None:
                        s += t.literal
                    else:
                        cands = [c for c in ALPHA + "d" if _re.fullmatch(t.pattern, c)]
                        s += rnd.choice(cands) if cands else ""
            return s

        x = gen(g.start)
        if x is not None and len(x) <= 8:
            out.append(x)
        if len(out) >= k:
            break
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gbnf_grammars(), st.randoms(use_true_random=False), st.lists(st.text(ALPHA + "d", max_size=5), max_size=6))
def test_greedy_lowering_keeps_the_character_language(text: str, rnd: random.Random, extra: list[str]) -> None:
    parser = pytest.importorskip("tether.parser")
    try:
        oracle = _char_level(text).simplified()
    except GrammarError:
        return  # e.g. a rule that can never finish: both readings reject it
    g = Grammar.from_gbnf(text)
    for s in _samples(oracle, rnd, 6) + extra:
        want = cf_accepts(oracle, s)
        assert parser.accepts(g, s) == want, (text, s, want, str(g), g.lowering)
