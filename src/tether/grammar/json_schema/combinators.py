"""``anyOf``/``oneOf``, ``if``/``then``/``else`` and schema dependencies: unions.

A conjunction with an ``anyOf``/``oneOf`` is distributed over its branches (each branch
joins the conjunction; the union of the branches is the result); ``if``/``then``/``else``
and a schema dependency are read as a union of two exact cases (``split_cases``). A
``oneOf`` whose branches are not provably disjoint is compiled as ``anyOf``, with a
warning (``check_one_of``; disjointness from types, enum/const values and
discriminating consts, in linear time for long lists). A conjunction with no union left
is compiled per JSON type (``per_type.typed``).
"""

from __future__ import annotations

from typing import Any

from tether.errors import SchemaError
from tether.grammar.ir import NT
from tether.grammar.json_schema.context import (
    TYPES,
    Context,
    Member,
    json_key,
    ptr,
    type_of,
    type_set,
)
from tether.grammar.json_schema.per_type import typed
from tether.grammar.json_schema.references import flatten
from tether.limits import check_deadline


def alternatives(c: Context, flat: list[Member], depth: int, consumed: frozenset[Any]) -> list[tuple[Any, ...]]:
    """The alternatives of the conjunction ``flat``: its first ``anyOf``/``oneOf`` not yet
    ``consumed`` distributed over the branches, else its first two-case split, else
    ``per_type.typed``."""
    for s, p in flat:
        for kw in ("anyOf", "oneOf"):
            if kw in s and (c.shape(s), kw) not in consumed:
                branches = s[kw]
                if not isinstance(branches, list) or not branches:
                    raise SchemaError(f"'{kw}' must be a non-empty array", ptr(p, kw))
                done = consumed | {(c.shape(s), kw)}
                if kw == "oneOf" and len(branches) > 1:
                    check_one_of(c, branches, ptr(p, kw), flat)
                alts = []
                for i, b in enumerate(branches):
                    nt = c.node([*flat, (b, ptr(p, kw, i))], depth, done)
                    if nt is not None:
                        alts.append((NT(nt),))
                return alts
    for s, p in flat:
        split = split_cases(c, s, p, consumed)
        if split is not None:
            tag, branches = split
            alts = []
            for extra in branches:
                nt = c.node([*flat, *extra], depth, consumed | {(c.shape(s), tag)})
                if nt is not None:
                    alts.append((NT(nt),))
            return alts
    return typed(c, flat, depth)


def split_cases(c: Context, s: dict[Any, Any], p: str, consumed: frozenset[Any]) -> tuple[str, list[list[Member]]] | None:
    """Keywords read as a union of two exact cases, each a list of extra members:
    ``if``/``then``/``else`` → (if ∧ then) ∪ (not if ∧ else); a schema dependency
    ``A: S`` → (A absent) ∪ (A present ∧ S)."""
    if "if" in s and ("then" in s or "else" in s) and (c.shape(s), "if") not in consumed:
        q = ptr(p, "if")
        then = (s.get("then", True), ptr(p, "then"))
        other = (s.get("else", True), ptr(p, "else"))
        return "if", [[(s["if"], q), then], [(c.synthetic({"not": s["if"]}, q), q), other]]
    for kw in ("dependentSchemas", "dependencies"):
        deps = s.get(kw)
        if not isinstance(deps, dict):
            continue
        for a, sub in deps.items():
            if isinstance(sub, list) or (c.shape(s), f"{kw}:{a}") in consumed:
                continue
            q = ptr(p, kw, a)
            absent = c.synthetic({"not": {"required": [a]}}, q)
            present = c.synthetic({"required": [a]}, q)
            return f"{kw}:{a}", [[(absent, q)], [(present, q), (sub, q)]]
    return None


def check_one_of(c: Context, branches: list[Any], pointer: str, context: list[Member]) -> None:
    infos = []
    for i, b in enumerate(branches):
        flat = flatten(c, [*context, (b, ptr(pointer, i))])
        infos.append(None if flat is None else summary(c, flat))
    pair = _first_overlap(infos, pointer)
    if pair is None or pointer in c.one_of_warned:
        return
    c.one_of_warned.add(pointer)
    c.warn(
        f"oneOf at {pointer}: branches {pair[0]} and {pair[1]} are not provably disjoint; "
        "compiled as anyOf (a value matching both is allowed)"
    )


