"""Key lexemes of flexible-whitespace objects carry their regex node, built from parts.

The compiler builds ``{ws"key"ws:ws`` from the parsed gaps and the key's bytes instead of
parsing one regex per property. The node must be the very node the terminal's text
parses to (nodes are interned, so the parse of the text is the same object)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tether import regex as rx
from tether.grammar.ir import Grammar, Terminal
from tether.grammar.json_schema.layout import Layout


def _parsed(t: Terminal) -> rx.Node:
    return Terminal(t.name, regex=t.regex).to_node()


@settings(max_examples=150, deadline=None)
@given(key=st.text(max_size=12), first=st.booleans(), max_ws=st.integers(0, 20))
def test_a_key_node_is_the_node_its_text_parses_to(key: str, first: bool, max_ws: int) -> None:
    spec = Layout("flexible", max_whitespace=max_ws).key_literal(0, first, key)
    kind, text, node = spec
    assert kind == "rx"
    assert node is _parsed(Terminal("k", regex=text))


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True))
def test_schema_grammars_hand_the_engine_the_parsed_nodes(keys: list[str]) -> None:
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys}}
    g = Grammar.from_json_schema(schema, whitespace="flexible")
    carried = [t for t in g.terminals.values() if t.node is not None]
    assert len(carried) >= len(keys)  # one key lexeme per property at least
    for t in carried:
        assert t.to_node() is t.node is _parsed(t)


def test_a_custom_gap_regex_is_parsed_whole() -> None:
    """A gap regex may look around the key: such lexemes carry no prebuilt node."""
    spec = Layout("flexible", pattern=r" ?(?=\")").key_literal(0, True, "a")
    assert len(spec) == 2 and spec[0] == "rx"
