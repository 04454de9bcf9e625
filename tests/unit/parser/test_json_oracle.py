"""ByteParser on an RFC 8259 JSON grammar against Python's ``json`` module as the oracle.

Exercises regex terminals, greedy lexing (``01`` is two numbers, ``truefalse`` no
literal), ``%ignore`` whitespace and deep nesting on texts json.dumps writes, and
agreement with ``json.loads`` on mutated texts.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.grammar.ir import Grammar
from tether.grammar.rfc8259 import json_text
from tether.parser import ByteParser


def rfc8259() -> Grammar:
    return json_text(members="left", elements="right")


JSON = ByteParser(rfc8259())


def loads_ok(text: str) -> bool:
    def no_constants(name: str) -> None:
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=no_constants)
    except (ValueError, RecursionError):
        return False
    return True


def ours(text: str) -> tuple[bool, bool]:
    p = ByteParser(JSON.tables, lexer=JSON.lexer)
    viable = p.feed(text)
    return viable, viable and p.is_accepting()


values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
layouts = st.sampled_from(
    [{}, {"indent": 2}, {"separators": (",", ":")}, {"indent": "\t", "ensure_ascii": False}]
)


@settings(max_examples=80, deadline=None)
@given(values, layouts)
def test_json_dumps_output_and_its_prefixes(value, layout) -> None:
    text = json.dumps(value, **layout)
    p = ByteParser(JSON.tables, lexer=JSON.lexer)
    for k, b in enumerate(text.encode()):
        assert p.feed(bytes([b])), (text, k, p.error)
    assert p.is_accepting()


@settings(max_examples=300, deadline=None)
@given(values, layouts, st.integers(0, 10_000), st.sampled_from(list(' "\\,:[]{}0-1.eE+tfnu\x01é')))
def test_mutations_agree_with_json_loads(value, layout, where, ch) -> None:
    text = json.dumps(value, **layout)
    i = where % (len(text) + 1)
    for mutated in (
        text[:i] + ch + text[i:],
        text[:i] + text[i + 1 :],
        text[:i] + ch + text[i + 1 :],
    ):
        assert ours(mutated)[1] == loads_ok(mutated), mutated


def test_named_cases() -> None:
    for text in ["01", "1.", ".5", "+1", "truefalse", "[1,]", '"\x01"', '"\\x"', "", " ", "1 2"]:
        assert ours(text)[1] is False and loads_ok(text) is False, text
    for text in ["-0", "1E+2", ' {"a" : [ ] } ', '"\\ud800"', "[[[[[[[[[[[]]]]]]]]]]]"]:
        assert ours(text) == (True, True) and loads_ok(text), text
    assert ours("[1, 2") == (True, False)
    assert ours("tru") == (True, False)
    assert ours("[01") == (False, False)


@settings(max_examples=30, deadline=None)
@given(values, layouts, st.integers(0, 10_000))
def test_allowed_bytes_is_what_feed_accepts(value, layout, where) -> None:
    data = json.dumps(value, **layout).encode()
    p = ByteParser(JSON.tables, lexer=JSON.lexer)
    assert p.feed(data[: where % (len(data) + 1)])
    allowed = p.allowed_bytes()
    assert allowed == {b for b in range(256) if p.copy().feed(bytes([b]))}
