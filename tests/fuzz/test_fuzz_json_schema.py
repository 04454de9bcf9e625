"""Fuzz: every JSON Schema gets a grammar or a tether error, in bounded time.

Five classes of generated schemas — valid, broken (a keyword given a value of the wrong
kind), huge, deep, contradictory — go through ``Grammar.from_json_schema`` under a short
``compile_seconds``; the outcome must be a ``Grammar`` or a ``TetherError`` (never a
TypeError, RecursionError, a hang...). Valid schemas that compile to an exact grammar (no
warnings) are also compiled by the engine for a small byte vocabulary: the shortest
completion from the start is a document the parser accepts and ``jsonschema`` validates.

Each run prints the inputs tried and the outcomes per class (``-s`` shows it). The CI
part takes about half a minute; ``-m slow`` runs the long variant.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import TetherError
from tether.grammar.ir import Grammar
from tether.limits import Limits, limits
from tether.parser import accepts

COUNTS: dict[str, Counter[str]] = defaultdict(Counter)
SECONDS = 10.0  # compile_seconds during the fuzz: a hang shows as LimitError, then fails the time check


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    lines = ["", "JSON Schema fuzz: inputs tried and outcomes by class"]
    for cls, c in sorted(COUNTS.items()):
        total = sum(v for k, v in c.items() if not k.startswith("engine"))
        lines.append(f"  {cls:14s} {total:5d} tried: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    print("\n".join(lines))


# --------------------------------------------------------------------------- strategies

TYPES = ["null", "boolean", "object", "array", "string", "number", "integer"]
PATTERNS = ["^a+$", "[0-9]", "^x", "b$", "^(ab|c)*$", "^[a-c]{1,3}$"]
FORMATS = ["date", "email", "uuid", "ipv4", "zzz-unknown"]
KEYS = st.sampled_from(["a", "b", "c", "x-y", "é"])
SMALL = st.integers(min_value=0, max_value=4)
INTS = st.integers(min_value=-50, max_value=50)
SCALARS = (st.none() | st.booleans() | INTS | st.sampled_from([0.5, -1.25, 3.0])
           | st.text(alphabet="ab\"\\é\n", max_size=3))
JSON = st.recursive(SCALARS, lambda v: st.lists(v, max_size=3) | st.dictionaries(KEYS, v, max_size=3),
                    max_leaves=5)

LEAF = st.one_of(
    st.booleans(),
    st.just({}),
    st.fixed_dictionaries(
        {"type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)},
        optional={"minimum": INTS, "maximum": INTS, "exclusiveMinimum": INTS, "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.01]),
                  "minLength": SMALL, "maxLength": SMALL, "pattern": st.sampled_from(PATTERNS),
                  "format": st.sampled_from(FORMATS), "enum": st.lists(SCALARS, min_size=1, max_size=4),
                  "const": JSON},
    ),
)


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.dictionaries(KEYS, inner, max_size=3)},
            optional={"required": st.lists(KEYS, max_size=3, unique=True), "additionalProperties": inner,
                      "patternProperties": st.dictionaries(st.sampled_from(PATTERNS), inner, max_size=2),
                      "minProperties": SMALL, "maxProperties": SMALL,
                      "propertyNames": st.just({"maxLength": 2}),
                      "dependentRequired": st.dictionaries(KEYS, st.lists(KEYS, max_size=2), max_size=2)},
        ),
        st.fixed_dictionaries(
            {"type": st.just("array")},
            optional={"items": inner, "prefixItems": st.lists(inner, max_size=2), "minItems": SMALL,
                      "maxItems": SMALL, "contains": inner, "minContains": SMALL},
        ),
        st.builds(lambda kw, xs: {kw: xs}, st.sampled_from(["anyOf", "allOf", "oneOf"]),
                  st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda s: {"not": s}, inner),
        st.builds(lambda a, b, c: {"if": a, "then": b, "else": c}, inner, inner, inner),
        st.builds(lambda s, n: {"$defs": {"d": {"$anchor": f"a{n}", "allOf": [s]}}, "$ref": f"#a{n}"},
                  inner, st.integers(0, 99)),
        st.builds(lambda s: {"type": "array", "items": {"$ref": "#"}, "maxItems": 2, **s}, st.just({})),
    )


VALID = st.recursive(LEAF, _extend, max_leaves=10)

# values of every kind, most of them wrong for any given keyword
WRONG = st.one_of(
    INTS, st.just(-1), st.just(10**5000), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3), st.lists(INTS, max_size=2), st.lists(st.text(max_size=1), max_size=2),
    st.dictionaries(st.text(max_size=2), INTS, max_size=2), st.none(), st.booleans(),
    st.just({1: {}}), st.just("\ud800"), st.just({"a": float("nan")}), st.just(frozenset()),
    st.just(("a",)), st.just([{"type": 5}]), st.just({"a": {"$ref": 5}}),
)
KEYWORDS = [
    "type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
    "$defs", "properties", "patternProperties", "additionalProperties", "propertyNames",
    "required", "dependentRequired", "dependentSchemas", "dependencies", "minProperties",
    "maxProperties", "items", "prefixItems", "additionalItems", "contains", "minItems",
    "maxItems", "minContains", "maxContains", "uniqueItems", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "$id", "$anchor", "$schema", "unevaluatedProperties",
]


def _dicts(s: Any) -> list[dict]:
    out, stack = [], [s]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            out.append(x)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out


@st.composite
def broken(draw: st.DrawFn) -> Any:
    schema = copy.deepcopy(draw(VALID))  # st.just values are shared: mutate a copy
    nodes = _dicts(schema)
    if not nodes:
        schema = {}
        nodes = [schema]
    for _ in range(draw(st.integers(1, 3))):
        node = nodes[draw(st.integers(0, len(nodes) - 1))]
        node[draw(st.sampled_from(KEYWORDS))] = copy.deepcopy(draw(WRONG))
    return schema


def _nest(kind: str, n: int) -> Any:
    s: Any = {"type": "integer"}
    if kind == "ref-chain":
        defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(n)}
        defs[f"d{n}"] = s
        return {"$defs": defs, "$ref": "#/$defs/d0"}
    if kind == "ref-allOf-chain":
        defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}]} for i in range(n)}
        defs[f"d{n}"] = s
        return {"$defs": defs, "$ref": "#/$defs/d0"}
    if kind == "pattern":
        return {"type": "string", "pattern": "(" * n + "a" + ")" * n}
    if kind == "const":
        v: Any = 1
        for _ in range(n):
            v = [v]
        return {"const": v}
    for _ in range(n):
        if kind == "properties":
            s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
        elif kind in ("items", "not", "additionalProperties", "contains"):
            s = {kind: s}
        else:
            s = {kind: [s, {"type": "string"}] if kind == "anyOf" else [s]}
    return s


DEEP = st.builds(
    _nest,
    st.sampled_from(["properties", "items", "anyOf", "allOf", "oneOf", "not", "additionalProperties",
                     "contains", "ref-chain", "ref-allOf-chain", "pattern", "const"]),
    st.sampled_from([60, 99, 150, 199, 201, 300, 1000, 3000]),
)


def _huge(kind: str, n: int) -> Any:
    if kind == "enum":
        return {"type": "string", "maxLength": 6, "enum": [f"v{i}" for i in range(n)]}
    if kind == "properties":
        return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}
    if kind == "required":
        return {"type": "object", "required": [f"p{i}" for i in range(n)]}
    if kind == "oneOf":
        return {"oneOf": [{"const": i} for i in range(n)]}
    if kind == "discriminated":
        return {"oneOf": [{"type": "object", "properties": {"k": {"const": i}}, "required": ["k"]}
                          for i in range(n)]}
    if kind == "propertyNames":
        return {"type": "object", "propertyNames": {"enum": [f"k{i}" for i in range(n)]}}
    if kind == "dependencies":
        return {"type": "object", "dependentRequired": {"a": [f"p{i}" for i in range(n)]}}
    if kind == "bounds":
        return {"type": "array", "minItems": n * 10**6, "items": {"type": "string", "maxLength": n ** 3}}
    if kind == "digits":
        return {"type": "number", "minimum": -(10 ** (n // 30)) - 1, "exclusiveMaximum": 10 ** (n // 30),
                "multipleOf": 0.001}
    return {"type": "string", "pattern": "a" * n + "{2}"}


HUGE = st.builds(
    _huge,
    st.sampled_from(["enum", "properties", "required", "oneOf", "discriminated", "propertyNames",
                     "dependencies", "bounds", "digits", "pattern"]),
    st.sampled_from([1000, 5000, 12000]),
)

CONTRADICTIONS = [
    {"type": "integer", "minimum": 5, "maximum": 1},
    {"type": "number", "exclusiveMinimum": 2, "maximum": 2},
    {"type": "string", "minLength": 3, "maxLength": 2},
    {"type": "array", "minItems": 3, "maxItems": 1},
    {"type": "object", "minProperties": 2, "maxProperties": 1},
    {"type": "object", "required": ["a"], "properties": {"a": False}},
    {"type": "object", "required": ["a", "b"], "maxProperties": 1},
    {"allOf": [{"type": "string"}, {"type": "integer"}]},
    {"enum": []},
    {"enum": [1, 2], "const": 3},
    {"not": {}},
    {"type": "string", "pattern": "^a+$", "maxLength": 0},
    {"type": "array", "contains": {"type": "string"}, "items": {"type": "integer"}},
    {"type": "integer", "multipleOf": 2, "minimum": 3, "maximum": 3},
    {"anyOf": [False, {"not": {}}]},
    {"type": "string", "format": "date", "maxLength": 3},
]
CONTRADICTORY = st.builds(
    lambda parts, wrap: wrap(dict(kv for p in parts for kv in p.items())),
    st.lists(st.sampled_from(CONTRADICTIONS), min_size=1, max_size=3),
    st.sampled_from([
        lambda s: s,
        lambda s: {"type": "object", "properties": {"a": s}, "required": ["a"]},
        lambda s: {"type": "array", "prefixItems": [s], "minItems": 1},
        lambda s: {"allOf": [s, {}]},
    ]),
)


# --------------------------------------------------------------------------- the property


def _vocab():  # type: ignore[no-untyped-def]
    from tether.tokens.vocabulary import Vocabulary

    toks = [b""] + [bytes([b]) for b in range(1, 256)] + [b'{"', b'":', b'",', b"true", b"null", b"[]"]
    return Vocabulary.from_bytes(toks, eos_ids=[0])


_VOCAB: list[Any] = []


def _engine_check(g: Grammar, schema: Any, cls: str) -> None:
    """The engine compiles the grammar; its shortest completion is a valid document."""
    import tether.engine.compiled as ec

    jsonschema = pytest.importorskip("jsonschema")
    if not _VOCAB:
        _VOCAB.append(_vocab())
    try:
        cc = ec.compile(g, _VOCAB[0])
        m = cc.matcher()
        m.compute_mask(np.zeros(cc.n_words, dtype=np.uint32))
        text = m.shortest_completion()
    except TetherError as exc:
        COUNTS[cls][f"engine {type(exc).__name__}"] += 1
        return
    assert accepts(g, text), (schema, text)
    value = json.loads(text)
    try:
        valid = jsonschema.validators.validator_for(schema)(schema).is_valid(value)
    except Exception:  # noqa: BLE001 - the reference cannot read it (e.g. a cyclic $ref)
        COUNTS[cls]["engine unchecked"] += 1
        return
    assert valid, (schema, text)
    COUNTS[cls]["engine checked"] += 1


def _compile(schema: Any, cls: str, then: Callable[[Grammar], None] | None = None) -> None:
    t = time.monotonic()
    with limits(Limits(compile_seconds=SECONDS)):
        try:
            g = Grammar.from_json_schema(schema)
        except TetherError as exc:
            outcome = type(exc).__name__
            if outcome == "LimitError":
                outcome += f"({exc.limit})"  # type: ignore[attr-defined]
            COUNTS[cls][outcome] += 1
            g = None
        except BaseException as exc:
            COUNTS[cls][f"FOREIGN {type(exc).__name__}"] += 1
            raise AssertionError(f"{type(exc).__name__} from a {cls} schema: {_short(schema)}") from exc
    elapsed = time.monotonic() - t
    assert elapsed < SECONDS * 1.5, f"{elapsed:.1f} s for a {cls} schema: {_short(schema)}"
    if g is not None:
        COUNTS[cls]["grammar" if not g.warnings else "grammar+warnings"] += 1
        if then is not None:
            then(g)


def _short(schema: Any) -> str:
    try:
        text = json.dumps(schema, default=repr)
    except (ValueError, RecursionError):
        text = f"<{type(schema).__name__} that neither json nor repr can print>"
    return text if len(text) < 400 else text[:400] + "..."


def _fuzz(examples: int) -> Callable:  # type: ignore[type-arg]
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


_SEEN = Counter[str]()


def _maybe_engine(schema: Any, cls: str) -> Callable[[Grammar], None]:
    def then(g: Grammar) -> None:
        _SEEN[cls] += 1
        if not g.warnings and _SEEN[cls] % 3 == 0:
            _engine_check(g, schema, cls)

    return then


@_fuzz(120)
@given(VALID)
def test_valid(schema: Any) -> None:
    _compile(schema, "valid", _maybe_engine(schema, "valid"))


@_fuzz(200)
@given(broken())
def test_broken(schema: Any) -> None:
    _compile(schema, "broken")


@_fuzz(30)
@given(DEEP)
def test_deep(schema: Any) -> None:
    _compile(schema, "deep")


@_fuzz(12)
@given(HUGE)
def test_huge(schema: Any) -> None:
    _compile(schema, "huge")


@_fuzz(60)
@given(CONTRADICTORY)
def test_contradictory(schema: Any) -> None:
    _compile(schema, "contradictory")


@pytest.mark.slow
@_fuzz(3000)
@given(st.one_of(VALID, broken(), CONTRADICTORY))
def test_long(schema: Any) -> None:
    _compile(schema, "long", _maybe_engine(schema, "long"))


@pytest.mark.slow
@_fuzz(150)
@given(st.one_of(DEEP, HUGE))
def test_long_big(schema: Any) -> None:
    _compile(schema, "long-big")


def test_floats_in_schemas_are_finite_or_refused() -> None:
    # a direct check of the float corner the strategies reach only by chance
    for v in (math.nan, math.inf, -math.inf):
        for schema in ({"const": v}, {"enum": [1, v]}, {"multipleOf": v}, {"minLength": v}):
            _compile(schema, "floats")
