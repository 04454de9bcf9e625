"""compile_json_schema: named end-to-end cases through the reference recognizer."""

from __future__ import annotations

import json

import pytest

from tether.errors import LimitError, SchemaError, UnsupportedSchemaError
from tether.grammar.json_schema import compile_json_schema, dumps
from tether.parser import accepts, is_viable_prefix


def ok(g, text: str) -> bool:  # type: ignore[no-untyped-def]
    return accepts(g, text.encode("utf-8"))


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
    },
    "required": ["name"],
    "additionalProperties": False,
}

CASES = {
    "person": (
        PERSON,
        ['{"name":"Al"}', '{"name":"Al","age":150}', '{"name":"Al","tags":["a","b"]}', '{"name":"ü\\"x"}'],
        ['{"name":""}', '{"age":1}', '{"name":"Al","age":151}', '{"name":"Al","x":1}',
         '{"name":"Al","tags":["a","b","a"]}', '{"age":1,"name":"Al"}', '{"name":"123456789"}'],
    ),
    "additional_allowed_by_default": (
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        ['{}', '{"a":1}', '{"a":1,"b":[true,null]}', '{"b":{"c":"d"}}'],
        ['{"a":"x"}', '{"a":1,"a":2}', '{"b":1,"a":1}'],
    ),
    "additional_schema": (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        ['{}', '{"x":1,"y":-2}'],
        ['{"x":"1"}'],
    ),
    "pattern_properties": (
        {"type": "object", "patternProperties": {"^x-": {"type": "string"}, "n$": {"type": "integer"}},
         "additionalProperties": False},
        ['{"x-a":"s"}', '{"bn":3}', '{}'],
        ['{"x-a":1}', '{"y":1}', '{"x-n":3}', '{"x-n":"s"}'],  # x-n must be a string and an integer
    ),
    "property_names": (
        {"type": "object", "propertyNames": {"maxLength": 2}},
        ['{"ab":1}', '{}'],
        ['{"abc":1}'],
    ),
    "min_max_properties": (
        {"type": "object", "minProperties": 1, "maxProperties": 2},
        ['{"a":1}', '{"a":1,"b":2}'],
        ['{}', '{"a":1,"b":2,"c":3}'],
    ),
    "integer_range_negative": (
        {"type": "integer", "minimum": -120, "exclusiveMaximum": 7},
        ["-120", "-1", "0", "6"],
        ["-121", "7", "-0", "01", "1.0", "1e1"],
    ),
    "integer_large_bounds": (
        {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
        [str(-(2**63)), str(2**63 - 1), "0"],
        [str(2**63), str(-(2**63) - 1)],
    ),
    "number_decimal_bounds": (
        {"type": "number", "minimum": -1.5, "exclusiveMaximum": 2.25},
        ["-1.5", "-1", "0", "2.2", "2.2499", "1.50"],
        ["-1.51", "2.25", "2.3", "3", "1e0"],
    ),
    "multiple_of_integer": (
        {"type": "integer", "multipleOf": 5},
        ["0", "5", "-25", "100"],
        ["3", "-7", "51"],
    ),
    "multiple_of_bounded": (
        {"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 40},
        ["14", "35"],
        ["7", "42", "15"],
    ),
    "multiple_of_decimal": (
        {"type": "number", "multipleOf": 0.01},
        ["1", "1.5", "-2.25"],
        ["1.001"],
    ),
    "string_pattern_unanchored": (
        {"type": "string", "pattern": "a+b"},
        ['"aab"', '"xxabyy"'],
        ['"ba"', '"b"'],
    ),
    "string_pattern_anchored_with_length": (
        {"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 4},
        ['"a"', '"ab_1"'],
        ['"ab_12"', '"1a"', '""'],
    ),
    "string_pattern_needs_escapes": (
        {"type": "string", "pattern": '^"[\\\\]\\n$'},
        ['"\\"\\\\\\n"'],
        ['"\\"x\\n"'],
    ),
    "string_min_length_code_points": (
        {"type": "string", "minLength": 2, "maxLength": 2},
        ['"ab"', '"😀é"', '"\\n\\t"'],
        ['"a"', '"abc"', '"😀"'],
    ),
    "format_date": (
        {"type": "string", "format": "date"},
        ['"2024-02-29"', '"2023-12-31"'],
        ['"2023-02-29"', '"2023-13-01"', '"2023-1-01"'],
    ),
    "format_with_length": (
        {"type": "string", "format": "ipv4", "maxLength": 9},
        ['"1.2.3.4"', '"10.20.3.4"'],
        ['"100.2.3.45"', '"1.2.3"'],
    ),
    "enum_mixed": (
        {"enum": [1, "a", None, {"x": [1, 2]}, 2.5]},
        ['1', '"a"', 'null', '{"x":[1,2]}', '2.5'],
        ['2', '"b"', '{"x":[1]}'],
    ),
    "enum_filtered_by_type": (
        {"type": "string", "enum": ["a", 1, "b"]},
        ['"a"', '"b"'],
        ['1'],
    ),
    "const": ({"const": "x"}, ['"x"'], ['"y"']),
    "type_list": (
        {"type": ["integer", "null"]},
        ["1", "null"],
        ['"1"', "1.5"],
    ),
    "any_of": (
        {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 5}]},
        ['"a"', "5"],
        ['"ab"', "4"],
    ),
    "all_of_merges": (
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   {"properties": {"a": {"minimum": 3}}}]},
        ['{"a":3}', '{"a":4,"b":1}'],
        ['{"a":2}', '{}'],
    ),
    "all_of_additional_does_not_see_siblings": (
        {"allOf": [{"properties": {"a": {}}}, {"additionalProperties": False}]},
        ['{}', '1'],
        ['{"a":1}'],
    ),
    "ref_recursive": (
        {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                           "next": {"$ref": "#/$defs/node"}},
                            "required": ["v"], "additionalProperties": False}},
         "$ref": "#/$defs/node"},
        ['{"v":1}', '{"v":1,"next":{"v":2,"next":{"v":3}}}'],
        ['{"v":1,"next":{}}', '{"next":{"v":1}}'],
    ),
    "definitions_draft7": (
        {"$schema": "http://json-schema.org/draft-07/schema#",
         "definitions": {"a": {"type": "integer"}},
         "properties": {"x": {"$ref": "#/definitions/a", "type": "string"}}},
        ['{"x":1}'],
        ['{"x":"s"}'],
    ),
    "prefix_items": (
        {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        ["[]", "[1]", '[1,"a"]'],
        ['[1,"a",2]', '["a"]'],
    ),
    "draft7_items_array": (
        {"$schema": "http://json-schema.org/draft-07/schema#",
         "items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
        ["[1]", '[1,"a","b"]'],
        ["[1,2]"],
    ),
    "min_max_items": (
        {"type": "array", "minItems": 2, "maxItems": 3},
        ["[1,2]", '[1,"a",null]'],
        ["[1]", "[1,2,3,4]"],
    ),
    "contains_min": (
        {"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}, "minContains": 2,
         "maxItems": 4},
        ["[5,6]", "[1,5,2,9]", "[5,5,5,5]"],
        ["[]", "[5]", "[1,2,3,5]", "[5,5,5,5,5]"],
    ),
    "dependent_required": (
        {"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
         "dependentRequired": {"c": ["a"], "a": ["b"]}},
        ['{}', '{"b":1}', '{"a":1,"b":2}', '{"a":1,"b":1,"c":1}'],
        ['{"a":1}', '{"c":1}', '{"b":1,"c":1}'],
    ),
    "if_then_else": (
        {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}},
        ["5", '"a"'],
        ["4", "null"],
    ),
    "dependent_schemas": (
        {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
        ["{}", '{"b":2}', '{"a":1,"b":2}'],
        ['{"a":1}'],
    ),
    "boolean_true": (True, ["1", '{"a":[]}', '"s"'], ["tru", "{"]),
    "not_type": ({"not": {"type": "string"}}, ["1", "null"], ['"a"']),
    "one_of_disjoint": (
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        ['"a"', "1"],
        ["null"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_case(name: str) -> None:
    schema, good, bad = CASES[name]
    g = compile_json_schema(schema)
    for text in good:
        assert json.loads(text) is not None or text == "null"
        assert ok(g, text), f"{name}: should accept {text}"
    for text in bad:
        assert not ok(g, text), f"{name}: should reject {text}"


def test_prefix_is_viable() -> None:
    g = compile_json_schema(PERSON)
    assert is_viable_prefix(g, b'{"name":"A')
    assert not is_viable_prefix(g, b'{"nam":')


def test_lexemes_are_large() -> None:
    g = compile_json_schema(PERSON)
    lits = {t.literal for t in g.terminals.values() if t.literal is not None}
    assert '{"name":' in lits and ',"age":' in lits and "}" in lits


def test_pretty_layout() -> None:
    g = compile_json_schema(PERSON, whitespace="pretty", indent=2)
    value = {"name": "Al", "tags": ["a"]}
    assert ok(g, json.dumps(value, indent=2))
    assert not ok(g, json.dumps(value))


def test_flexible_layout_is_bounded() -> None:
    g = compile_json_schema(PERSON, whitespace="flexible", max_whitespace=4)
    assert ok(g, '{ "name" : "Al" ,\n "age":1 }')
    assert ok(g, '{"name":"Al"}')
    assert not ok(g, '{"name":"Al"     }')


def test_flexible_layout_composite_enum() -> None:
    g = compile_json_schema({"enum": [{"x": [1, 2]}, []]}, whitespace="flexible")
    assert ok(g, '{ "x" : [1, 2] }') and ok(g, '{"x":[1,2]}') and ok(g, "[ ]")
    assert not ok(g, '{"x":[2,1]}')


def test_layouts_accept_what_dumps_for_writes() -> None:
    from tether.grammar.json_schema import dumps_for

    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}},
                                               "e": {"enum": [{"x": [1, 2]}, "s"]}}, "required": ["a"]}
    value = {"extra": [1, "two", {"q": None}], "e": {"x": [1, 2]}, "a": [{"k": {"z": [1, {}]}}, {}]}
    for ws in ("compact", "pretty", "flexible"):
        g = compile_json_schema(schema, whitespace=ws)
        assert ok(g, dumps_for(schema, value, whitespace=ws)), ws
    flexible = compile_json_schema(schema, whitespace="flexible")
    assert ok(flexible, json.dumps(dict(sorted(value.items())), indent=1))


