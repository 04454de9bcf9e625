"""Fail closed: hostile JSON Schemas get a correct grammar or a tether error naming the place.

Each case below crashed (TypeError, ValueError, RecursionError) or ran for seconds before
the shape check (``json_schema/check.py``), the nesting bound and the linear-time paths;
the classes of inputs are fuzzed in tests/fuzz/test_fuzz_json_schema.py.
"""

from __future__ import annotations

import gc
import time

import pytest

from tether.errors import LimitError, SchemaError, UnsupportedSchemaError
from tether.grammar.ir import Grammar
from tether.grammar.json_schema import compile_json_schema, dumps_for
from tether.limits import Limits, limits
from tether.parser import accepts


def ok(g: Grammar, text: str) -> bool:
    return accepts(g, text.encode("utf-8"))


# --------------------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    ("schema", "pointer", "message"),
    [
        ({"required": 5}, "#/required", "array of property names"),
        ({"required": True}, "#/required", "array of property names"),
        ({"required": ["a", 5]}, "#/required/1", "property names"),
        ({"properties": []}, "#/properties", "must be an object"),
        ({"properties": True}, "#/properties", "must be an object"),
        ({"properties": {"a": 5}}, "#/properties/a", "must be an object or a boolean"),
        ({"properties": {1: {}}}, "#/properties", "key must be a string"),
        ({"enum": 3}, "#/enum", "must be an array"),
        ({"minLength": "x"}, "#/minLength", "non-negative integer"),
        ({"minLength": -1}, "#/minLength", "non-negative integer"),
        ({"maxItems": 1.5}, "#/maxItems", "non-negative integer"),
        ({"minProperties": "x"}, "#/minProperties", "non-negative integer"),
        ({"contains": {}, "maxContains": "x"}, "#/maxContains", "non-negative integer"),
        ({"pattern": 5}, "#/pattern", "must be a string"),
        ({"format": 5}, "#/format", "must be a string"),
        ({"items": 7}, "#/items", "must be an object or a boolean"),
        ({"items": [{}, 7]}, "#/items/1", "must be an object or a boolean"),
        ({"$ref": 5}, "#/$ref", "must be a string"),
        ({"type": ["string", 5]}, "#/type", "type name"),
        ({"type": "strin"}, "#/type", "unknown type"),
        ({"multipleOf": 0}, "#/multipleOf", "must be > 0"),
        ({"multipleOf": -2}, "#/multipleOf", "must be > 0"),
        ({"minimum": "3"}, "#/minimum", "must be a number"),
        ({"minimum": True}, "#/minimum", "must be a number"),
        ({"exclusiveMaximum": "x"}, "#/exclusiveMaximum", "must be a number"),
        ({"uniqueItems": "yes"}, "#/uniqueItems", "true or false"),
        ({"allOf": {}}, "#/allOf", "non-empty array"),
        ({"anyOf": []}, "#/anyOf", "non-empty array"),
        ({"oneOf": [True, 3]}, "#/oneOf/1", "must be an object or a boolean"),
        ({"not": []}, "#/not", "must be an object or a boolean"),
        ({"dependentRequired": {"a": 5}}, "#/dependentRequired/a", "property names"),
        ({"dependencies": {"a": 5}}, "#/dependencies/a", "must be an object or a boolean"),
        ({"$defs": {"x": 5}}, "#/$defs/x", "must be an object or a boolean"),
        ({"enum": [float("nan")]}, "#/enum/0", "no JSON number"),
        ({"const": float("inf")}, "#/const", "no JSON number"),
        ({"default": {"a": [float("-inf")]}}, "#/default/a/0", "no JSON number"),
        ({"minimum": float("inf")}, "#/minimum", "no JSON number"),
        ({"enum": [10**5000]}, "#/enum/0", "too large"),
        ({"minimum": -(10**5000)}, "#/minimum", "too large"),
        ({"const": {1, 2}}, "#/const", "not a JSON value"),
        ({"const": ("a",)}, "#/const", "not a JSON value"),
        ({"examples": [{2: 1}]}, "#/examples/0", "key must be a string"),
        ({"const": "\ud800"}, "#/const", "lone surrogate"),
        ({"properties": {"\udfff": {}}}, "#/properties", "lone surrogate"),
    ],
)
def test_malformed_keywords_name_the_pointer(schema: dict, pointer: str, message: str) -> None:
    with pytest.raises(SchemaError) as info:
        compile_json_schema(schema)
    assert info.value.pointer == pointer, str(info.value)
    assert message in str(info.value)


