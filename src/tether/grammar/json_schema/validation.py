"""Checking values against schema members with ``jsonschema`` (an optional dependency).

``enum``/``const`` values are kept only when the sibling keywords accept them
(``validator``); ``dumps_for`` picks the ``anyOf``/``oneOf`` branch and the
``if``/``then``/``else`` case a value is in (``is_valid``). Without ``jsonschema`` the
values are not checked (a warning says so) and only ``type`` picks a branch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tether.grammar.json_schema.context import (
    ARRAY_KW,
    HANDLED,
    NUMBER_KW,
    OBJECT_KW,
    STRING_KW,
    Context,
    Member,
    ptr,
    type_of,
    type_set,
)


def validator(c: Context, flat: list[Member], types: set[str] | None = None, *,
              without_values: bool = False) -> Callable[[Any], bool] | None:
    """A check of values against every member (jsonschema), or None if nothing to check.

    With ``types``, members whose keywords cannot affect values of those types are
    skipped; with ``without_values``, their ``enum``/``const`` are not checked (the
    caller has intersected them already).
    """
    relevant = _relevant(None if types is None else frozenset(types))
    # with ``without_values`` (values for one branch of every anyOf/oneOf in ``flat``,
    # which is in ``flat`` too): a value of the branch satisfies its anyOf, and its
    # oneOf when the branches are provably disjoint (no warning), so neither is
    # checked again: a oneOf of n consts costs n checks, not n²
    members: list[tuple[dict[Any, Any], frozenset[str]]] = []
    for s, p in flat:
        drop: frozenset[str] = frozenset()
        if without_values:
            drop = frozenset(k for k in ("enum", "const", "anyOf", "oneOf") if k in s and not (
                k == "oneOf" and ptr(p, "oneOf") in c.one_of_warned))
        if any(k in relevant and k not in drop for k in s):
            members.append((s, drop))
    if not members:
        return None
    try:
        import jsonschema
    except ImportError:
        c.warn("enum/const values are not checked against sibling keywords (install jsonschema)")
        return None
    root = root_validator(c, jsonschema)
    try:
        vals = []
        for s, drop in members:
            v = c.member_validators.get((id(s), drop))
            if v is None:
                part = s
                if drop:
                    part = {k: x for k, x in s.items() if k not in drop}
                    c.keep.append(part)
                v = root.evolve(schema=part)
                c.member_validators[(id(s), drop)] = v
            vals.append(v)
    except Exception:  # noqa: BLE001
        return None

    def check(v: Any) -> bool:
        try:
            return all(val.is_valid(v) for val in vals)
        except Exception:  # noqa: BLE001 - unresolvable refs: keep the value
            return True

    return check


@functools.lru_cache(maxsize=256)
def _relevant(types: frozenset[str] | None) -> frozenset[str]:
    """The keywords ``validator`` checks for values of ``types`` (None: any type)."""
    relevant = set(HANDLED) - {"enum", "const", "type"}
    if types is not None:
        for t, kws in (("object", OBJECT_KW), ("array", ARRAY_KW), ("string", STRING_KW)):
            if t not in types:
                relevant -= set(kws)
        if not types & {"integer", "number"}:
            relevant -= set(NUMBER_KW)
    return frozenset(relevant)


def is_valid(c: Context, schema: Any, value: Any) -> bool:
    if not isinstance(schema, dict):
        return schema is not False
    try:
        import jsonschema
    except ImportError:
        t = schema.get("type")
        return t is None or type_of(value) in type_set(t, "#")
    root = root_validator(c, jsonschema)
    try:
        return bool(root.evolve(schema=schema).is_valid(value))
    except Exception:  # noqa: BLE001 - unresolvable refs etc.: undecided, not valid
        return False


def root_validator(c: Context, jsonschema: Any) -> Any:
    """The validator of the whole document (made once; members ``evolve`` from it, so
    their ``$ref`` resolve in the document)."""
    if c.root_validator is None:
        try:  # the draft named by ``$schema``, over the whole document
            cls = jsonschema.validators.validator_for(c.root, default=jsonschema.Draft202012Validator)
            c.root_validator = cls(c.root if isinstance(c.root, (dict, bool)) else {})
        except Exception:  # noqa: BLE001 - the library's own errors on what it cannot read
            c.root_validator = jsonschema.Draft202012Validator({})
    return c.root_validator
