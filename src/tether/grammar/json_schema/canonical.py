"""``dumps_for``'s key order: a valid value with its object keys in the order the
grammar writes them (``properties`` order across ``$ref``/``allOf``, the branch and case
the value is in, then the other keys); enum/const values as the schema spells them."""

from __future__ import annotations

from typing import Any

from tether.grammar.json_schema.combinators import split_cases
from tether.grammar.json_schema.context import Context, Member, json_key, ptr
from tether.grammar.json_schema.object_keywords import dependencies, key_members
from tether.grammar.json_schema.references import flatten
from tether.grammar.json_schema.validation import is_valid


def reorder(c: Context, members: list[Member], value: Any) -> Any:
    """``value`` with object keys in the order the grammar writes them."""
    flat = flatten(c, members)
    if flat is None:
        return value
    consumed: set[Any] = set()
    while True:
        pick = next(((s, p, kw) for s, p in flat for kw in ("anyOf", "oneOf")
                     if kw in s and (c.shape(s), kw) not in consumed), None)
        if pick is None:
            break
        s, p, kw = pick
        consumed.add((c.shape(s), kw))
        branches = [(b, ptr(p, kw, i)) for i, b in enumerate(s[kw])]
        chosen = next((b for b in branches if is_valid(c, b[0], value)), branches[0])
        flat = flatten(c, [*flat, chosen]) or flat
    while True:  # if/then/else and schema dependencies: the case the value is in
        split = next(((s, sp) for s, p in flat if (sp := split_cases(c, s, p, frozenset(consumed))) is not None), None)
        if split is None:
            break
        s, (tag, cases) = split
        consumed.add((c.shape(s), tag))
        if tag == "if":
            case = cases[0] if is_valid(c, s["if"], value) else cases[1]
        else:
            case = cases[1] if isinstance(value, dict) and tag.split(":", 1)[1] in value else cases[0]
        flat = flatten(c, [*flat, *case]) or flat
    key = json_key(value)
    for s, _ in flat:  # enum/const values are written as the schema spells them
        for kw in ("const", "enum"):
            vals = [s[kw]] if kw == "const" and kw in s else s.get(kw) if kw == "enum" else None
            for v in vals if isinstance(vals, list) else []:
                if json_key(v) == key:
                    return v
    if isinstance(value, dict):
        order: dict[str, None] = {}  # an ordered set
        for s, _ in flat:
            order.update((k, None) for k in s.get("properties", {}) or {})
        for s, _ in flat:
            order.update((k, None) for k in s.get("required", []) or [])
        for a, bs in dependencies(flat).items():
            order.update((k, None) for k in (a, *bs))
        patterns = [(pat, sub, ptr(p, "patternProperties", pat), idx)
                    for idx, (s, p) in enumerate(flat)
                    for pat, sub in (s.get("patternProperties", {}) or {}).items()]
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        return {k: reorder(c, key_members(c, flat, patterns, k), value[k]) for k in keys}
    if isinstance(value, list):
        out = []
        for j, v in enumerate(value):
            conj: list[Member] = []
            for s, p in flat:
                items = s.get("items")
                if "prefixItems" in s:
                    pre, rest = s["prefixItems"], items
                elif isinstance(items, list):
                    pre, rest = items, s.get("additionalItems")
                else:
                    pre, rest = [], items
                if j < len(pre):
                    conj.append((pre[j], ptr(p, "items", j)))
                elif rest is not None:
                    conj.append((rest, ptr(p, "items")))
            out.append(reorder(c, conj, v))
        return out
    return value
