"""Lexemes of flexible-whitespace objects carry their regex node, built from parts.

The compiler builds ``{ws``, ``ws,ws``, ``ws:ws`` from the parsed gaps and the bytes
instead of parsing one regex per lexeme; a key alone is a literal (the lexer builds its
node when it needs it). A carried node must be the very node the terminal's text parses
to (nodes are interned, so the parse of the text is the same object)."""

from __future__ import annotations

import json

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tether import regex as rx
from tether.grammar.ir import Grammar, LazyNode, Terminal
from tether.grammar.json_schema.layout import Layout


def _parsed(t: Terminal) -> rx.Node:
    return Terminal(t.name, regex=t.regex, expr=t.expr).to_node()


def _carried(t: Terminal) -> rx.Node:
    """The node ``t`` carries (a ``LazyNode`` built now: it knew whether it is nullable)."""
    node = t.node
    if isinstance(node, LazyNode):
        nullable = node.nullable
        node = node.get()
        assert node.nullable == nullable, t
    assert t.to_node() is node
    return node


@settings(max_examples=150, deadline=None)
@given(key=st.text(max_size=12), first=st.booleans(), max_ws=st.integers(0, 20))
def test_a_key_lexeme_is_the_literal_of_its_text(key: str, first: bool, max_ws: int) -> None:
    lay = Layout("flexible", max_whitespace=max_ws)
    assert lay.key_literal(0, first, key) == ("lit", json.dumps(key, ensure_ascii=False))
    for kind, text, node in (lay.key_punct(0, first), lay.key_colon()):
        assert kind == "rx"
        assert node is _parsed(Terminal("k", regex=text))


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True))
def test_schema_grammars_hand_the_engine_the_parsed_nodes(keys: list[str]) -> None:
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}}
    g = Grammar.from_json_schema(schema, whitespace="flexible")
    carried = [t for t in g.terminals.values() if t.node is not None]
    assert len(carried) >= 2  # the punctuation before a key and the colon after it
    for t in carried:
        assert _carried(t) is _parsed(t)
    literals = {t.literal for t in g.terminals.values()}
    assert all(json.dumps(k, ensure_ascii=False) in literals for k in keys)  # one per property


def test_a_custom_gap_regex_is_parsed_whole() -> None:
    """A gap regex may look around the key: such lexemes carry no prebuilt node."""
    spec = Layout("flexible", pattern=r" ?(?=\")").key_literal(0, True, "a")
    assert len(spec) == 2 and spec[0] == "rx"


# -- every lexeme of the compiler: the node it carries is the node its text parses to ----

def _text_node(t: Terminal) -> rx.Node:
    """The node of the terminal's text alone (what the engine parsed before nodes)."""
    return Terminal(t.name, regex=t.regex, expr=t.expr).to_node()


def _check_grammar(g: Grammar) -> int:
    carried = 0
    for t in g.terminals.values():
        if t.node is not None:
            carried += 1
            assert _carried(t) is _text_node(t), t
    return carried


_names = st.text(st.characters(codec="utf-8"), max_size=6)
_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=4)
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)


@settings(max_examples=80, deadline=None)
@given(names=st.lists(_names, min_size=1, max_size=12, unique=True),
       whitespace=st.sampled_from(["flexible", "compact", "pretty"]),
       max_ws=st.integers(0, 20), closed=st.booleans(), pattern=st.booleans())
def test_object_lexemes_carry_the_nodes_their_texts_parse_to(
    names: list[str], whitespace: str, max_ws: int, closed: bool, pattern: bool
) -> None:
    """Keys, gaps, punctuation and the "any key but these names" regions (an alternation
    of the names: a trie from 8 names on) of objects."""
    schema: dict[str, object] = {"type": "object", "properties": {k: {"type": "number"} for k in names},
                                 "required": names[:1]}
    if pattern:
        schema["patternProperties"] = {"^x": {"type": "integer"}}
    if closed:
        schema["additionalProperties"] = {"type": "array", "items": {"type": "string"}}
    g = Grammar.from_json_schema(schema, whitespace=whitespace, max_whitespace=max_ws)  # type: ignore[arg-type]
    assert _check_grammar(g) >= (1 if whitespace == "flexible" else 0)


@settings(max_examples=80, deadline=None)
@given(values=st.lists(_values, min_size=1, max_size=4), max_ws=st.integers(0, 20))
def test_enum_values_carry_the_nodes_their_texts_parse_to(values: list[object], max_ws: int) -> None:
    g = Grammar.from_json_schema({"enum": values}, whitespace="flexible", max_whitespace=max_ws)
    _check_grammar(g)