def test_malformed_keyword_inside_a_ref_target_outside_the_schema_positions() -> None:
    # a $ref into an unknown keyword: the target is checked when it is reached
    schema = {"x-lib": {"a": {"minLength": "no"}}, "$ref": "#/x-lib/a"}
    with pytest.raises(SchemaError) as info:
        compile_json_schema(schema)
    assert info.value.pointer.endswith("/minLength")


def test_remote_documents_are_checked_too() -> None:
    def load(uri: str) -> object:
        return {"$defs": {"n": {"type": "integer", "minimum": "zero"}}}

    with pytest.raises(SchemaError) as info:
        compile_json_schema({"$ref": "https://example.test/s.json#/$defs/n"}, resolve_remote=load)
    assert info.value.pointer == "https://example.test/s.json#/$defs/n/minimum"


def test_schema_text_that_is_not_json_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="not JSON"):
        compile_json_schema('{"type": ')
    with pytest.raises(SchemaError):
        compile_json_schema("[" + "1" * 5000 + "]")  # an integer literal Python refuses
    with pytest.raises(LimitError) as info:
        compile_json_schema("[" * 100_000 + "]" * 100_000)
    assert info.value.limit in ("max_json_depth", "max_text_chars")


def test_unknown_format_is_an_annotation_and_unknown_keywords_are_ignored() -> None:
    g = compile_json_schema({"type": "string", "format": "zzz", "x-anything": {"nested": [1, None]}})
    assert ok(g, '"hello"')
    assert any("zzz" in w for w in g.warnings)


def test_valid_odd_shapes_still_compile() -> None:
    # integral floats as counts, draft-04 boolean exclusives, an infinite open bound
    g = compile_json_schema({"type": "string", "maxLength": 2.0})
    assert ok(g, '"ab"') and not ok(g, '"abc"')
    g = compile_json_schema({"type": "integer", "minimum": 3, "exclusiveMinimum": True}, draft="draft4")
    assert ok(g, "4") and not ok(g, "3")
    g = compile_json_schema({"type": "number", "maximum": float("inf")})
    assert ok(g, "1e308")


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}], "type": "integer"}}, "$ref": "#/$defs/a"},
        {"allOf": [{"$ref": "#"}], "type": "string"},
    ],
)
def test_ref_cycles_without_nesting_are_errors(schema: dict) -> None:
    with pytest.raises(SchemaError, match="cycle"):
        compile_json_schema(schema)


def test_recursion_through_a_property_is_fine() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
            "additionalProperties": False}
    g = compile_json_schema(tree)
    assert ok(g, '{"kids":[{"kids":[]},{}]}')


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"$ref": "#/nope"}, SchemaError),
        ({"$ref": "#/$defs/a", "$defs": {"a": 5}}, SchemaError),
        ({"$ref": "#/enum/0", "enum": [3]}, SchemaError),
        ({"$ref": "#unknown-anchor"}, SchemaError),
        ({"$ref": "http://example.com/remote.json"}, UnsupportedSchemaError),
    ],
)
def test_bad_references(schema: dict, error: type) -> None:
    with pytest.raises(error):
        compile_json_schema(schema)


def test_long_ref_chain_is_iterative() -> None:
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(5000)}
    defs["d5000"] = {"type": "integer"}
    g = compile_json_schema({"$defs": defs, "$ref": "#/$defs/d0"})
    assert ok(g, "7")


# --------------------------------------------------------------------------- deep


def _nested(kw: str, n: int, leaf: object) -> dict:
    s = leaf
    for _ in range(n):
        if kw == "properties":
            s = {"type": "object", "properties": {"a": s}, "required": ["a"], "additionalProperties": False}
        elif kw == "items":
            s = {"type": "array", "items": s}
        else:
            s = {kw: [s]}
    return s  # type: ignore[return-value]


