"""`to_gbnf`: written grammars read back (strict llama.cpp syntax) with the same language."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError, LimitError
from tether.grammar import Grammar
from tether.grammar.gbnf_writer import to_gbnf
from tether.limits import limits
from tether.parser import accepts

ALPHABET = 'ab"\\\n-]^é€😀'


def same_language(a: Grammar, b: Grammar, texts: list[str]) -> None:
    for t in texts:
        assert accepts(a, t.encode()) == accepts(b, t.encode()), t


def regexes() -> st.SearchStrategy[str]:
    atom = st.one_of(
        st.sampled_from(["a", "b", "é", "😀", r"\"", r"\\", r"\n", r"\-", r"\]", "[ab]", "[^a]", "[a-c]", r"\d",
                         "[€-😀]", "."]),
    )

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, inner).map("".join),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{2,}", "{0,2}"])).map(
                lambda t: f"(?:{t[0]}){t[1]}"),
        )

    return st.recursive(atom, grow, max_leaves=6)


@given(regexes(), st.lists(st.text(alphabet=ALPHABET, max_size=6), max_size=12))
@settings(max_examples=60, deadline=None)
def test_regex_written_as_gbnf_has_the_regex_language(pattern: str, texts: list[str]) -> None:
    gbnf = to_gbnf(Grammar.from_regex(pattern))
    back = Grammar.from_gbnf(gbnf, strict=True)
    for t in texts:
        assert accepts(back, t.encode()) == (re.fullmatch(pattern, t) is not None), (pattern, gbnf, t)


@given(st.lists(st.text(alphabet=ALPHABET, max_size=5), min_size=1, max_size=6),
       st.lists(st.text(alphabet=ALPHABET, max_size=5), max_size=8))
@settings(max_examples=60, deadline=None)
def test_choices_written_as_gbnf(choices: list[str], others: list[str]) -> None:
    back = Grammar.from_gbnf(to_gbnf(Grammar.from_choices(choices)), strict=True)
    for t in choices + others:
        assert accepts(back, t.encode()) == (t in choices), t


GBNF = [
    'root ::= "a" ws ( "b" | [0-9]+ ) ws\nws ::= [ \\t\\n]*\n',
    'root ::= item ("," item){0,3}\nitem ::= [a-z]+ | "\\"" [^"]* "\\""\n',
    'root ::= expr\nexpr ::= term ("+" term)*\nterm ::= [0-9] | "(" expr ")"\n',
    "root ::= x\nx_y ::= \"q\"\nx ::= x_y? .\n",
]


@pytest.mark.parametrize("text", GBNF)
def test_gbnf_round_trip(text: str) -> None:
    g = Grammar.from_gbnf(text)
    written = to_gbnf(g)
    back = Grammar.from_gbnf(written, strict=True)
    assert to_gbnf(back) == written  # a fixed point after one round
    samples = ["a b ", "a12 ", "ab", "abc", "x,yz", '"q,",a', "1+(2+3)", "1+", "(1", "qz", "z", "q", ""]
    same_language(g, back, samples)


def test_sequence_and_union_of_char_level_grammars() -> None:
    g = Grammar.sequence(Grammar.from_choices(["a", "ab"]), Grammar.from_gbnf('root ::= "b"? "c"\n'))
    back = Grammar.from_gbnf(to_gbnf(g), strict=True)
    same_language(g, back, ["ac", "abc", "abbc", "ab", "c", "bc"])


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Grammar.from_lark('start: "a" NAME\nNAME: /[a-z]+/\n'), "lexed greedily"),
    (lambda: Grammar.from_lark('start: NAME+\nNAME: /[a-z]+/\n%ignore " "\n'), "lexed greedily"),
    (lambda: Grammar.from_json_schema({"type": "object"}), "lexed greedily"),
    (lambda: Grammar.from_regex(r"^a"), "cannot write"),
    (lambda: Grammar.from_regex(r"(?=a)a"), "cannot write"),
    (lambda: Grammar.from_regex("a{100}"), "cannot write"),
    (lambda: Grammar.from_regex("a", flavor="ecma"), "ECMAScript"),
])
def test_what_gbnf_cannot_say_is_refused(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GrammarError, match=message):
        to_gbnf(make())


def test_output_size_is_bounded() -> None:
    g = Grammar.from_choices([f"choice number {i}" for i in range(200)])
    with limits(max_text_chars=1000), pytest.raises(LimitError):
        to_gbnf(g)


def test_rule_names_are_gbnf_names_and_the_start_is_root() -> None:
    g = Grammar.from_gbnf('expr ::= root "+" x_y | x-y\nroot ::= "r"\nx_y ::= "a"\nx-y ::= "b"\n', start="expr")
    written = to_gbnf(g)
    assert written.startswith("root ::= ")
    back = Grammar.from_gbnf(written, strict=True)
    same_language(g, back, ["r+a", "b", "a", "r+b", "r", ""])


def test_deep_nesting_is_a_limit_error() -> None:
    pattern = "a"
    for _ in range(40):
        pattern = f"(?:b{pattern})*"
    g = Grammar.from_regex(pattern)
    Grammar.from_gbnf(to_gbnf(g), strict=True)  # within the default limits
    with limits(max_nesting=20), pytest.raises(LimitError, match="max_nesting.*writing the grammar as GBNF"):
        to_gbnf(g)