@settings(max_examples=150, deadline=None)
@given(words=st.lists(st.text(st.characters(codec="utf-8"), max_size=5), min_size=1, max_size=20, unique=True))
def test_an_alternation_of_names_is_the_node_the_parser_builds(words: list[str]) -> None:
    from tether.grammar.json_schema.nodes import recorded
    from tether.grammar.json_schema.string_keywords import names_regex

    text = names_regex(words)
    if any(ord(c) < 0x20 or c in '"\\' for w in words for c in w):  # escaped in groups: parsed instead
        assert recorded(text) in (None, rx.parse(text))
    else:
        assert recorded(text) is rx.parse(text)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.text(st.sampled_from("abé"), max_size=7), min_size=8, max_size=30, unique=True))
def test_a_trie_of_names_sharing_prefixes_is_the_node_the_parser_builds(words: list[str]) -> None:
    """Few letters: names that share long prefixes, end inside one another ("" too) and
    hold a two-byte character (the trie ``words_node`` builds from sorted ranges)."""
    from tether.grammar.json_schema.nodes import recorded
    from tether.grammar.json_schema.string_keywords import names_regex

    text = names_regex(words)
    assert recorded(text) is rx.parse(text)


@settings(max_examples=60, deadline=None)
@given(lo=st.integers(0, 40), extra=st.none() | st.integers(0, 40))
def test_a_length_bounded_string_body_is_the_node_the_parser_builds(lo: int, extra: int | None) -> None:
    from tether.grammar.json_schema.nodes import recorded
    from tether.grammar.json_schema.string_keywords import length_body

    hi = None if extra is None else lo + extra
    assume(hi != 0)  # not recorded: the empty body is left to the string AST
    text = length_body(lo, hi)
    assert recorded(text) is rx.parse(text)


def test_the_dev_schemas_hand_the_engine_parsed_nodes() -> None:
    """Over the first 40 dev schemas (the peers' options): every lexeme with a node has
    the node of its text, and most lexemes carry one."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "jsonschemabench-dev"
    files = sorted(root.rglob("*.json"))[:41] if root.exists() else []
    if not files:
        import pytest

        pytest.skip(f"the dev schemas are not at {root}")
    carried = total = 0
    for f in files:
        doc = json.loads(f.read_text())
        if "schema" not in doc:
            continue
        try:
            g = Grammar.from_json_schema(doc["schema"], whitespace="flexible", property_order="schema")
        except ValueError:  # a schema the compiler refuses (SchemaError and kin)
            continue
        total += sum(t.literal is None for t in g.terminals.values())
        carried += _check_grammar(g)
    assert carried > 0.9 * total


# -- flexible keys are lexemes of their own: whitespace states never carry the keys ----

def _live_after(g: Grammar, text: str) -> int:
    from tether.parser.byte_parser import ByteParser

    bp = ByteParser(g)
    assert bp.feed(text), text
    return len(bp.lexer.dfa.live(bp.state))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), gap=st.text(" \t\n\r", min_size=1, max_size=16), first=st.booleans())
def test_flexible_whitespace_around_a_comma_keeps_no_key_alive(n: int, gap: str, first: bool) -> None:
    """Before the split the state after ``{"k0": 0`` + ``,`` + a gap had every key of the
    object alive (one new state per whitespace character, each deriving n keys)."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(n)},
              "additionalProperties": False}
    g = Grammar.from_json_schema(schema, whitespace="flexible", property_order="any")
    head = "{" + gap if first else '{"k0": 0' + gap + "," + gap
    assert _live_after(g, head) <= 2  # the punctuation lexeme (and `{ws}` / `ws}`)
    # then the keys (k0 again only where the any-order compiler stops tracking names)
    assert _live_after(g, head + '"') in ((n,) if first else (n - 1, n))


def test_a_custom_gap_regex_keeps_keys_fused() -> None:
    assert Layout("flexible").split_keys
    assert not Layout("flexible", pattern=" ?").split_keys
    assert not Layout("compact").split_keys and not Layout("pretty").split_keys


def test_an_object_s_other_keys_get_their_node_when_the_lexer_needs_it() -> None:
    """The "any key but these names" lexeme is built from recorded parts: the compile
    hands a ``LazyNode`` (not a nullable one), built by the first ``to_node``; a pickled
    grammar carries the built node."""
    import pickle

    g = Grammar.from_json_schema({"type": "object", "properties": {"a": {}, "b": {}}}, whitespace="flexible")
    lazy = [t for t in g.terminals.values() if isinstance(t.node, LazyNode)]
    assert lazy and all(t.expr is not None and not t.node.nullable for t in lazy)
    t = lazy[0]
    assert t.node._node is None  # not built by the compile
    back = pickle.loads(pickle.dumps(t))
    assert back.node is t.node.get() is t.to_node() is _parsed(t)
    assert rx.matches(back.node, b'"c"') and not rx.matches(back.node, b'"a"')