@pytest.mark.parametrize(("kw", "n"), [("properties", 300), ("allOf", 2000), ("anyOf", 500), ("items", 500)])
def test_too_deep_schemas_are_limit_errors(kw: str, n: int) -> None:
    with pytest.raises(LimitError) as info:
        compile_json_schema(_nested(kw, n, {"type": "integer"}))
    assert info.value.limit == "max_json_depth"
    assert info.value.place.startswith("#/")


@pytest.mark.parametrize(("kw", "n"), [("properties", 99), ("allOf", 99), ("anyOf", 99), ("items", 199)])
def test_deep_schemas_within_the_limits_compile(kw: str, n: int) -> None:
    g = compile_json_schema(_nested(kw, n, {"type": "integer"}))
    if kw == "properties":
        text = '{"a":' * n + "1" + "}" * n
    elif kw == "items":
        text = "[" * n + "1" + "]" * n
    else:
        text = "1"
    assert ok(g, text)


def test_nesting_through_refs_is_bounded_by_max_nesting() -> None:
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(300)}
    defs["d300"] = {"type": "integer"}
    with pytest.raises(LimitError) as info:
        compile_json_schema({"$defs": defs, "$ref": "#/$defs/d0"})
    assert info.value.limit == "max_nesting"
    assert info.value.place.startswith("#/$defs/")
    with limits(Limits(max_nesting=50)), pytest.raises(LimitError):
        compile_json_schema({"$defs": defs, "$ref": "#/$defs/d250"})


def test_deeply_nested_pattern_groups_are_a_limit_error() -> None:
    with pytest.raises(LimitError) as info:
        compile_json_schema({"type": "string", "pattern": "(" * 3000 + "a" + ")" * 3000})
    assert info.value.place.startswith("#/pattern")
    with pytest.raises(LimitError):
        compile_json_schema({"type": "string", "pattern": "a" + "{1}" * 3000})


def test_python_dict_cycles_terminate() -> None:
    s: dict = {"type": "array"}
    s["items"] = s  # not JSON: a Python object graph with a cycle; read as recursion
    g = compile_json_schema(s)
    assert ok(g, "[[],[[]]]") and not ok(g, "[1]")
    v: list = []
    v.append(v)
    with pytest.raises(LimitError):
        compile_json_schema({"const": v})


# --------------------------------------------------------------------------- big


def _timed(fn):  # type: ignore[no-untyped-def]
    # the garbage collector off while timing: a full collection walks the whole test
    # process's heap (thousands of tests' objects), a cost of the process and not of the
    # input; the larger input allocates more and so met more of them (a clean-clone run
    # failed at 51x for 10x the properties, which takes 11x alone)
    gc.collect()
    gc.disable()
    try:
        t = time.process_time()
        out = fn()
        return out, time.process_time() - t
    finally:
        gc.enable()


def test_big_enum_and_properties_are_linear() -> None:
    # 10x more input must not cost much more than 10x (quadratic would be 100x)
    def enum(n: int) -> Grammar:
        return compile_json_schema({"type": "string", "maxLength": 8, "enum": [f"v{i}" for i in range(n)]})

    def props(n: int) -> Grammar:
        return compile_json_schema({"type": "object", "required": [f"p{i}" for i in range(n)],
                                    "properties": {f"p{i}": {"type": "integer"} for i in range(n)}})

    def one_of(n: int) -> Grammar:
        return compile_json_schema({"oneOf": [{"const": i} for i in range(n)]})

    for build in (enum, props, one_of):
        build(200)  # warm caches
        # best of a few runs: one slow run on a loaded machine is not what is measured here
        small = min(_timed(lambda: build(1000))[1] for _ in range(3))  # noqa: B023
        g, big = min((_timed(lambda: build(10_000)) for _ in range(2)), key=lambda r: r[1])  # noqa: B023
        assert big < max(30 * small, 0.5), (build.__name__, small, big)
        assert len(g.rules) >= 10_000
        assert not g.warnings


def test_ten_thousand_values_are_checked_against_siblings() -> None:
    g = compile_json_schema({"type": "string", "maxLength": 3, "enum": [f"v{i}" for i in range(10_000)]})
    assert ok(g, '"v99"') and not ok(g, '"v100"')


