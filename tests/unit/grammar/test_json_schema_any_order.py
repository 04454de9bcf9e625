"""``property_order="any"`` on large objects, and equal subschemas sharing one nonterminal.

Regressions from the peers benchmark (dev schemas, ``whitespace="flexible"``,
``property_order="any"``, instance text ``json.dumps(instance)``): objects with more than
8 named properties fell back to schema order, so valid instances written in another order
were rejected (Github_easy---o89710 at token 1, Github_ultra---o69900/o41081/o42127 at
token 19-20, JsonSchemaStore---sourcehut-build-0.65.0 at token 1, grunt-watch-task at
token 52). Now an object is exact while its states fit the budget, and beyond it keeps
the required (and ``dependentRequired``) names exact and lets the other named
properties repeat, with a warning.

JsonSchemaStore---cityjson.min.schema.json inlines its definitions (9,106 schema objects,
301 distinct): each copy was compiled on its own (75k rules); equal subschemas (same JSON
text and base URI) now share their nonterminal.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.grammar.json_schema import compile_json_schema
from tether.grammar.json_schema.object_keywords import ANY_ORDER_BUDGET
from tether.parser import ByteParser, accepts

DEV = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "jsonschemabench-dev" / "schemas"


def ok(g, text: str) -> bool:  # type: ignore[no-untyped-def]
    return accepts(g, text.encode("utf-8"))


def big(n: int, required: list[str], **extra: object) -> dict:
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)},
            "required": required, **extra}


BIG = big(20, ["p3", "p17"], additionalProperties=False)
BIG_G = compile_json_schema(BIG, property_order="any")
BIG_P = ByteParser(BIG_G)


@settings(max_examples=40, deadline=None)
@given(st.permutations([f"p{i}" for i in range(20)]), st.integers(0, 20))
def test_large_object_any_order_accepts_every_order(keys: list[str], k: int) -> None:
    chosen = [x for x in keys[:k] if x not in ("p3", "p17")] + ["p17", "p3"]
    random.Random(k).shuffle(chosen)
    text = json.dumps({x: 1 for x in chosen}, separators=(",", ":"))
    assert accepts(BIG_P, text.encode())


def test_large_object_keeps_required_names_exact() -> None:
    assert any("keeps its 2 required or dependent names unique" in w for w in BIG_G.warnings)
    assert not ok(BIG_G, '{"p3":1}')  # p17 missing
    assert not ok(BIG_G, '{"p3":1,"p17":2,"p3":3}')  # a required name twice
    assert not ok(BIG_G, '{"p3":1,"p17":2,"x":3}')  # additionalProperties: false
    assert ok(BIG_G, '{"p5":1,"p17":2,"p5":3,"p3":4}')  # the stated relaxation: p5 repeats


def test_small_objects_stay_exact() -> None:
    g = compile_json_schema(big(8, ["p0"]), property_order="any")
    assert g.warnings == []
    assert ok(g, '{"p7":1,"p0":2,"p3":3}')
    assert not ok(g, '{"p7":1,"p0":2,"p7":3}')  # no duplicate key


def test_budget_decides_exactness() -> None:
    # n properties cost about 2^n (n + 1) rules when exact
    n = max(k for k in range(8, 20) if (k + 1) << k <= ANY_ORDER_BUDGET)
    g = compile_json_schema(big(n, []), property_order="any")
    assert g.warnings == []
    assert not ok(g, '{"p1":1,"p1":2}')
    g = compile_json_schema(big(n + 1, []), property_order="any")
    assert any("may repeat" in w for w in g.warnings)
    assert ok(g, '{"p1":1,"p0":2}')


def test_dependent_required_is_tracked_in_large_objects() -> None:
    s = big(16, [], dependentRequired={"p2": ["p9"]})
    g = compile_json_schema(s, property_order="any")
    assert ok(g, '{"p9":1,"p2":2}') and ok(g, '{"p2":1,"p9":2}') and ok(g, '{"p5":1}')
    assert not ok(g, '{"p2":1,"p5":2}')
    assert not ok(g, '{"p2":1,"p9":2,"p2":3}')


def test_min_properties_above_required_falls_back_to_schema_order() -> None:
    # repeats could fake minProperties: schema order instead, with a warning
    g = compile_json_schema(big(16, [], minProperties=2), property_order="any")
    assert any("uses schema order" in w for w in g.warnings)
    assert ok(g, '{"p1":1,"p2":2}')
    assert not ok(g, '{"p1":1,"p1":2}')


def test_max_properties_counts_in_large_objects() -> None:
    g = compile_json_schema(big(16, ["p0"], maxProperties=2), property_order="any")
    assert ok(g, '{"p4":1,"p0":2}')
    assert not ok(g, '{"p4":1,"p0":2,"p5":3}')


def test_equal_inlined_subschemas_share_rules() -> None:
    item = {"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(6)},
            "required": ["k0"]}
    one = compile_json_schema({"type": "array", "items": item}, property_order="any")
    many = compile_json_schema(
        {"type": "object", "properties": {f"f{j}": json.loads(json.dumps(item)) for j in range(30)}},
        property_order="any")
    assert len(many.rules) < len(one.rules) + 200  # 30 copies, one set of object states
    assert ok(many, '{"f3":{"k2":"a","k0":"b"},"f7":{"k0":"c"}}')


def test_equal_any_of_in_properties_and_pattern_properties() -> None:
    # a key matched by `properties` and `patternProperties` whose schemas are equal copies
    # (WashingtonPost wp_8 'credits'): both anyOf apply; the value must not become empty
    items = {"items": {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                                  "required": ["a"]}, {"type": "string"}]}, "type": "array"}
    s = {"type": "object", "properties": {"by": items},
         "patternProperties": {"^[a-z]*": json.loads(json.dumps(items))}}
    for order in ("schema", "any"):
        g = compile_json_schema(s, property_order=order)
        assert ok(g, '{"by":[{"a":"x"},"y"]}'), order
        assert not ok(g, '{"by":[1]}'), order


DEV_CASES = ["Github_easy---o89710.json", "Github_ultra---o69900.json",
             "Github_ultra---o41081.json", "Github_ultra---o42127.json",
             "JsonSchemaStore---sourcehut-build-0.65.0.json",
             "JsonSchemaStore---grunt-watch-task.json", "Github_hard---o38538.json",
             "WashingtonPost---wp_8_Normalized.json"]


@pytest.mark.parametrize("name", DEV_CASES)
def test_dev_schema_instances_in_their_own_order(name: str) -> None:
    if not (DEV / name).exists():
        pytest.skip(f"{DEV / name} is missing (shared test data)")
    doc = json.loads((DEV / name).read_text())
    g = ByteParser(compile_json_schema(doc["schema"], whitespace="flexible", property_order="any"))
    valid = [t["data"] for t in doc["tests"] if t["valid"]]
    assert valid
    for v in valid:
        assert accepts(g, json.dumps(v).encode()), json.dumps(v)[:200]


def test_inlined_definitions_compile_once() -> None:
    f = DEV / "JsonSchemaStore---cityjson.min.schema.json"
    if not f.exists():
        pytest.skip(f"{f} is missing (shared test data)")
    g = compile_json_schema(json.loads(f.read_text())["schema"], whitespace="flexible",
                            property_order="any")
    assert len(g.rules) < 40_000  # 75,478 when every inlined copy was compiled on its own


@pytest.mark.parametrize("order", ["schema", "any"])
def test_many_patterns_with_one_schema_keep_other_keys(order: str) -> None:
    # more than 4 patternProperties sharing one schema (Github_ultra---o65323, OCDS
    # "title_<lang>" keys): keys matching no pattern follow additionalProperties, whose
    # absence allows them (they were dropped, found by the llguidance differential)
    pp = {f"^p{i}_": {"type": "integer"} for i in range(6)}
    cases = {None: [True, False, True, True], False: [True, False, False, False],
             "string": [True, False, True, False]}
    for add, expected in cases.items():
        s: dict = {"type": "object", "patternProperties": pp}
        if add is not None:
            s["additionalProperties"] = {"type": "string"} if add == "string" else add
        g = compile_json_schema(s, property_order=order)
        got = [ok(g, t) for t in ('{"p1_a":1}', '{"p1_a":"x"}', '{"zz":"x"}', '{"zz":1}')]
        assert got == expected, (add, got)
