"""``not``, where it can be enforced exactly.

``not`` of types removes them; ``not`` of string keywords (``pattern``, ``format``,
lengths, string ``enum``/``const``) excludes that string language; ``not`` of
``required`` names (or an ``anyOf`` of such) forbids those keys. Anything else is
``UnsupportedSchemaError`` (or a warning under ``lenient=True``).
"""

from __future__ import annotations

from typing import Any

from tether.grammar import formats as fmt
from tether.grammar.json_schema.context import ANNOTATIONS, Context, Member, allowed_types, ptr
from tether.grammar.json_schema.references import flatten
from tether.grammar.json_schema.string_keywords import name_body


def apply_not(c: Context, s: dict[Any, Any], p: str, types: set[str], nots: dict[Any, Any]) -> set[str]:
    """Apply ``not`` where it can be enforced exactly; record string/key exclusions in
    ``nots`` (``"strings"``: string-body languages to exclude, ``"keys"``: property
    names that must be absent)."""
    if "not" not in s:
        return types
    sub = s["not"]
    q = ptr(p, "not")
    flat = flatten(c, [(sub, q)])
    if flat is None:  # not false: no constraint
        return types
    if not flat:  # not true / not {}: nothing is valid
        return set()
    keys = [set(k for k in ss if k not in ANNOTATIONS) for ss, _ in flat]
    if all(k <= {"type"} for k in keys):
        excluded = allowed_types(flat)
        out = types - excluded
        if "integer" in excluded and "number" in out:
            c.unsupported("not", q, "excluding integers from numbers")
        return out
    string_kw = {"type", "pattern", "format", "minLength", "maxLength", "enum", "const"}
    if all(k <= string_kw for k in keys) and all(
        ss.get("type", "string") == "string" and all(isinstance(v, str) for v in _values_of(ss))
        for ss, _ in flat
    ):
        # strings matching all of these are excluded; other types are not touched
        if any("format" in ss and ss["format"] not in fmt.FORMATS for ss, _ in flat):
            c.unsupported("not", q, "of an unknown format")
            return types
        body = name_body(c, flat)
        if body is None:  # not {type: string}
            return types - {"string"}
        if body is not False:
            nots.setdefault("strings", []).append(body)
        return types
    required_only = required_names(c, flat)
    if required_only is not None:
        nots.setdefault("keys", set()).update(required_only)
        return types
    c.unsupported("not", q, "only 'not' of types, of string constraints or of 'required'")
    return types


def required_names(c: Context, flat: list[Member]) -> set[str] | None:
    """Names N such that the conjunction means "some name of N is present" and nothing
    else (``required`` of one name, or an ``anyOf`` of such), or None."""
    names: set[str] = set()
    for ss, _ in flat:
        ks = set(k for k in ss if k not in ANNOTATIONS)
        if ks == {"required"} and isinstance(ss["required"], list) and len(ss["required"]) == 1:
            names.add(ss["required"][0])
            continue
        if ks == {"anyOf"} and len(flat) == 1:
            for b in ss["anyOf"]:
                bf = flatten(c, [(b, "#")])
                inner = required_names(c, bf) if bf else None
                if inner is None:
                    return None
                names |= inner
            continue
        return None
    return names if len(flat) == 1 or len(names) <= 1 else None


def _values_of(s: dict[Any, Any]) -> list[Any]:
    out = list(s["enum"]) if isinstance(s.get("enum"), list) else []
    if "const" in s:
        out.append(s["const"])
    return out
