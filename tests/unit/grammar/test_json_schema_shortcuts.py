"""The compiler's shortcuts give what the long way gives.

``key_body`` assembles a key's string-body regex character by character instead of
rendering the key's AST; ``Context.shape`` names a subschema by its structure instead of
its ``json.dumps`` text. Both must agree with the long way exactly (the grammars are
compared whole by ``bench/json_schema_grammar_dump.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.grammar.json_schema import strings
from tether.grammar.json_schema.compiler import SchemaCompiler
from tether.grammar.json_schema.layout import Layout
from tether.grammar.json_schema.string_keywords import key_body


@settings(max_examples=300, deadline=None)
@given(key=st.text(max_size=12))
def test_key_body_is_the_rendered_literal(key: str) -> None:
    assert key_body(key) == strings.render(strings.lit(key))


def test_key_body_of_escapes_and_empty() -> None:
    for key in ["", '"', "\\", "a\\b", "\x00\x1f", "\u2028", "é€😀", "$ref", "a.b", "x-y"]:
        assert key_body(key) == strings.render(strings.lit(key)), key


def _compiler() -> SchemaCompiler:
    return SchemaCompiler({}, layout=Layout(), property_order="schema", lenient=False, draft=None,
                          max_repeat=100, max_rules=1000, max_depth=24, max_expansion=100,
                          resolve_remote=None)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, -0.0, 1.0, 1.5])
    | st.sampled_from(["", "a", "1", "true", "o", "a"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["a", "b", "1", "o"]), inner,
                                                                 max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(a=JSON, b=JSON)
def test_structures_are_equal_when_the_json_texts_are(a: Any, b: Any) -> None:
    c = _compiler()
    assert (c._structure(a) == c._structure(b)) == (json.dumps(a) == json.dumps(b))


def test_a_cycle_or_a_value_that_is_not_json_has_no_structure() -> None:
    c = _compiler()
    cyclic: dict[str, Any] = {}
    cyclic["a"] = cyclic
    assert c._structure(cyclic) is None
    assert c._structure({"a": {1, 2}}) is None


def test_structures_follow_json_text() -> None:
    # the values stay alive together: structures are memoized by object identity, as the
    # compiler's documents stay alive for the compile
    values = [{1: "x"}, {"1": "x"}, {"a": True}, {"a": 1}, {"a": 1.0}, {"a": (1, 2)}, {"a": [1, 2]},
              {"a": -0.0}, {"a": 0.0}, {"a": None}, {"a": "null"}, ["o"], {"o": "a"}]
    c = _compiler()
    for a in values:
        for b in values:
            assert (c._structure(a) == c._structure(b)) == (json.dumps(a) == json.dumps(b)), (a, b)


SCHEMAS: list[Any] = [
    {},
    True,
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "object"}},
    {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {}}}]},
    {"type": "object", "properties": {"null": {"const": None}}, "additionalProperties": {"type": "array"}},
]
OPTIONS: list[dict[str, Any]] = [
    {}, {"whitespace": "flexible"}, {"whitespace": "flexible", "property_order": "any"},
    {"whitespace": "pretty", "max_depth": 3}, {"closed": True, "bounded_numbers": True},
    {"whitespace": "flexible", "max_rules": 12}, {"max_repeat": 0},
    {"whitespace_pattern": "[ \\n]{0,3}"}, {"lenient": True, "draft": "draft7"},
]


def _outcome(schema: Any, options: dict[str, Any]) -> str:
    from tether.grammar.ir import Grammar

    try:
        g = Grammar.from_json_schema(schema, **options)
    except Exception as exc:  # noqa: BLE001 -- the error is part of what is compared
        return f"{type(exc).__name__}: {exc}"
    terms = [(t.name, t.regex, t.literal, t.expr, None if t.node is None else t.to_node())
             for t in g.terminals.values()]
    return f"{g}\n{terms}\n{g.warnings}"


def test_the_any_value_replay_makes_the_grammar_a_build_makes(monkeypatch: Any) -> None:
    from tether.grammar.json_schema import compiler

    replayed = {(i, j): _outcome(s, o) for i, s in enumerate(SCHEMAS) for j, o in enumerate(OPTIONS)}
    assert any(v is not None for v in compiler._ANY_VALUE.values())  # the replay was used
    monkeypatch.setattr(compiler, "_any_value", lambda c: None)
    built = {(i, j): _outcome(s, o) for i, s in enumerate(SCHEMAS) for j, o in enumerate(OPTIONS)}
    assert replayed == built
    assert any("max_rules" in v for v in built.values())  # a limit met inside the node


def test_the_any_value_replay_meets_max_rules_where_a_build_does(monkeypatch: Any) -> None:
    # the replay appends its rules at once when they fit, else one by one (the rule past
    # the limit raises, naming the pointer the build names): every limit around the node
    from tether.grammar.json_schema import compiler

    schemas: list[Any] = [{"type": "array"}, {"properties": {"a": {"type": "string"}, "b": {}}},
                          {"type": "object", "properties": {"x": {"items": {"type": "integer"}}}}]
    cases = [(s, {"whitespace": "flexible", "max_rules": n}) for s in schemas for n in range(0, 60, 3)]
    replayed = [_outcome(s, o) for s, o in cases]
    monkeypatch.setattr(compiler, "_any_value", lambda c: None)
    built = [_outcome(s, o) for s, o in cases]
    assert replayed == built
    assert any("max_rules" in v for v in built) and any("max_rules" not in v for v in built)


URI_PARTS = st.sampled_from([*"aZ09:/?#;@[]%~.-_ ", "\t", "\n", "\r", "\x00", "\x1f", "http://", "https://",
                             "HTTPS://", "urn:", "file:///", "//", "[::1]", "?q", ";p", "#/$defs/x"])


@settings(max_examples=1000, deadline=None)
@given(uri=st.lists(URI_PARTS, max_size=10).map("".join), frag=st.lists(URI_PARTS, max_size=4).map("".join))
def test_uri_splitting_is_urldefrag(uri: str, frag: str) -> None:
    # references split a target URI at its first "#" and memoize the part before it;
    # urldefrag reads that part alone unless the text has characters urlsplit removes
    from urllib.parse import urldefrag

    from tether.grammar.json_schema.references import _split_fragment, join_uri

    for u in (uri, f"{uri}#{frag}"):
        try:
            want = urldefrag(u)
        except ValueError:  # (an invalid IPv6 host): raised alike
            with pytest.raises(ValueError):
                _split_fragment(u)
            continue
        assert _split_fragment(u) == (want[0], want[1])
        assert join_uri(u, "#" + frag) == want[0] + "#" + frag


@pytest.mark.parametrize(("schema", "where"), [
    ({"$defs": {"x~y/z": {"uniqueItems": True, "type": "array"}}, "$ref": "#/$defs/x~0y~1z"},
     "#/$defs/x~0y~1z/uniqueItems"),
    ({"definitions": {"a": {"items": [{"type": "string"}, {"uniqueItems": True, "type": "array"}]}},
      "properties": {"p": {"$ref": "#/definitions/a/items/1"}}}, "#/definitions/a/items/1/uniqueItems"),
])
def test_a_ref_target_is_named_by_its_escaped_pointer(schema: Any, where: str) -> None:
    # the index keeps pointers as (parent, part) pairs; a $ref target's text is written
    # when the target is reached, escaped as a JSON pointer
    from tether.errors import UnsupportedSchemaError
    from tether.grammar.ir import Grammar

    with pytest.raises(UnsupportedSchemaError) as info:
        Grammar.from_json_schema(schema)
    assert info.value.pointer == where


def test_render_and_emptiness_are_remembered_per_node_object() -> None:
    node = strings.search_language(strings.parse_pattern("^[a-c]{2,5}$"))
    twin = strings.search_language(strings.parse_pattern("^(?:[a-c]{2,5})$"))
    assert strings.render(node) == strings.render(node) == strings._render(node, strings.render_cset)[0]
    assert strings.render(twin) == strings._render(twin, strings.render_cset)[0]
    nothing = strings.Seq((strings.CSet(()), node))
    assert strings.is_empty_language(nothing) and strings.is_empty_language(nothing)
    assert not strings.is_empty_language(node) and not strings.is_empty_language(node)


PROPS = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]),
                        st.sampled_from([{}, {"type": "string"}, {"type": "integer"}, {"enum": [1, "x"]},
                                         {"type": "object", "properties": {"a": {"type": "null"}}}]),
                        max_size=5)


@settings(max_examples=200, deadline=None)
@given(props=PROPS, required=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=3),
       extra=st.sampled_from([None, False, {"type": "string"}]), pattern=st.booleans(),
       whitespace=st.sampled_from(["flexible", "compact", "pretty"]))
def test_schema_order_without_counts_is_the_general_case(props: Any, required: Any, extra: Any, pattern: bool,
                                                         whitespace: Any) -> None:
    # objects with no min/maxProperties and no dependentRequired take the plain path
    # (counts 0 and 1); the general path (count, seen) makes the same grammar
    import tether.grammar.json_schema.object_keywords as ok
    from tether.errors import TetherError
    from tether.grammar.json_schema.compiler import compile_json_schema

    schema: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if extra is not None:
        schema["additionalProperties"] = extra
    if pattern:
        schema["patternProperties"] = {"^x": {"type": "integer"}}

    def general(c: Any, slots: Any, extras: Any, depth: int) -> Any:
        c.repeat(1, c.path[-1] if c.path else "#")
        return ok._schema_order_general(c, slots, extras, 0, None, depth, None)

    def made() -> str:
        try:
            return str(compile_json_schema(schema, whitespace=whitespace))
        except TetherError as exc:  # (required names no value can have): the same error
            return repr(exc)

    plain = made()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ok, "_schema_order_plain", general)
        assert made() == plain
