"""One conjunction with no union left, per JSON type: ``type``, ``enum``/``const``.

The types every member allows (less those a ``not`` excludes) each give alternatives:
``null``, ``true``/``false``, the number lexeme (``number_keywords``), the string lexeme
(``string_keywords``), the array and object rules (``array_keywords``,
``object_keywords``). ``enum``/``const`` values are intersected across the members and
kept when the other keywords accept them (``validation``), written as the layout spells
them.
"""

from __future__ import annotations

from typing import Any

from tether.errors import SchemaError
from tether.grammar.ir import NT
from tether.grammar.json_schema.array_keywords import compile_array
from tether.grammar.json_schema.context import (
    Context,
    Member,
    allowed_types,
    json_key,
    ptr,
    type_of,
)
from tether.grammar.json_schema.negation import apply_not
from tether.grammar.json_schema.number_keywords import compile_number, multiples_rules
from tether.grammar.json_schema.object_keywords import compile_object
from tether.grammar.json_schema.string_keywords import compile_string
from tether.grammar.json_schema.validation import validator
from tether.limits import check_deadline


def typed(c: Context, flat: list[Member], depth: int) -> list[tuple[Any, ...]]:
    """The alternatives (right-hand sides) of the conjunction ``flat``, one or more per
    JSON type it allows."""
    types = allowed_types(flat)
    nots: dict[Any, Any] = {}
    for s, p in flat:
        types = apply_not(c, s, p, types, nots)
        check_keywords(c, s, p, types)
    values: list[Any] | None = None
    for s, p in flat:
        for kw in ("enum", "const"):
            if kw in s:
                if kw == "enum" and not isinstance(s[kw], list):
                    raise SchemaError("'enum' must be an array", ptr(p, kw))
                vals = [s[kw]] if kw == "const" else list(s[kw])
                if values is None:
                    values = vals
                else:
                    keys = {json_key(v) for v in vals}
                    values = [v for v in values if json_key(v) in keys]
    if values is not None:
        return enum_values(c, values, flat, types, depth)
    alts: list[tuple[Any, ...]] = []
    if "null" in types:
        alts.append((c.term(("lit", "null")),))
    if "boolean" in types:
        alts.append((c.term(("lit", "true")),))
        alts.append((c.term(("lit", "false")),))
    if "number" in types or "integer" in types:
        rx = compile_number(c, flat, integer="number" not in types)
        if isinstance(rx, tuple) and rx[0] == "mod":
            alts.append((NT(multiples_rules(c, rx[1])),))
        elif rx is not None:
            alts.append((c.term(("rx", rx) if isinstance(rx, str) else ("expr", rx), "num"),))
    if "string" in types:
        spec = compile_string(c, flat, nots.get("strings", []))
        if spec is not None:
            alts.append((c.term(spec, "str"),))
    if "array" in types:
        a = compile_array(c, flat, depth)
        if a is not None:
            alts.append((NT(a),))
    if "object" in types:
        o = compile_object(c, flat, depth, nots.get("keys", set()))
        if o is not None:
            alts.append((NT(o),))
    return alts


# the keywords ``check_keywords`` reports on
_CHECKED = frozenset(("uniqueItems", "unevaluatedItems", "unevaluatedProperties"))


def check_keywords(c: Context, s: dict[Any, Any], p: str, types: set[str]) -> None:
    if c.draft in ("draft6", "draft7") and "string" in types:
        for kw in ("contentMediaType", "contentEncoding"):
            if kw in s:
                c.warn(f"{kw} is not enforced (at {ptr(p, kw)})")
    if _CHECKED.isdisjoint(s):
        return
    for kw, v in s.items():  # in the schema's order (the first unsupported one is reported)
        if kw not in _CHECKED:  # (if/then/else: read as a union in combinators.split_cases)
            continue
        if kw == "uniqueItems":
            if v is True and "array" in types:
                c.unsupported(kw, ptr(p, kw), "array items cannot be required to differ")
            continue
        if kw == "unevaluatedItems" and "array" in types and v is not True:
            c.unsupported(kw, ptr(p, kw))
        if kw == "unevaluatedProperties":
            if "object" in types and v not in ({}, True):
                c.unsupported(kw, ptr(p, kw))


def enum_values(c: Context, values: list[Any], flat: list[Member], types: set[str], depth: int) -> list[tuple[Any, ...]]:
    """Alternatives for enum/const values that satisfy every member."""
    keep = []
    # the values already satisfy every member's enum/const (intersected in typed):
    # the check reads the other keywords only, so a long enum costs linear time
    check = validator(c, flat, {type_of(v) for v in values}, without_values=True)
    for i, v in enumerate(values):
        if not i & 1023:
            check_deadline(flat[0][1] if flat else "#")
        t = type_of(v)
        if t not in types and not (t == "integer" and "number" in types):
            continue
        if check is not None and not check(v):
            continue
        keep.append(v)
    alts = []
    seen = set()
    for v in keep:
        spec = c.layout.value_spec(v, depth)
        if spec in seen:
            continue
        seen.add(spec)
        alts.append((c.term(spec, "lit"),))
    return alts
