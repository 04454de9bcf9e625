"""Lark rule templates, look-around inside terminals, and hexadecimal counts.

Templates are checked against Lark itself (the dev environment has it); look-arounds
that stay inside the terminal against Python's ``re.fullmatch`` (the language tether
gives them), and look-arounds that read outside it must be refused with their place.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from grammar_reference import cf_accepts
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError, LimitError
from tether.grammar import Grammar
from tether.grammar.lark import check_regex, parse_lark
from tether.limits import limits
from tether.parser import ByteParser

lark = pytest.importorskip("lark")

# --- rule templates ----------------------------------------------------------------

SEPARATED = """
start: "[" _separated{NAME, ","} "]" | "(" _separated{pair, ";"} ")"
pair: NAME "=" NAME
_separated{x, sep}: x (sep x)*
NAME: /[a-z]+/
"""

NESTED = """
start: box{box{ITEM}} | box{"x"}
box{inner}: "[" inner ("," inner)* "]"
ITEM: /[0-9]/
"""


def _lark_accepts(parser: object, text: str) -> bool:
    try:
        parser.parse(text)  # type: ignore[attr-defined]
    except lark.exceptions.LarkError:
        return False
    return True


@pytest.mark.parametrize("text", [SEPARATED, NESTED])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_templates_match_lark(text: str, data: st.DataObject) -> None:
    g = Grammar.from_lark(text)
    ref = lark.Lark(text, parser="earley")
    s = data.draw(st.text(st.sampled_from(list("[](),;=ab0x")), max_size=14), label="s")
    assert cf_accepts(g, s) == _lark_accepts(ref, s), s


def test_templates_named_examples() -> None:
    g = Grammar.from_lark(SEPARATED)
    for s in ["[a]", "[a,bc,d]", "(a=b)", "(a=b;c=d)"]:
        assert cf_accepts(g, s), s
    for s in ["[]", "[a,]", "[a;b]", "(a)", "(a=b,c=d)"]:
        assert not cf_accepts(g, s), s
    g = Grammar.from_lark(NESTED)
    assert cf_accepts(g, "[[1,2],[3]]") and cf_accepts(g, "[x,x]")
    assert not cf_accepts(g, "[1]") and not cf_accepts(g, "[[x]]")


def test_one_instance_per_distinct_arguments() -> None:
    text = 'start: t{"a"} t{"a"} t{"b"}\nt{x}: x x\n'
    p = parse_lark(text)
    assert sorted(n for n in p.rules if n.startswith("t__")) == ["t__1", "t__2"]
    g = Grammar.from_lark(text)
    assert cf_accepts(g, "aaaabb") and not cf_accepts(g, "aabbaa")


def test_template_parameter_shadows_a_rule() -> None:
    g = Grammar.from_lark('start: t{"q"}\nt{x}: x\nx: "never"\n')
    assert cf_accepts(g, "q") and not cf_accepts(g, "never")


@pytest.mark.parametrize(
    ("text", "fragment", "line", "column"),
    [
        ('start: t{"a", "b"}\nt{x}: x\n', "template 't' takes 1 arguments (x), got 2", 1, 8),
        ('start: tt{"a"}\nt{x}: x\n', "unknown template 'tt'", 1, 8),
        ('start: s{"a"}\ns: "x"\n', "'s' is a rule, not a template", 1, 8),
        ('start: A\nA{x}: "a"\n', "terminal templates", 2, 2),
        ('start: T{"a"}\n', "terminal templates", 1, 8),
        ('start: t{"a"}\nt{x, x}: x\n', "duplicate parameter 'x'", 2, 6),
        ('start: t{"a"}\nt{X}: "a"\n', "expected a parameter name", 2, 3),
        ('start: t{"a"}\nt{x}: x\nt{y}: y\n', "duplicate rule 't'", 3, 1),
        ('start: t{"a"}\nt{x}: x y\n', "unknown name 'y'", 2, 9),
        ('start: t{"a" "b"}\nt{x}: x\n', "expected ',' or '}' in the arguments of template 't'", 1, 14),
        ('start: A\nA: t{"a"}\nt{x}: x\n', "rule template 't' used in a terminal", 2, 4),
        ('start: "a"\n%ignore t{" "}\nt{x}: x\n', "rule template 't' used in a terminal or %ignore", 2, 9),
    ],
)
def test_template_errors_name_the_place(text: str, fragment: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError, match=re.escape(fragment)) as info:
        Grammar.from_lark(text)
    assert (info.value.line, info.value.column) == (line, column)


def test_growing_template_stops_at_a_limit() -> None:
    # every instance doubles its argument: instantiation would never end
    text = 'start: t{"a"}\nt{x}: x | "(" t{(x x)} ")"\n'
    with pytest.raises(LimitError) as info:
        Grammar.from_lark(text)
    assert info.value.limit in ("max_expanded", "max_rules") and "line 2" in info.value.place
    with limits(max_rules=5), pytest.raises(LimitError) as info:
        Grammar.from_lark('start: t{"a"}\nt{x}: x | "(" t{(x "b")} ")"\n')
    assert info.value.limit == "max_rules"


# --- hexadecimal counts (the tokenizer once read '0x10' as '0' then the name 'x10') ----

@given(st.integers(0, 40))
def test_hex_and_decimal_counts_agree(n: int) -> None:
    for form in ('start: "a"{%s}\n', 'start: "a"~%s\n'):
        g_hex = Grammar.from_lark(form % hex(n))
        assert cf_accepts(g_hex, "a" * n)
        assert not cf_accepts(g_hex, "a" * (n + 1))


def test_hex_attribute_and_bad_numbers() -> None:
    g = Grammar.from_lark('start: a\na[max_tokens=0x10]: /[a-z]+/\n')
    assert any("max_tokens=" in w for w in g.warnings)
    with pytest.raises(GrammarError, match="expected a number, got '0xZZ'") as info:
        Grammar.from_lark('start: "a"{0xZZ}\n')
    assert (info.value.line, info.value.column) == (1, 12)
    with pytest.raises(GrammarError, match="expected a number, got '3b'"):
        Grammar.from_lark('start: "a"{3b}\n')


# --- look-around inside terminals ----------------------------------------------------

INSIDE = [
    r"\/(?!\/)[a-z\/]*\/",  # lark.lark's REGEXP: a '/' not followed by '/'
    r"a(?=b)[a-z]",  # the look-ahead reads the next character of the terminal
    r"ab(?<=b)c",  # a look-behind over text already in the terminal
    r"[a-c]+(?<!a)d",  # ... after a repetition
    r"x(?=[a-c]{2})[a-d]{2,}",
    r"(?:a(?!b)|b)[a-d]",  # inside an alternative, inside a group
    r"q(?!ab)[a-d][a-d]",
]

OUTSIDE = [
    (r"a(?=b)", "look-ahead '(?=...)' reads past the end"),
    (r"[?](?![a-z])", "look-ahead '(?!...)' reads past the end"),
    (r"(?<!a)b", "look-behind '(?<!...)' reads before the start"),
    (r"a(?!bc)b", "look-ahead '(?!...)' reads past the end"),
    (r"a(?=b)b?", "look-ahead '(?=...)' reads past the end"),
    (r"(?:x|a(?=bc))c", "look-ahead '(?=...)' reads past the end"),
]


@pytest.mark.parametrize("pattern", INSIDE)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_lookaround_inside_the_terminal_is_exact(pattern: str, data: st.DataObject) -> None:
    g = Grammar.from_lark(f"start: A\nA: /{pattern}/\n")
    s = data.draw(st.text(st.sampled_from(list("abcdqx/?")), max_size=8), label="s")
    assert cf_accepts(g, s) == (re.fullmatch(pattern, s) is not None), s


@pytest.mark.parametrize(("pattern", "fragment"), OUTSIDE)
def test_lookaround_outside_the_terminal_is_refused_at_its_place(pattern: str, fragment: str) -> None:
    # NAME may follow A and starts with the letters the look-aheads read, and no other
    # terminal continues A: the grammar does not decide them (see longest_match.py)
    text = f'start: A NAME\nA: /{pattern}/\nNAME: /[a-z]+/\n'
    with pytest.raises(GrammarError, match=re.escape(fragment)) as info:
        Grammar.from_lark(text)
    assert "look-around is not supported here" in str(info.value)
    look = re.search(r"\(\?<?[=!]", pattern)
    assert look is not None
    assert (info.value.line, info.value.column) == (2, 5 + look.start())


def test_lookaround_inside_an_alternative_with_text_after() -> None:
    g = Grammar.from_lark("start: A\nA: /(?:x|a(?=b))[a-c]/\n")
    assert cf_accepts(g, "ab") and cf_accepts(g, "xa") and not cf_accepts(g, "ac")


def test_lookaround_in_gbnf_ecma_regexes_still_refused() -> None:
    # ECMA-flavoured regex terminals are not analysed: look-around stays refused
    with pytest.raises(GrammarError, match="look-around is not supported"):
        check_regex("a(?=b)b", "", "x /a(?=b)b/", 2, "", flavor="ecma")


REPEATED = [  # look-aheads inside repetitions, decided inside the regex: rewritten away
    r"\/\*(\*(?!\/)|[^*])*\*\/",  # verilog.lark's MULTILINE_COMMENT
    r"(?:a(?!b)|b)*c",
    r"(?:a|b(?=a))*x",
    r"(?:x(?=[ab])|[abc])+d",
    r"(?:[ab](?![ab])c?)*b",
    r"(?:a(?!b)[a-c]){2,3}c",
    r"(?:(?:a(?=c))*c)+",
]


@pytest.mark.parametrize("pattern", REPEATED)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_lookahead_inside_a_repetition_is_exact(pattern: str, data: st.DataObject) -> None:
    g = Grammar.from_lark(f"start: A\nA: /{pattern}/\n")
    s = data.draw(st.text(st.sampled_from(list("abcdx/*")), max_size=9), label="s")
    assert cf_accepts(g, s) == (re.fullmatch(pattern, s) is not None), s


def test_rewritten_repetition_named_examples() -> None:
    g = Grammar.from_lark("start: C\nC: /\\/\\*(\\*(?!\\/)|[^*])*\\*\\//\n")
    for s in ["/**/", "/* a */", "/***/", "/* * / */", "/*\n*/"]:
        assert cf_accepts(g, s), s
    for s in ["/* */ */", "/*/", "/* a", "/**/x"]:
        assert not cf_accepts(g, s), s
    # with the i flag the classes carry the case folding
    g = Grammar.from_lark("start: A\nA: /(?:a(?!b)|b)*c/i\n")
    assert cf_accepts(g, "AC") and cf_accepts(g, "BaC") and not cf_accepts(g, "aBc")


def test_lookahead_reading_past_a_repetition_out_of_the_terminal_is_refused() -> None:
    # the look-ahead of the last iteration reads the text after the lexeme
    with pytest.raises(GrammarError, match="look-around is not supported here") as info:
        Grammar.from_lark("start: A NAME\nA: /(?:a(?!b))+/\nNAME: /[a-z]+/\n")
    assert info.value.line == 2


def test_longer_lookahead_inside_a_repetition_is_refused_by_the_regex_layer() -> None:
    with pytest.raises(GrammarError, match="inside a group repeated") as info:
        Grammar.from_lark("start: A\nA: /(?:a(?!bc)[a-c])*c/\n")
    assert info.value.line == 2


# --- a look-ahead after the lexeme, decided by the greedy lexer and the grammar --------

def _lexed_accepts(g: Grammar, text: str) -> bool:
    """Accepted by tether's own greedy lexer and parser (the look-aheads below are
    decided by the lexer, which ``cf_accepts`` does not model)."""
    p = ByteParser(g)
    return p.feed(text) and p.is_accepting()


OPS = """
start: item*
item: NAME OP?
OP: /[+*]|[?](?![a-z])/
NAME: /[?]?[a-z]+/
%ignore " "
"""


@settings(max_examples=300, deadline=None)
@given(s=st.text(st.sampled_from(list("ab?+ ")), max_size=9))
def test_lookahead_continued_by_another_terminal_matches_lark(s: str) -> None:
    # lark.lark's OP: '?' before a letter is the start of a NAME, never an OP
    g = Grammar.from_lark(OPS)
    ref = lark.Lark(OPS, parser="lalr")
    assert _lexed_accepts(g, s) == _lark_accepts(ref, s), s


AT_THE_END = """
start: "(" A ")" | A
A: /[?](?![a-z])|[a-z]+/
"""


@settings(max_examples=200, deadline=None)
@given(s=st.text(st.sampled_from(list("()?ab")), max_size=6))
def test_lookahead_where_nothing_that_follows_starts_with_it_matches_lark(s: str) -> None:
    g = Grammar.from_lark(AT_THE_END)
    ref = lark.Lark(AT_THE_END, parser="lalr")
    assert _lexed_accepts(g, s) == _lark_accepts(ref, s), s


def test_decided_lookaheads_are_noted_in_the_lowering() -> None:
    g = Grammar.from_lark(OPS)
    assert any("terminal OP" in x and "continued by NAME" in x for x in g.lowering)
    g = Grammar.from_lark(AT_THE_END)
    assert any("nothing that may follow starts with" in x for x in g.lowering)


def test_continuing_terminal_not_allowed_everywhere_is_refused() -> None:
    # after "x" only OP may come: a NAME could not continue the lexeme there
    text = 'start: NAME OP? | "x" OP NAME\nOP: /[?](?![a-z])/\nNAME: /[?]?[a-z]+/\n'
    with pytest.raises(GrammarError, match="reads past the end") as info:
        Grammar.from_lark(text)
    assert info.value.line == 2


# --- the shared grammars: what loads, and the construct named where one does not ------

DATA = Path(__file__).resolve().parents[3] / "../shared/data/grammars"


@pytest.mark.skipif(not (DATA / "manifest.json").exists(), reason="shared grammar data is absent")
def test_shared_lark_grammars_load_or_name_the_construct() -> None:
    manifest = json.loads((DATA / "manifest.json").read_text())
    refused: dict[str, tuple[str, int]] = {}
    for e in manifest["grammars"]:
        if e["format"] != "lark":
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Grammar.from_lark((DATA / e["file"]).read_text(), start=e["start"], source=e["file"])
        except GrammarError as exc:
            refused[e["file"]] = (exc.reason, exc.line)
    # lark.lark: OP: /[+*]|[?](?![a-z])/ is decided by RULE's longest match; verilog.lark's
    # comment (a look-ahead inside a repetition) is rewritten; python.lark's %declare of
    # the Indenter's terminals loads with a warning
    assert refused == {}


def test_python_grammar_loads_with_indentation_unchecked() -> None:
    text = (DATA / "lark/lark-parser/python.lark").read_text()
    with pytest.warns(UserWarning, match="indentation is not checked"):
        g = Grammar.from_lark(text, start="file_input")
    assert any("%declare _INDENT _DEDENT" in w for w in g.warnings)
    for s in ["x = 1\n", "def f(a, *b, c=2, **d):\n    return a + c\n", "class A(B):\n    pass\n",
              "for i in range(3):\n    if i % 2:\n        print(i)\n    else:\n        continue\n"]:
        assert _lexed_accepts(g, s), s
    for s in ["def f(:\n    pass\n", "x = = 1\n", "if x\n    pass\n"]:
        assert not _lexed_accepts(g, s), s
    # the approximation: a missing indent is not seen
    assert _lexed_accepts(g, "def f():\nreturn 1\n")


@pytest.mark.parametrize(
    ("text", "fragment", "column"),
    [
        ('start: "a"\n%declare _INDENT FOO\n', "%declare of 'FOO' is not supported", 18),
        ('start: "a"\n%declare\n', "expected terminal names after %declare", 9),
    ],
)
def test_other_declared_terminals_are_refused(text: str, fragment: str, column: int) -> None:
    with pytest.raises(GrammarError, match=re.escape(fragment)) as info:
        Grammar.from_lark(text)
    assert (info.value.line, info.value.column) == (2, column)



# --- look-arounds decided on the whole terminal: the parts of a definition are joined --

def test_lookbehind_reading_an_earlier_part_of_the_terminal() -> None:
    # Lark's own common.lark writes ESCAPED_STRING this way: the look-behind of the
    # second part reads the opening quote or the text before it, all inside the lexeme
    g = Grammar.from_lark(
        "start: ESCAPED_STRING\n"
        "_STRING_INNER: /.*?/\n"
        "_STRING_ESC_INNER: _STRING_INNER /(?<!\\\\)(\\\\\\\\)*?/\n"
        'ESCAPED_STRING: "\\"" _STRING_ESC_INNER "\\""\n'
    )
    assert cf_accepts(g, '"ab"') and cf_accepts(g, '""') and cf_accepts(g, '"a\\\\"')
    assert not cf_accepts(g, '"a\\"')
    g = Grammar.from_lark('start: A\nA: "x" /(?<=x)y/\n')
    assert cf_accepts(g, "xy")


def test_lookahead_reading_a_later_part_of_the_terminal() -> None:
    g = Grammar.from_lark('start: A\nA: B "q"\nB: /y(?=q)/\n')
    assert cf_accepts(g, "yq")


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ('start: A\nA: "x" B\nB: /y(?=q)/\n', 3, 6),  # B ends A: its look-ahead reads past A
        ('start: B\nA: B "q"\nB: /y(?=q)/\n', 3, 6),  # B on its own is a lexeme too
        ('start: A\nA: /(?<=x)y/ "z"\n', 2, 5),
        ('start: A\nA: "x"? /(?<=x)y/\n', 2, 10),  # the part before it may be empty
    ],
)
def test_joined_terminal_still_refuses_what_reads_outside(text: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError, match="look-around is not supported here") as info:
        Grammar.from_lark(text)
    assert (info.value.line, info.value.column) == (line, column)


# --- anchors in Lark terminals: \b \B inside the terminal kept, the rest refused --------

@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        (r"a\b ", ["a "], ["ab"]),
        (r"[a-z]+\B[a-z]", ["ab", "abc"], ["a"]),
        (r" \b[a-z]+", [" ab"], [" "]),
    ],
)
def test_word_boundary_inside_the_terminal(pattern: str, yes: list[str], no: list[str]) -> None:
    g = Grammar.from_lark(f"start: A\nA: /{pattern}/\n")
    for s in yes:
        assert cf_accepts(g, s) and re.fullmatch(pattern, s), s
    for s in no:
        assert not cf_accepts(g, s) and not re.fullmatch(pattern, s), s


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        (r"if\b", "word boundary '\\b'"),
        (r"\Bx", "word boundary '\\B'"),
        (r"^a", "'^' refers to the whole input"),
        (r"a$", "'$' refers to the whole input"),
        (r"\Aa", "'\\A' refers to the whole input"),
        (r"a\Z", "'\\Z' refers to the whole input"),
    ],
)
def test_anchors_reading_outside_are_refused_at_their_place(pattern: str, fragment: str) -> None:
    with pytest.raises(GrammarError, match=re.escape(fragment)) as info:
        Grammar.from_lark(f"start: A\nA: /{pattern}/\n")
    assert "anchor not supported here" in str(info.value)
    anchor = re.search(r"\\[bBAZ]|\^|\$", pattern)
    assert anchor is not None
    assert (info.value.line, info.value.column) == (2, 5 + anchor.start())


def test_anchor_characters_in_classes_and_escapes_are_plain() -> None:
    g = Grammar.from_lark("start: A\nA: /[$^]\\$\\^/\n")
    assert cf_accepts(g, "$$^") and cf_accepts(g, "^$^")


JOINED = [  # (terminal body in Lark, the joined regex it means)
    ("/[xy]/ /(?<=x)[a-c]+/", r"[xy](?<=x)[a-c]+"),
    ("/[a-c]+(?=[ab]{2})/ /[a-c]{2,}/", r"[a-c]+(?=[ab]{2})[a-c]{2,}"),
    ('"q"? /[a-c](?<![bq])[a-c]/', r"q?[a-c](?<![bq])[a-c]"),
]


@pytest.mark.parametrize(("body", "joined"), JOINED)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_joined_terminal_matches_its_joined_regex(body: str, joined: str, data: st.DataObject) -> None:
    g = Grammar.from_lark(f"start: A\nA: {body}\n")
    s = data.draw(st.text(st.sampled_from(list("abcqxy")), max_size=7), label="s")
    assert cf_accepts(g, s) == (re.fullmatch(joined, s) is not None), s
