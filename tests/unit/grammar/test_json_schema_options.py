"""Generation options of compile_json_schema: closed objects, bounded numbers, whitespace.

Each is off in the spec-faithful default (the conformance suites run the default); these
tests check what each admits and refuses, and that the default is unchanged.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import RegexError
from tether.grammar import pytypes
from tether.grammar.ir import Grammar
from tether.grammar.json_schema import NumberBounds, compile_json_schema, dumps_for
from tether.parser import accepts


def ok(g: Grammar, text: str) -> bool:
    return accepts(g, text.encode("utf-8"))


# --------------------------------------------------------------------------- closed

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]}


def test_closed_admits_only_declared_properties() -> None:
    spec = compile_json_schema(PERSON)
    closed = compile_json_schema(PERSON, closed=True)
    for text in ('{"name":"a"}', '{"name":"a","age":3}'):
        assert ok(spec, text) and ok(closed, text)
    for text in ('{"name":"a","x":1}', '{"name":"a","age":3,"nick":"b"}'):
        assert ok(spec, text) and not ok(closed, text)


def test_closed_keeps_explicit_additional_and_pattern_properties() -> None:
    for extra, good, bad in [
        ({"additionalProperties": True}, '{"name":"a","x":[1]}', None),
        ({"additionalProperties": {"type": "integer"}}, '{"name":"a","x":1}', '{"name":"a","x":"s"}'),
        ({"patternProperties": {"^x-": {"type": "boolean"}}}, '{"name":"a","x-y":true}', '{"name":"a","y":true}'),
        ({"patternProperties": {f"^{c}": {"type": "boolean"} for c in "pqrst"}}, '{"name":"a","p":true}',
         '{"name":"a","y":true}'),
    ]:
        g = compile_json_schema({**PERSON, **extra}, closed=True)
        assert ok(g, good)
        if bad is not None:
            assert not ok(g, bad)


def test_closed_reads_the_conjunction_as_one_object() -> None:
    # allOf fragments: the names declared anywhere in the conjunction are the object's
    schema = {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                        {"properties": {"b": {"type": "string"}}, "required": ["b"]}]}
    g = compile_json_schema(schema, closed=True)
    assert ok(g, '{"a":1,"b":"x"}') and ok(g, '{"b":"x"}') and not ok(g, '{"b":"x","c":1}')
    # one member says what other keys may be: it rules, as in the specification
    other = {"properties": {"a": {}, "b": {}}, "additionalProperties": {"type": "null"}}
    g = compile_json_schema({"allOf": [schema, other]}, closed=True)
    assert not ok(g, '{"b":"x","c":1}') and ok(g, '{"b":"x","c":null}')
    g = compile_json_schema({"allOf": [{"properties": {"a": {}}}, {"additionalProperties": True}]}, closed=True)
    assert ok(g, '{"a":1,"z":2}')


def test_closed_leaves_free_form_objects_open() -> None:
    g = compile_json_schema({"type": "object"}, closed=True)
    assert ok(g, '{"any":{"thing":[1]}}')
    g = compile_json_schema({"type": "object", "properties": {"m": {"type": "object"}}}, closed=True)
    assert ok(g, '{"m":{"k":1}}') and not ok(g, '{"m":{},"k":1}')


def test_closed_with_any_order_and_required_names() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "c"]}
    g = compile_json_schema(schema, closed=True, property_order="any")
    assert ok(g, '{"c":null,"b":2,"a":1}') and not ok(g, '{"a":1,"c":0,"d":1}')


def test_keys_are_never_written_twice_in_closed_objects() -> None:
    for order in ("schema", "any"):
        g = compile_json_schema(PERSON, closed=True, property_order=order)
        assert not ok(g, '{"name":"a","name":"b"}')
        assert not ok(g, '{"name":"a","age":1,"age":2}')
    # open objects: named keys are written once, extra keys are told apart from them
    g = compile_json_schema(PERSON)
    assert not ok(g, '{"name":"a","name":"b"}')
    assert not ok(g, '{"name":"a","x":1,"name":"b"}')


def test_repeated_extra_key_is_flagged_where_it_could_count() -> None:
    g = compile_json_schema({"type": "object", "minProperties": 2})
    assert any("repeated key counts twice" in w for w in g.warnings)
    assert not compile_json_schema({"type": "object", "properties": {"a": {}, "b": {}}, "minProperties": 2},
                                   closed=True).warnings


def test_pytypes_closed_follows_pydantic_extra() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Open(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="allow")
        x: int

    class Forbid(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        y: int

    class Plain(pydantic.BaseModel):
        z: int

    class Outer(pydantic.BaseModel):
        o: Open
        f: Forbid
        p: Plain
        d: dict[str, int]

    g = pytypes.grammar_of(Outer)
    base = '"o":{"x":1},"f":{"y":2},"p":{"z":3},"d":{"k":4}'
    assert ok(g, "{" + base + "}")
    assert ok(g, '{"o":{"x":1,"more":true},"f":{"y":2},"p":{"z":3},"d":{}}')  # extra="allow"
    assert not ok(g, '{"o":{"x":1},"f":{"y":2,"more":1},"p":{"z":3},"d":{}}')  # extra="forbid"
    assert not ok(g, '{"o":{"x":1},"f":{"y":2},"p":{"z":3,"more":1},"d":{}}')  # default: closed
    assert not ok(g, "{" + base + ',"extra":1}')
    g = pytypes.grammar_of(Outer, closed=False)
    assert ok(g, '{"o":{"x":1},"f":{"y":2},"p":{"z":3,"more":1},"d":{}}')
    assert not ok(g, '{"o":{"x":1},"f":{"y":2,"more":1},"p":{"z":3},"d":{}}')  # forbid is the schema's


def test_pytypes_passes_the_other_options() -> None:
    g = pytypes.grammar_of(int, bounded_numbers=NumberBounds(integer_digits=3))
    assert ok(g, "-999") and not ok(g, "1000")


# --------------------------------------------------------------------------- bounded numbers


def test_bounded_integers_default_to_19_digits() -> None:
    g = compile_json_schema({"type": "integer"}, bounded_numbers=True)
    assert ok(g, str(2**63 - 1)) and ok(g, str(-(2**63) + 1)) and ok(g, "9" * 19)
    assert not ok(g, "1" + "0" * 19)
    spec = compile_json_schema({"type": "integer"})
    assert ok(spec, "1" + "0" * 40)


def test_bounded_numbers_bound_mantissa_fraction_and_exponent() -> None:
    g = compile_json_schema({"type": "number"}, bounded_numbers=True)
    assert ok(g, "-1.25") and ok(g, "1." + "1" * 17 + "e-308") and ok(g, "7E+999")
    assert not ok(g, "1." + "1" * 18)
    assert not ok(g, "1e1000")
    assert not ok(g, "1" * 20)
    g = compile_json_schema({"type": "number"}, bounded_numbers=NumberBounds(4, 2, 1))
    assert ok(g, "1234.56e9") and not ok(g, "12345") and not ok(g, "1.234") and not ok(g, "1e10")


def test_schema_bounds_win() -> None:
    g = compile_json_schema({"type": "integer", "maximum": 10**30}, bounded_numbers=True)
    assert ok(g, str(10**30)) and ok(g, "-" + "9" * 30) and not ok(g, str(10**30 + 1))
    g = compile_json_schema({"type": "integer", "minimum": 10**25}, bounded_numbers=True)
    assert ok(g, str(10**25)) and ok(g, "9" * 26) and not ok(g, "1" + "0" * 26)
    g = compile_json_schema({"type": "number", "exclusiveMinimum": 10**-30, "maximum": 2 * 10**-30},
                            bounded_numbers=True)
    assert ok(g, "0." + "0" * 29 + "15")
    g = compile_json_schema({"type": "number", "multipleOf": 10**-20}, bounded_numbers=True)
    assert ok(g, "0." + "0" * 19 + "1")
    # both bounds given: the integers are finite already, the fractions are bounded
    g = compile_json_schema({"type": "number", "minimum": 0, "maximum": 1}, bounded_numbers=NumberBounds(fraction_digits=2))
    assert ok(g, "0.25") and not ok(g, "0.255") and not ok(g, "2")


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(10**25), max_value=10**25), st.integers(1, 25))
def test_bounded_integers_accept_exactly_the_in_range_digits(n: int, digits: int) -> None:
    g = _INT_GRAMMARS.setdefault(digits, compile_json_schema({"type": "integer"}, bounded_numbers=NumberBounds(digits)))
    assert ok(g, str(n)) == (len(str(abs(n))) <= digits)


_INT_GRAMMARS: dict[int, Grammar] = {}


def test_bad_number_bounds() -> None:
    with pytest.raises(ValueError):
        NumberBounds(integer_digits=0)
    with pytest.raises(ValueError):
        compile_json_schema({"type": "integer"}, bounded_numbers=19)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- whitespace


def test_whitespace_layouts() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    value = {"a": [1, 2]}
    compact = compile_json_schema(schema)
    assert ok(compact, '{"a":[1,2]}') and not ok(compact, '{"a": [1, 2]}')
    flexible = compile_json_schema(schema, whitespace="flexible", max_whitespace=2)
    assert ok(flexible, '{ "a" : [1,\n 2] }') and not ok(flexible, '{"a":   [1,2]}')
    pretty = compile_json_schema(schema, whitespace="pretty")
    assert ok(pretty, dumps_for(schema, value, whitespace="pretty"))
    pattern = compile_json_schema(schema, whitespace_pattern="[ ]?")
    assert ok(pattern, '{ "a": [1, 2] }') and ok(pattern, '{"a":[1,2]}')
    assert not ok(pattern, '{"a":[1,\n2]}') and not ok(pattern, '{"a":[1,  2]}')


def test_whitespace_pattern_must_be_json_whitespace() -> None:
    with pytest.raises(ValueError, match="JSON whitespace"):
        compile_json_schema({}, whitespace_pattern="[ x]*")
    with pytest.raises(RegexError):
        compile_json_schema({}, whitespace_pattern="(")
    with pytest.raises(ValueError):
        compile_json_schema({}, whitespace="pretty", whitespace_pattern=" ")


def test_defaults_are_unchanged() -> None:
    # the default grammar is the one with every option off, spelled out
    for schema in (PERSON, {"type": "number"}, {"type": "integer", "minimum": 0}):
        plain = compile_json_schema(schema)
        explicit = compile_json_schema(schema, closed=False, bounded_numbers=False, whitespace="compact")
        assert str(plain) == str(explicit)
    assert Grammar.from_json_schema(PERSON).ir_signature() == compile_json_schema(PERSON).ir_signature()