def test_many_open_properties_and_big_property_counts() -> None:
    g = compile_json_schema({"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(2000)}})
    assert ok(g, '{"p0":1,"p1999":2,"zz":true}') and not ok(g, '{"p5":"x"}')
    g = compile_json_schema({"type": "object", "minProperties": 3000, "maxProperties": 5000},
                            property_order="any")
    assert not ok(g, '{"a":1}')


def test_discriminated_union_of_many_branches_is_exact() -> None:
    branches = [{"type": "object", "properties": {"k": {"const": f"c{i}"}, "v": {"type": "integer"}},
                 "required": ["k"], "additionalProperties": False} for i in range(1000)]
    g = compile_json_schema({"oneOf": branches})
    assert not g.warnings
    assert ok(g, '{"k":"c999","v":1}') and not ok(g, '{"k":"c1000"}')


def test_overlapping_one_of_still_warns_with_the_first_pair() -> None:
    branches = [{"const": i} for i in range(100)] + [{"enum": [3, "x"]}]
    g = compile_json_schema({"oneOf": branches})
    assert any("branches 3 and 100" in w for w in g.warnings)
    # the value in two branches is not generated: oneOf is still checked for enum values
    assert not ok(g, "3") and ok(g, "4") and ok(g, '"x"')


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"type": "array", "minItems": 10**9}, "#/minItems"),
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 10**9, "minItems": 2}, "#/maxItems"),
        ({"type": "string", "maxLength": 10**9}, "#/maxLength"),
        ({"type": "string", "minLength": 10**9}, "#/minLength"),
        ({"type": "array", "contains": {}, "minContains": 10**9}, "#/minContains"),
        ({"type": "object", "maxProperties": 10**9}, "#/maxProperties"),
        ({"type": "object", "minProperties": 10**9}, "#/minProperties"),
    ],
)
def test_repeat_bounds_above_max_repeat_are_limit_errors(schema: dict, pointer: str) -> None:
    with pytest.raises(LimitError) as info:
        compile_json_schema(schema)
    assert info.value.limit == "max_repeat"
    assert info.value.place == pointer


@pytest.mark.parametrize(
    ("schema", "place"),
    [
        ({"type": "string", "pattern": "^a{99999999999}$"}, "#/pattern (offset"),
        ({"type": "string", "pattern": "^x(a{2,200001})"}, "#/pattern (offset"),
        ({"type": "string", "pattern": "^a*$", "minLength": 10**9}, "#/minLength"),
        ({"type": "object", "patternProperties": {"^a{300000}$": {}}}, "#/patternProperties/^a{300000}$ (offset"),
    ],
)
def test_repeat_counts_in_patterns_are_limit_errors(schema: dict, place: str) -> None:
    with pytest.raises(LimitError) as info:
        compile_json_schema(schema)
    assert info.value.limit == "max_repeat"
    assert info.value.place.startswith(place)


def test_vacuous_big_bounds_are_fine() -> None:
    # a bound another keyword makes vacuous is never expanded
    g = compile_json_schema({"type": "string", "format": "date", "maxLength": 2**31})
    assert ok(g, '"2024-01-31"')
    g = compile_json_schema({"type": "array", "items": False, "maxItems": 2**40})
    assert ok(g, "[]")


def test_limits_come_from_the_active_limits() -> None:
    with limits(Limits(max_repeat=10)), pytest.raises(LimitError):
        compile_json_schema({"type": "string", "maxLength": 11})
    with limits(Limits(max_alternatives=5)), pytest.raises(LimitError) as info:
        compile_json_schema({"enum": list(range(6))})
    assert info.value.place == "#/enum"
    with limits(Limits(max_rules=50)), pytest.raises(LimitError) as info:
        compile_json_schema({"type": "object", "required": [f"p{i}" for i in range(100)],
                             "properties": {f"p{i}": {"type": "integer"} for i in range(100)}})
    assert info.value.limit == "max_rules"
    with limits(Limits(max_text_chars=1000)), pytest.raises(LimitError):
        compile_json_schema({"enum": ["x" * 2000]})


def test_compile_is_bounded_by_compile_seconds() -> None:
    schema = {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer", "minimum": i}}}
                        for i in range(3000)]}
    t = time.monotonic()
    with limits(Limits(compile_seconds=0.2)), pytest.raises(LimitError) as info:
        compile_json_schema(schema)
    assert info.value.limit == "compile_seconds"
    assert time.monotonic() - t < 5