def test_property_order_any() -> None:
    g = compile_json_schema(PERSON, property_order="any")
    assert ok(g, '{"age":1,"name":"Al"}')
    assert not ok(g, '{"age":1}')
    assert not ok(g, '{"name":"Al","name":"B"}')


def test_one_of_overlap_warns() -> None:
    g = compile_json_schema({"oneOf": [{"type": "integer"}, {"minimum": 2}]})
    assert any("oneOf" in w and "#/oneOf" in w for w in g.warnings)


def test_discriminated_one_of_is_exact() -> None:
    g = compile_json_schema({"oneOf": [
        {"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
        {"type": "object", "properties": {"k": {"const": "b"}}, "required": ["k"]},
    ]})
    assert g.warnings == []


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        ({"type": "array", "uniqueItems": True}, "uniqueItems", "#/uniqueItems"),
        ({"properties": {"a": {"not": {"minimum": 1}}}}, "not", "#/properties/a/not"),
        ({"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}}, "not", "#/if/not"),
        ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties", "#/unevaluatedProperties"),
        ({"type": "string", "pattern": "(?=a)"}, "pattern", "#/pattern"),
        ({"$ref": "http://example.com/x.json"}, "$ref", "#/$ref"),
    ],
)
def test_unsupported_names_keyword_and_pointer(schema: dict, keyword: str, pointer: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == keyword
    assert info.value.pointer == pointer
    assert pointer in str(info.value)


def test_lenient_turns_errors_into_warnings() -> None:
    g = compile_json_schema({"type": "array", "uniqueItems": True, "items": {"type": "integer"}}, lenient=True)
    assert any("uniqueItems" in w and "#/uniqueItems" in w for w in g.warnings)
    assert ok(g, "[1,1]")


def test_huge_max_length_is_an_error_naming_the_pointer() -> None:
    with pytest.raises(LimitError) as info:
        compile_json_schema({"properties": {"s": {"type": "string", "maxLength": 10**9}}}, max_repeat=1000)
    assert info.value.place == "#/properties/s/maxLength"
    assert info.value.limit == "max_repeat"


def test_huge_max_items_is_an_error() -> None:
    with pytest.raises(LimitError, match="minItems"):
        compile_json_schema({"type": "array", "minItems": 10**6})


def test_deep_ref_chain_is_bounded() -> None:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(200)}
    defs["d200"] = {"type": "integer"}
    g = compile_json_schema({"$defs": defs, "$ref": "#/$defs/d0"})
    assert ok(g, "5")
    with pytest.raises(SchemaError, match="expansion"):
        compile_json_schema({"$defs": defs, "$ref": "#/$defs/d0"}, max_expansion=50)


def test_self_reference_loop_terminates() -> None:
    with pytest.raises(SchemaError):
        compile_json_schema({"$defs": {"a": {"$ref": "#/$defs/a"}, "b": {"allOf": [{"$ref": "#/$defs/b"}]}},
                             "allOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}], "type": "object",
                             "required": ["x"], "properties": {"x": {"$ref": "#"}}})


def test_unsatisfiable_schema_is_an_error() -> None:
    with pytest.raises(SchemaError, match="allows no value"):
        compile_json_schema({"type": "string", "minLength": 3, "maxLength": 2})


def test_bad_schema_names_pointer() -> None:
    with pytest.raises(SchemaError) as info:
        compile_json_schema({"properties": {"a": {"type": "strin"}}})
    assert info.value.pointer == "#/properties/a/type"


def test_dumps_output_policy() -> None:
    assert dumps({"a": [1.0, 1e-07, "é\n\x01"]}) == '{"a":[1,0.0000001,"é\\n\\u0001"]}'
    assert dumps({"a": [1]}, whitespace="pretty") == json.dumps({"a": [1]}, indent=2)


def test_from_json_schema_delegates() -> None:
    from tether.grammar import Grammar

    if not hasattr(Grammar, "from_json_schema"):
        pytest.skip("Grammar.from_json_schema not added yet")
    g = Grammar.from_json_schema({"type": "integer", "maximum": 3})
    assert ok(g, "3") and not ok(g, "4")


@pytest.mark.parametrize(
    ("schema", "pointer", "message"),
    [
        ({"type": "integer", "maximum": 10**1000}, "#/maximum", "too large"),
        ({"properties": {"x": {"minimum": float("nan")}}}, "#/properties/x/minimum", "no JSON number"),
        ({"type": "integer", "multipleOf": 0}, "#/multipleOf", "must be > 0"),
        ({"type": "string", "minLength": -1}, "#/minLength", "non-negative"),
        ({"enum": "a"}, "#/enum", "must be an array"),
        ({"anyOf": []}, "#/anyOf", "non-empty array"),
        ({"$ref": "#/$defs/missing"}, "#/$ref", "points to nothing"),
    ],
)
def test_schema_errors_name_the_pointer(schema: dict, pointer: str, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_json_schema(schema)
    assert info.value.pointer == pointer
    assert message in str(info.value)


def test_infinite_bound_on_the_open_side_is_no_bound() -> None:
    g = compile_json_schema({"type": "number", "maximum": float("inf")})
    assert ok(g, "1e308")
