"""ByteParser: greedy lexing, lazy/stop/max_len terminals, %ignore, queries and state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import GrammarError
from tether.grammar.ir import NT, Grammar, T, Terminal
from tether.parser import ByteParser, Lexer, accepts, is_viable_prefix


def json_like() -> Grammar:
    g = Grammar("value")
    for name, kw in [
        ("LBRACE", {"literal": "{"}),
        ("RBRACE", {"literal": "}"}),
        ("LBRACK", {"literal": "["}),
        ("RBRACK", {"literal": "]"}),
        ("COMMA", {"literal": ","}),
        ("COLON", {"literal": ":"}),
        ("STRING", {"regex": r'"([^"\\]|\\.)*"'}),
        ("NUMBER", {"regex": r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"}),
        ("TRUE", {"literal": "true"}),
        ("WS", {"regex": r"[ \t\n]+"}),
    ]:
        g.add_terminal(Terminal(name, **kw))
    g.ignore.append("WS")
    for alt in ("object", "array"):
        g.add_rule("value", NT(alt))
    for term in ("STRING", "NUMBER", "TRUE"):
        g.add_rule("value", T(term))
    g.add_rule("object", T("LBRACE"), T("RBRACE"))
    g.add_rule("object", T("LBRACE"), NT("members"), T("RBRACE"))
    g.add_rule("members", NT("pair"))
    g.add_rule("members", NT("pair"), T("COMMA"), NT("members"))
    g.add_rule("pair", T("STRING"), T("COLON"), NT("value"))
    g.add_rule("array", T("LBRACK"), T("RBRACK"))
    g.add_rule("array", T("LBRACK"), NT("elements"), T("RBRACK"))
    g.add_rule("elements", NT("value"))
    g.add_rule("elements", NT("elements"), T("COMMA"), NT("value"))
    return g


JSON = ByteParser(json_like())


@pytest.mark.parametrize(
    "text, accepted, viable",
    [
        ('{"a": [1, 2.5, true, {"b": "x\\"y"}]}', True, True),
        (" [ ] ", True, True),  # %ignore at both ends
        ("[1,]", False, False),
        ("[1", False, True),
        ("12", True, True),
        ("1 2", False, False),  # two numbers: WS splits lexemes
        ('{"a" 1}', False, False),
        ("[true,tru", False, True),
        ("", False, True),
        ("-", False, True),  # a NUMBER lexeme not finished yet
        ("01", False, False),  # greedy: "0" then "1" is a second value
    ],
)
def test_json_like(text, accepted, viable) -> None:
    assert accepts(JSON, text) is accepted
    assert is_viable_prefix(JSON, text) is viable


def test_error_names_the_byte_and_what_was_allowed() -> None:
    p = ByteParser(JSON.tables, lexer=JSON.lexer)
    assert p.feed("[1, x") is False
    assert p.error is not None
    assert "b'x' at offset 4" in p.error and "'NUMBER'" in p.error
    assert p.feed("1") is False  # errors are sticky


def test_allowed_bytes_agree_with_feed() -> None:
    for prefix in ["", "[", "[1", '{"a', '{"a"', "[tr", "[1 ", "[-"]:
        p = ByteParser(JSON.tables, lexer=JSON.lexer)
        assert p.feed(prefix)
        allowed = p.allowed_bytes()
        for b in range(256):
            q = p.copy()
            assert q.feed(bytes([b])) is (b in allowed), (prefix, b)


def test_snapshot_restore_and_copy() -> None:
    p = ByteParser(JSON.tables, lexer=JSON.lexer)
    p.feed("[1, ")
    snap = p.snapshot()
    q = p.copy()
    assert p.feed("2]") and p.is_accepting()
    assert not q.is_accepting() and q.feed("x") is False
    p.restore(snap)
    assert not p.is_accepting() and bytes(p.data) == b"[1, "
    assert p.feed("true]") and p.is_accepting()


def one(start_rule: list[str], *terminals: Terminal, ignore: tuple[str, ...] = ()) -> ByteParser:
    g = Grammar("s")
    for t in terminals:
        g.add_terminal(t)
    g.add_rule("s", *[T(x) for x in start_rule])
    g.ignore.extend(ignore)
    return ByteParser(g)


def test_greedy_longest_match() -> None:
    # "ab" then "c" is a sentence, but greedy lexing takes "abc" as one WORD lexeme
    p = one(["WORD", "C"], Terminal("WORD", regex="[a-c]+"), Terminal("C", literal="c"))
    assert not accepts(p, "abc")
    # (no text is accepted at all: WORD swallows every 'c'; viability does not see that far,
    # it only says that the lexer and the parser are both still alive)
    assert is_viable_prefix(p, "abc")
    q = one(["WORD", "C"], Terminal("WORD", regex="[ab]+"), Terminal("C", literal="c"))
    assert accepts(q, "abc")


def test_lexer_considers_only_allowed_terminals() -> None:
    # a keyword and a name overlap; after KW only NAME is allowed, so "if" is a NAME there
    p = one(
        ["KW", "SP", "NAME"],
        Terminal("KW", literal="if"),
        Terminal("SP", literal=" "),
        Terminal("NAME", regex="[a-z]+"),
    )
    assert accepts(p, "if if")
    assert not accepts(p, "x if")


def test_ambiguous_lexeme_scans_every_terminal() -> None:
    g = Grammar("s")
    g.add_terminal(Terminal("KW", literal="if"))
    g.add_terminal(Terminal("NAME", regex="[a-z]+"))
    g.add_terminal(Terminal("BANG", literal="!"))
    g.add_terminal(Terminal("Q", literal="?"))
    g.add_rule("s", T("KW"), T("BANG"))
    g.add_rule("s", T("NAME"), T("Q"))
    p = ByteParser(g)
    assert accepts(p, "if!") and accepts(p, "if?") and accepts(p, "ab?")
    assert not accepts(p, "ab!")


def test_lazy_terminal_ends_at_first_match() -> None:
    greedy = one(["BODY", "END"], Terminal("BODY", regex="[a-z]*x"), Terminal("END", literal="!"))
    lazy = one(
        ["BODY", "END"], Terminal("BODY", regex="[a-z]*x", lazy=True), Terminal("END", literal="!")
    )
    assert accepts(greedy, "abxcx!") and accepts(lazy, "abx!")
    assert not is_viable_prefix(lazy, "abxc")  # the lexeme ended at the first 'x'
    assert is_viable_prefix(greedy, "abxc")


def test_stop_terminal() -> None:
    p = one(["GEN", "NL"], Terminal("GEN", regex=".*", stop="END"), Terminal("NL", literal="\n"))
    assert accepts(p, "hello END\n")
    assert accepts(p, "END\n")
    assert not is_viable_prefix(p, "a END b")  # the lexeme ended at the first stop text
    assert is_viable_prefix(p, "a EN")


def test_max_len_terminal() -> None:
    p = one(["WORD"], Terminal("WORD", regex="[a-z]+", max_len=3))
    assert accepts(p, "abc") and not is_viable_prefix(p, "abcd")


def test_ignore_between_lexemes_and_preference_for_grammar_terminals() -> None:
    ws = Terminal("WS", regex=" +")
    p = one(["A", "B"], Terminal("A", literal="a"), Terminal("B", literal="b"), ws, ignore=("WS",))
    assert accepts(p, "a b") and accepts(p, "  a   b  ") and accepts(p, "ab")
    # a terminal both used and ignored: where the grammar allows it, it is scanned
    q = one(
        ["A", "WS", "B"], Terminal("A", literal="a"), Terminal("B", literal="b"), ws, ignore=("WS",)
    )
    assert accepts(q, "a b") and not accepts(q, "ab")


def test_nullable_terminal_is_optional() -> None:
    p = one(
        ["A", "OPT", "B"],
        Terminal("A", literal="a"),
        Terminal("OPT", regex="x*"),
        Terminal("B", literal="b"),
    )
    assert p.tables.nullable[p.tables.terminal_ids["OPT"]]
    assert accepts(p, "ab") and accepts(p, "axxb")


def test_bad_terminal_regex_is_a_grammar_error() -> None:
    with pytest.raises(GrammarError, match="terminal 'BAD'"):
        one(["BAD"], Terminal("BAD", regex="(ab"))


def test_lexer_start_states_are_cached_and_include_ignore() -> None:
    tables = JSON.tables
    lx = Lexer(tables)
    ids = tables.terminal_ids
    s = lx.start_state(frozenset({ids["NUMBER"]}))
    assert lx.start_state([ids["NUMBER"]]) == s
    assert lx.accepting(lx.step(s, ord("7"))) == (ids["NUMBER"],)
    assert lx.accepting(lx.step(s, ord(" "))) == (ids["WS"],)
    assert lx.step(s, ord("[")) == -1


# -- prefix closure ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["x", "y"]), min_size=1, max_size=4), st.text("xy ", max_size=8))
def test_prefix_closure(seq, text) -> None:
    """Every prefix of an accepted text is viable; feeding piecewise equals feeding at once."""
    g = Grammar("s")
    g.add_terminal(Terminal("X", literal="x"))
    g.add_terminal(Terminal("Y", regex="y+"))
    g.add_terminal(Terminal("WS", regex=" "))
    g.ignore.append("WS")
    g.add_rule("s", *[T(w.upper()) for w in seq])
    p = ByteParser(g)
    whole = accepts(p, text)
    q = ByteParser(p.tables, lexer=p.lexer)
    for i, ch in enumerate(text):
        ok = q.feed(ch)
        if whole:
            assert ok, (seq, text, i)
        if not ok:
            break
    else:
        assert q.is_accepting() == whole


def test_empty_language_of_only_the_empty_text() -> None:
    g = Grammar("s")
    g.add_rule("s")
    p = ByteParser(g)
    assert p.is_accepting() and p.allowed_bytes() == set()
    assert not accepts(p, "x")
    g.add_terminal(Terminal("WS", regex=" +"))
    g.ignore.append("WS")
    q = ByteParser(g)
    assert accepts(q, "   ") and q.allowed_bytes() == {ord(" ")}


def test_utf8_terminals_byte_by_byte() -> None:
    p = one(["W"], Terminal("W", regex="[é€😀]+"))
    data = "é€😀".encode()
    q = ByteParser(p.tables, lexer=p.lexer)
    for k, b in enumerate(data):
        assert q.feed(bytes([b])), k
        assert q.is_accepting() == (k + 1 in (2, 5, 9))  # only at character boundaries
    assert not is_viable_prefix(p, b"\xc3\xc3")  # not UTF-8


def test_lexer_lazy_set_includes_stop_terminals() -> None:
    p = one(
        ["G", "L", "W"],
        Terminal("G", regex="[a-z]*", stop=";"),
        Terminal("L", regex="[0-9]+x", lazy=True),
        Terminal("W", regex="[a-z]+"),
    )
    ids = p.tables.terminal_ids
    assert p.lexer.lazy == {ids["G"], ids["L"]}
    s = p.lexer.start_state([ids["L"]])
    for b in b"12x":
        assert not p.lexer.ends_now(s)
        s = p.lexer.step(s, b)
    assert p.lexer.ends_now(s)
    assert accepts(p, "ab;12xcd") and not is_viable_prefix(p, "ab;12x5")