# --------------------------------------------------------------------------- contradictions


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 5, "maximum": 1},
        {"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1},
        {"type": "string", "minLength": 3, "maxLength": 2},
        {"type": "array", "minItems": 3, "maxItems": 2},
        {"type": "object", "minProperties": 3, "maxProperties": 2},
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"enum": []},
        {"enum": [1, 2], "const": 3},
        {"type": "object", "required": ["a"], "properties": {"a": False}},
        {"type": "string", "pattern": "^a+$", "maxLength": 0},
        {"type": "string", "pattern": "^a+$", "maxLength": 3, "format": "date"},  # found by the fuzz test
        {"not": {}},
        False,
    ],
)
def test_contradictions_say_no_value_matches(schema: object) -> None:
    t = time.monotonic()
    with pytest.raises(SchemaError, match="allows no"):
        compile_json_schema(schema)
    assert time.monotonic() - t < 5


def test_dumps_for_fails_soft_on_hostile_schemas() -> None:
    assert dumps_for({"required": 5}, {"a": 1}) == '{"a":1}'
    assert dumps_for({"$ref": "#"}, [1]) == "[1]"


def _object_chain(n: int) -> dict:
    defs = {f"d{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/d{i + 1}"}}, "required": ["a"],
                      "additionalProperties": False} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def test_nesting_up_to_max_nesting_fits_the_stack() -> None:
    g = compile_json_schema(_object_chain(199))
    assert ok(g, '{"a":' * 199 + "1" + "}" * 199)


def test_a_raised_nesting_limit_the_stack_cannot_hold_is_a_limit_error() -> None:
    with limits(Limits(max_nesting=100_000)), pytest.raises(LimitError) as info:
        compile_json_schema(_object_chain(3000))
    assert info.value.limit == "max_nesting"
    assert info.value.place.startswith("#/$defs/d")


def test_an_anchor_defined_twice_in_one_resource_is_an_error() -> None:
    # found by the fuzzer: "#a0" named two subschemas and the compiler picked one silently
    schema = {"$defs": {"d": {"$anchor": "a0", "type": "object",
                              "additionalProperties": {"$defs": {"d": {"$anchor": "a0", "allOf": [False]}},
                                                       "$ref": "#a0"}}},
              "$ref": "#a0"}
    with pytest.raises(SchemaError, match="defined twice") as info:
        Grammar.from_json_schema(schema)
    assert info.value.pointer == "#/$defs/d/additionalProperties/$defs/d"


@pytest.mark.parametrize("value", [[{"type": 5}], 5, None, {"a": 1}])
def test_a_schema_keyword_that_is_no_string_is_a_schema_error(value) -> None:
    """``$schema`` names a draft by URI; anything else is refused at its pointer (the
    validator library used for enum checks raised its own TypeError or AttributeError on
    it; found by the long fuzz run)."""
    schema = {"anyOf": [{"else": {"type": "null", "enum": [None], "minimum": 0}, "if": False}], "$schema": value}
    with pytest.raises(SchemaError) as info:
        Grammar.from_json_schema(schema)
    assert info.value.pointer == "#/$schema"
    inner = {"properties": {"a": {"$schema": value, "enum": [1, 2], "minimum": 2}}}
    with pytest.raises(SchemaError, match=r"\$schema"):
        Grammar.from_json_schema(inner)


@pytest.mark.parametrize("value", [-1, None, ["x"]])
def test_an_id_that_is_no_string_is_a_schema_error(value) -> None:
    schema = {"$defs": {"d": {"$anchor": "a0", "allOf": [{"if": {}, "then": {}, "else": {"enum": [None]}}]}},
              "$ref": "#a0", "$id": value}
    with pytest.raises(SchemaError) as info:
        Grammar.from_json_schema(schema)
    assert info.value.pointer == "#/$id"


def test_an_unknown_schema_uri_falls_back_to_the_newest_draft() -> None:
    g = Grammar.from_json_schema({"$schema": "urn:nobody", "enum": [1, 2, "x"], "type": "integer", "minimum": 2})
    assert g is not None
