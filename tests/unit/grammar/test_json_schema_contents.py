"""Equal subschemas share one nonterminal: ``JsonContents`` gives two document objects the
same id iff their JSON texts are equal (key order kept), reading each object once."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.grammar.json_schema.context import JsonContents

SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, -0.0, 1.0, 2.5, 1e16]) | st.text("ab", max_size=2)
JSON = st.recursive(SCALARS, lambda v: st.lists(v, max_size=3) | st.dictionaries(st.text("xy", max_size=2), v, max_size=3),
                    max_leaves=12)
CONTAINERS = st.lists(JSON, max_size=3) | st.dictionaries(st.text("xy", max_size=2), JSON, max_size=3)


@settings(max_examples=400, deadline=None)
@given(a=CONTAINERS, b=CONTAINERS)
def test_equal_ids_iff_equal_json_texts(a: Any, b: Any) -> None:
    c = JsonContents()
    assert (c.id_of(a) == c.id_of(b)) == (json.dumps(a) == json.dumps(b))


@settings(max_examples=100, deadline=None)
@given(a=CONTAINERS)
def test_a_copy_gets_the_same_id_and_every_part_is_read_once(a: Any) -> None:
    c = JsonContents()
    copy = json.loads(json.dumps(a))
    doc = {"a": a, "b": copy, "c": [a]}  # ``a`` twice by identity, once by copy
    c.id_of(doc)
    assert c.id_of(a) == c.id_of(copy)


def test_key_order_and_number_types_tell_contents_apart() -> None:
    c = JsonContents()
    docs = [{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1.0, "b": 2}, {"a": True, "b": 2}, {"a": 1, "b": 2}]
    ids = [c.id_of(d) for d in docs]
    assert ids[0] == ids[4] and len(set(ids)) == 4


def test_deep_documents_need_no_recursion() -> None:
    doc: dict[str, Any] = {}
    cur = doc
    for _ in range(5000):
        cur["x"] = {}
        cur = cur["x"]
    c = JsonContents()
    assert c.id_of(doc) != c.id_of(doc["x"])  # 5,000 levels, read with an explicit stack


def test_an_object_inside_itself_ends() -> None:
    d: dict[str, Any] = {"a": 1}
    d["self"] = d
    c = JsonContents()
    assert c.id_of(d) == c.id_of(d)