def summary(c: Context, flat: list[Member]) -> dict[Any, Any]:
    """What disjointness checks need: allowed types, enum values, required consts."""
    types = set(TYPES)
    values: list[Any] | None = None
    consts: dict[str, set[str]] = {}
    for s, p in flat:
        if "type" in s:
            types &= type_set(s["type"], p)
        for kw in ("enum", "const"):
            if kw in s:
                vals = [s[kw]] if kw == "const" else list(s[kw])
                keys = {json_key(v) for v in vals}
                values = [v for v in (values if values is not None else vals) if json_key(v) in keys]
        props = s.get("properties")
        req = set(s.get("required") or [])
        if isinstance(props, dict):
            for k, sub in props.items():
                if k not in req:
                    continue
                sub_flat = flatten(c, [(sub, p)]) or []
                for ss, _ in sub_flat:
                    for kw in ("enum", "const"):
                        if kw in ss:
                            vals = [ss[kw]] if kw == "const" else list(ss[kw])
                            ks = {json_key(v) for v in vals}
                            consts[k] = consts[k] & ks if k in consts else ks
    if "number" in types:
        types.add("integer")
    value_keys = None if values is None else frozenset(json_key(v) for v in values)
    vtypes = None if values is None else {type_of(v) for v in values}
    return {"types": types, "values": values, "consts": consts, "keys": value_keys, "vtypes": vtypes}


def _disjoint(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    """Whether no value satisfies both summaries (``summary``), as far as they show."""
    if not (a["types"] & b["types"]):
        return True
    if a["keys"] is not None and b["keys"] is not None and not (a["keys"] & b["keys"]):
        return True
    if a["keys"] is not None and b["keys"] is None and not (a["vtypes"] & b["types"]):
        return True
    if b["keys"] is not None and a["keys"] is None and not (b["vtypes"] & a["types"]):
        return True
    if a["types"] <= {"object"} or b["types"] <= {"object"}:
        for k, ka in a["consts"].items():
            kb = b["consts"].get(k)
            if kb is not None and not (ka & kb):
                return True
    return False


def _first_overlap(infos: list[dict[Any, Any] | None], pointer: str) -> tuple[int, int] | None:
    """The first pair (i < j, in order) of summaries not provably disjoint, or None.

    Pairs are drawn from *candidates*: two branches with enum/const values that share no
    value, or two objects whose discriminating const differs, are disjoint without a
    look, so a ``oneOf`` of 10,000 consts costs linear time, not 50 million checks.
    """
    idx = [i for i, x in enumerate(infos) if x is not None]
    if len(idx) <= 64:
        candidates: Any = ((i, j) for n, i in enumerate(idx) for j in idx[n + 1:])
    else:
        candidates = _candidate_pairs(infos, idx)
        if candidates is None:
            candidates = ((i, j) for n, i in enumerate(idx) for j in idx[n + 1:])
    for step, (i, j) in enumerate(candidates):
        if not step & 1023:
            check_deadline(pointer)
        if not _disjoint(infos[i], infos[j]):
            return i, j
    return None


_MAX_CANDIDATES = 200_000


def _candidate_pairs(infos: list[Any], idx: list[int]) -> list[tuple[int, int]] | None:
    """Sorted pairs that may overlap (every other pair is disjoint), or None when there
    would be too many to list (the caller then walks every pair)."""
    pairs: set[tuple[int, int]] = set()

    def add_all(group: list[int]) -> bool:
        if len(pairs) + len(group) * (len(group) - 1) // 2 > _MAX_CANDIDATES:
            return False
        pairs.update((a, b) for n, a in enumerate(group) for b in group[n + 1:])
        return True

    with_values = [i for i in idx if infos[i]["keys"] is not None]
    others = [i for i in idx if infos[i]["keys"] is None]
    by_value: dict[str, list[int]] = {}
    for i in with_values:
        for k in infos[i]["keys"]:
            by_value.setdefault(k, []).append(i)
    for group in by_value.values():  # two value sets meet only in a shared value
        if len(group) > 1 and not add_all(group):
            return None
    if len(with_values) * len(others) > _MAX_CANDIDATES:
        return None
    for b in others:
        for a in with_values:
            if infos[a]["vtypes"] & infos[b]["types"]:
                pairs.add((min(a, b), max(a, b)))
    if len(others) > 256:  # a discriminated union: one required name, a const per branch
        common = set.intersection(*(set(infos[i]["consts"]) for i in others))
        if not common or not all(infos[i]["types"] <= {"object"} for i in others):
            return None
        k = min(common)
        by_const: dict[str, list[int]] = {}
        for i in others:
            for v in infos[i]["consts"][k]:
                by_const.setdefault(v, []).append(i)
        for group in by_const.values():
            if len(group) > 1 and not add_all(group):
                return None
    elif not add_all(others):
        return None
    return sorted(pairs)
