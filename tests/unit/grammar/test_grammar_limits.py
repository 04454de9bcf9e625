"""Hostile grammar text: every front end fails closed within the active `tether.limits`.

Each limit (text size, rules, nesting, repeat counts, expanded size, alternatives) raises
LimitError naming the limit, the value and the place; malformed numbers and escapes raise
GrammarError, never a foreign exception; deep and long inputs load without recursion.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError, LimitError, TetherError
from tether.grammar.ir import Grammar
from tether.limits import Limits, limits
from tether.parser import accepts

PLACE = re.compile(r"line \d+ column \d+")


def _limit(exc: pytest.ExceptionInfo[LimitError], name: str) -> LimitError:
    err = exc.value
    assert err.limit == name, str(err)
    return err


# ---- repeat counts -------------------------------------------------------------------


def test_gbnf_huge_repeat_count_is_a_limit_error() -> None:
    with pytest.raises(LimitError) as exc:
        Grammar.from_gbnf('root ::= "a"{99999999999}')
    err = _limit(exc, "max_repeat")
    assert err.value == 99999999999 and err.place == "line 1 column 14"


def test_lark_repeat_past_max_repeat() -> None:
    with pytest.raises(LimitError) as exc:
        Grammar.from_lark('start: "a"{100001}')
    assert _limit(exc, "max_repeat").place == "line 1 column 12"
    with limits(max_repeat=1000), pytest.raises(LimitError) as exc2:
        Grammar.from_lark('start: "a" ~ 5..1001')
    assert PLACE.search(_limit(exc2, "max_repeat").place)


def test_kbnf_except_count_past_max_repeat() -> None:
    with limits(max_repeat=10), pytest.raises(LimitError) as exc:
        Grammar.from_kbnf('start ::= except!("x", 11);')
    assert PLACE.search(_limit(exc, "max_repeat").place)


@pytest.mark.parametrize("front", ["gbnf", "lark"])
def test_count_with_thousands_of_digits_is_a_limit_error(front: str) -> None:
    digits = "9" * 5000  # int() of this raises ValueError in Python itself
    text = f'root ::= "a"{{{digits}}}' if front == "gbnf" else f'start: "a"{{{digits}}}'
    with pytest.raises(LimitError) as exc:
        Grammar.from_gbnf(text) if front == "gbnf" else Grammar.from_lark(text)
    assert _limit(exc, "max_repeat").value == "a 5000-digit number"


def test_nested_counts_past_max_expanded() -> None:
    # each count is allowed, their product (10^12 characters) is not
    with pytest.raises(LimitError) as exc:
        Grammar.from_gbnf('root ::= (("a"{10000}){10000}){10000}')
    err = _limit(exc, "max_expanded")
    assert PLACE.search(err.place)
    with pytest.raises(LimitError) as exc2:
        Grammar.from_lark('start: (("a"{10000}){10000})')
    _limit(exc2, "max_expanded")


def test_lark_terminal_inlining_past_max_expanded() -> None:
    text = 'A: "ab"{1000}\nB: A{1000}\nC: B{1000}\nstart: C'
    with pytest.raises(LimitError) as exc:
        Grammar.from_lark(text)
    assert _limit(exc, "max_expanded").place.startswith("line ")


def test_large_repeat_within_limits_is_exact() -> None:
    g = Grammar.from_gbnf('root ::= "a"{30000}')
    assert accepts(g, b"a" * 30000)
    assert not accepts(g, b"a" * 29999)
    assert not accepts(g, b"a" * 30001)


# ---- text, rules, alternatives --------------------------------------------------------


@pytest.mark.parametrize("front", ["gbnf", "lark", "kbnf"])
def test_text_size_limit(front: str) -> None:
    text = {"gbnf": 'root ::= "a"', "lark": 'start: "a"', "kbnf": 'start ::= "a";'}[front]
    text += " " * 200
    load = {"gbnf": Grammar.from_gbnf, "lark": Grammar.from_lark, "kbnf": Grammar.from_kbnf}[front]
    with limits(max_text_chars=100), pytest.raises(LimitError) as exc:
        load(text)
    assert _limit(exc, "max_text_chars").value == len(text)


def test_rule_count_limit() -> None:
    text = "\n".join(f'r{i} ::= "x"' for i in range(50)) + '\nroot ::= r0'
    with limits(max_rules=20), pytest.raises(LimitError) as exc:
        Grammar.from_gbnf(text)
    assert _limit(exc, "max_rules").value == 51


def test_alternatives_limit() -> None:
    text = "root ::= " + " | ".join(f'"w{i}"' for i in range(300))
    with limits(max_alternatives=100), pytest.raises(LimitError) as exc:
        Grammar.from_gbnf(text)
    _limit(exc, "max_alternatives")
    with limits(max_alternatives=100), pytest.raises(LimitError):
        Grammar.from_choices([f"w{i}" for i in range(300)])


# ---- nesting ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [500, 10_000])
@pytest.mark.parametrize("front", ["gbnf", "lark", "kbnf"])
def test_deep_parentheses_are_a_limit_error(front: str, depth: int) -> None:
    inner = "(" * depth + '"a"' + ")" * depth
    text = {"gbnf": f"root ::= {inner}", "lark": f"start: {inner}", "kbnf": f"start ::= {inner};"}[front]
    load = {"gbnf": Grammar.from_gbnf, "lark": Grammar.from_lark, "kbnf": Grammar.from_kbnf}[front]
    with pytest.raises(LimitError) as exc:
        load(text)
    err = _limit(exc, "max_nesting")
    assert err.place.startswith("line 1 column ")


def test_lark_prefix_negation_chain_is_a_limit_error() -> None:
    with pytest.raises(LimitError) as exc:
        Grammar.from_lark("A: " + "~" * 5000 + '"a"\nstart: A')
    _limit(exc, "max_nesting")


def test_nesting_at_the_limit_loads_and_parses() -> None:
    # alternations inside sequences, as deep as the default limit allows
    n = 95
    text = "root ::= " + '("a" | ' * n + '"z"' + ' "b")' * n
    g = Grammar.from_gbnf(text)
    assert accepts(g, b"a")
    assert accepts(g, b"z" + b"b" * n)
    assert not accepts(g, b"z" + b"b" * (n - 1))


def test_lark_terminal_chain_past_max_nesting() -> None:
    text = "\n".join(f"T{i}: T{i + 1}" for i in range(1000)) + '\nT1000: "x"\nstart: T0'
    with pytest.raises(LimitError) as exc:
        Grammar.from_lark(text)
    _limit(exc, "max_nesting")


def test_nested_lark_blocks_are_bounded() -> None:
    text = 'start: "a"'
    for _ in range(250):
        text = "start: %lark {\n" + text + "\n}"
    with pytest.raises(TetherError):
        Grammar.from_lark(text)


# ---- long chains ------------------------------------------------------------------------


def _unit_chain(n: int) -> str:
    return "\n".join(f"r{i} ::= r{i + 1}" for i in range(n)) + f'\nr{n} ::= "x"'


def _right_chain(n: int) -> str:
    return "\n".join(f'r{i} ::= "x" r{i + 1} | "y"' for i in range(n)) + f'\nr{n} ::= "z"'


@pytest.mark.parametrize("n", [100, 1000])
def test_gbnf_unit_chain(n: int) -> None:
    g = Grammar.from_gbnf(_unit_chain(n), start="r0")
    assert accepts(g, b"x") and not accepts(g, b"xx")


@pytest.mark.parametrize("n", [100, 1000])
def test_gbnf_right_chain(n: int) -> None:
    g = Grammar.from_gbnf(_right_chain(n), start="r0")
    assert accepts(g, b"xxy")
    assert accepts(g, b"x" * n + b"z")
    assert not accepts(g, b"x" * (n + 1) + b"z")


@pytest.mark.slow
@pytest.mark.parametrize("chain", [_unit_chain, _right_chain])
def test_gbnf_chain_of_10000_rules(chain) -> None:  # type: ignore[no-untyped-def]
    g = Grammar.from_gbnf(chain(10_000), start="r0")
    assert accepts(g, b"x" if chain is _unit_chain else b"xxxy")


def test_lark_rule_chain_of_1000() -> None:
    text = "\n".join(f"r{i}: r{i + 1}" for i in range(1000)) + '\nr1000: "x"\nstart: r0'
    g = Grammar.from_lark(text)
    assert accepts(g, b"x")


def test_kbnf_chain_of_1000() -> None:
    text = "\n".join(f"r{i} ::= 'x' r{i + 1} | 'y';" for i in range(1000)) + "\nr1000 ::= 'z';"
    g = Grammar.from_kbnf(text, start="r0")
    assert accepts(g, b"xxy")


def test_exponential_rule_inlining_stays_small() -> None:
    # r_i ::= r_{i+1} r_{i+1}: inlining every rule would spell 2^60 characters
    text = "\n".join(f"r{i} ::= r{i + 1} r{i + 1}" for i in range(60)) + '\nr60 ::= "a" | "b"'
    from tether.grammar.lower import UNIT_SIZE

    g = Grammar.from_gbnf(text, start="r0")
    assert len(g.rules) < 1000
    # a terminal spells at most UNIT_SIZE characters (a few regex characters each)
    assert all(len(t.regex or t.literal or "") < 8 * UNIT_SIZE for t in g.terminals.values())
    assert not accepts(g, b"ab")  # every sentence has 2^60 characters


# ---- malformed numbers and escapes: GrammarError, never a foreign exception -----------------


@pytest.mark.parametrize("text", [
    'root ::= "\\ud800"',            # a surrogate escape
    'root ::= "\\U00110000"',        # past U+10FFFF
    'root ::= "a"{²}',               # a Unicode digit
    'root ::= "\ud800"',             # a lone surrogate in the text itself
])
def test_gbnf_bad_escapes_and_numbers(text: str) -> None:
    with pytest.raises(GrammarError) as exc:
        Grammar.from_gbnf(text)
    assert exc.value.line >= 1


@pytest.mark.parametrize("text", [
    'start: "\\U00110000"',
    'start: "\\ud800"',
    'start: "a"{-3}',
    'A[max_tokens=0123]: "a"\nstart: A',
    'A[temperature=0x1.5]: "a"\nstart: A',
])
def test_lark_bad_escapes_and_numbers(text: str) -> None:
    with pytest.raises(GrammarError):
        Grammar.from_lark(text)


def test_kbnf_bad_escape() -> None:
    with pytest.raises(GrammarError):
        Grammar.from_kbnf("start ::= '\\U00110000';")


def test_non_string_text_is_a_grammar_error() -> None:
    with pytest.raises(GrammarError):
        Grammar.from_gbnf(b'root ::= "a"')  # type: ignore[arg-type]


def test_kbnf_except_of_a_long_recursive_free_chain() -> None:
    # the regularity check of except! operands was exponential in shared sub-rules
    rules = "\n".join(f"r{i} ::= r{i + 1} r{i + 1};" for i in range(40)) + "\nr40 ::= 'ab';"
    text = "start ::= except!(r0, 3) 'c';\n" + rules
    try:
        Grammar.from_kbnf(text)
    except TetherError:
        pass


# ---- any text: a Grammar or a TetherError, never another exception -------------------------


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from('ab"[]()|*+?{},0123456789:=\n \\xu^-.~&/#;\'%r!'), max_size=60))
def test_random_text_fails_closed(text: str) -> None:
    small = Limits(max_repeat=50, max_expanded=5000, max_nesting=30, compile_seconds=5.0)
    for load in (Grammar.from_gbnf, Grammar.from_lark, Grammar.from_kbnf):
        with limits(small):
            try:
                load(text)
            except TetherError:
                pass


def test_rules_after_expansion_are_counted() -> None:
    # one rule in the text, 500 after the bounded repetition is expanded
    with limits(max_rules=100), pytest.raises(LimitError) as exc:
        Grammar.from_lark('start: item{0,500}\nitem: "a" "-"')
    assert _limit(exc, "max_rules").value > 100


def test_lark_deep_json_block_is_a_limit_error() -> None:
    text = "start: %json " + "[" * 100_000 + "]" * 100_000
    with pytest.raises(TetherError):
        Grammar.from_lark(text)
