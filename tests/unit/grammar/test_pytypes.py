"""pytypes: Python types → JSON Schema → grammar, and typed values back."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Literal, Optional, TypedDict, Union

import pytest

from tether.errors import SchemaError
from tether.grammar import pytypes
from tether.grammar.json_schema import dumps_for
from tether.parser import accepts


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


class Movie(TypedDict):
    title: str
    year: int


def ok(g, text: str) -> bool:  # type: ignore[no-untyped-def]
    return accepts(g, text.encode())


@pytest.mark.parametrize(
    ("tp", "good", "bad"),
    [
        (int, ["1", "-5"], ['"1"', "1.5"]),
        (float, ["1.5", "2"], ['"x"']),
        (str, ['"a"'], ["1"]),
        (bool, ["true"], ["1"]),
        (type(None), ["null"], ["0"]),
        (list[int], ["[]", "[1,2]"], ['["a"]']),
        (dict[str, int], ['{"a":1}'], ['{"a":"x"}']),
        (tuple[int, str], ['[1,"a"]'], ["[1]", '[1,"a",2]']),
        (tuple[int, ...], ["[]", "[1,2,3]"], ['["a"]']),
        (Optional[int], ["1", "null"], ['"a"']),  # noqa: UP045 - the spelling under test
        (Union[int, str], ["1", '"a"'], ["null"]),  # noqa: UP007
        (Literal["a", "b"], ['"a"'], ['"c"']),
        (Color, ['"red"'], ['"green"']),
        (Point, ['{"x":1}', '{"x":1,"y":2}'], ['{"y":2}', '{"x":1,"z":0}']),
        (Movie, ['{"title":"T","year":1999}'], ['{"title":"T"}']),
    ],
)
@pytest.mark.parametrize("via", ["pydantic", "builtin"])
def test_types_compile_and_accept(tp, good, bad, via: str) -> None:  # type: ignore[no-untyped-def]
    if via == "pydantic":
        pytest.importorskip("pydantic")
        schema = pytypes.schema_of(tp)
    else:
        defs: dict = {}
        schema = pytypes._plain_schema(tp, defs, True)
        if defs:
            schema["$defs"] = defs
    from tether.grammar.json_schema import compile_json_schema

    g = compile_json_schema(schema)
    for t in good:
        assert ok(g, t), (via, tp, t)
    for t in bad:
        assert not ok(g, t), (via, tp, t)


def test_pydantic_model_roundtrip() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Pet(pydantic.BaseModel):
        kind: Literal["cat", "dog"]
        name: str = pydantic.Field(max_length=10)
        age: int | None = None

    class Owner(pydantic.BaseModel):
        name: str
        pets: list[Pet]

    g = pytypes.grammar_of(Owner)
    value = Owner(name="Al", pets=[Pet(kind="cat", name="Tom")])
    text = dumps_for(pytypes.schema_of(Owner), json.loads(value.model_dump_json()))
    assert ok(g, text)
    assert not ok(g, text.replace('"cat"', '"cow"'))
    assert not ok(g, '{"name":"Al","pets":[],"extra":1}')  # closed: the model ignores extras
    assert pytypes.parse_value(Owner, text) == value


def test_pydantic_extra_allow_stays_open() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Open(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="allow")
        a: int

    g = pytypes.grammar_of(Open)
    assert ok(g, '{"a":1,"b":2}')


def test_discriminated_union_is_exact() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Cat(pydantic.BaseModel):
        kind: Literal["cat"]
        lives: int

    class Dog(pydantic.BaseModel):
        kind: Literal["dog"]
        good: bool

    class Box(pydantic.BaseModel):
        pet: Cat | Dog = pydantic.Field(discriminator="kind")

    g = pytypes.grammar_of(Box)
    assert g.warnings == []
    assert ok(g, '{"pet":{"kind":"dog","good":true}}')
    assert not ok(g, '{"pet":{"kind":"dog","lives":1}}')


def test_parse_value_builtin_path() -> None:
    assert pytypes._build(Point, {"x": 1, "y": 2}) == Point(1, 2)
    assert pytypes._build(Color, "red") is Color.RED
    assert pytypes._build(list[Point], [{"x": 3}]) == [Point(3)]
    with pytest.raises(ValueError):
        pytypes._build(int, "1")


def test_parse_value_with_schema_dict_validates() -> None:
    pytest.importorskip("jsonschema")
    assert pytypes.parse_value({"type": "integer"}, "3") == 3
    with pytest.raises(ValueError):
        pytypes.parse_value({"type": "integer"}, '"3"')


def test_unknown_type_is_an_error() -> None:
    with pytest.raises(SchemaError):
        pytypes._plain_schema(object, {}, True)
