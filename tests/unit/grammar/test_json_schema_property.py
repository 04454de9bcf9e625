"""Property: for exact grammars, accepting dumps_for(value) ⇔ jsonschema says valid."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.grammar.json_schema import compile_json_schema, dumps_for
from tether.parser import ByteParser, accepts

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = {
    "record": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": -5, "maximum": 300},
            "tag": {"type": "string", "pattern": "^[a-c]+$", "maxLength": 3},
            "score": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 2.25},
            "kind": {"enum": ["x", "y", None]},
        },
        "required": ["id"],
        "additionalProperties": {"type": "boolean"},
    },
    "list": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"},
             "minItems": 1, "maxItems": 3},
    "union": {"anyOf": [{"type": "string", "minLength": 2}, {"type": "integer", "multipleOf": 3},
                        {"type": "null"}]},
    "keys": {"type": "object", "patternProperties": {"^a": {"type": "integer"}},
             "propertyNames": {"maxLength": 2}, "maxProperties": 2},
}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-10, max_value=400)
    | st.decimals(min_value=-3, max_value=3, places=2, allow_nan=False).map(float)
    | st.text(alphabet="abcz\"\\\n é", max_size=4)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["id", "tag", "score", "kind", "a", "ab", "b", "zz", "abc"]), inner, max_size=3),
    max_leaves=6,
)

_GRAMMARS = {name: ByteParser(compile_json_schema(s)) for name, s in SCHEMAS.items()}


@pytest.mark.parametrize("name", list(SCHEMAS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_accepts_iff_valid(name: str, value: object) -> None:
    schema = SCHEMAS[name]
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    text = dumps_for(schema, value).encode("utf-8")
    assert accepts(_GRAMMARS[name], text) == valid, (text, valid)


def test_grammars_are_exact() -> None:
    for name, s in SCHEMAS.items():
        assert compile_json_schema(s).warnings == [], name
