"""``items``/``prefixItems``/``additionalItems``, ``minItems``/``maxItems``,
``contains``/``minContains``: array rules.

One state per count of items written (and, with ``contains``, per count of items
written on the "matches contains" path); the last state loops when there is no
``maxItems``. ``uniqueItems``, ``maxContains`` below ``maxItems`` and a second
``contains`` cannot be enforced.
"""

from __future__ import annotations

from typing import Any

from tether.errors import LimitError, SchemaError
from tether.grammar.ir import NT
from tether.grammar.json_schema.context import Context, Member, ptr


def compile_array(c: Context, flat: list[Member], depth: int) -> str | None:
    lo, hi = 0, None
    lo_ptr = hi_ptr = flat[0][1] if flat else "#"
    prefix_lists: list[tuple[list[Any], str, Any, str]] = []  # (prefix, ptr, rest, rest_ptr)
    for s, p in flat:
        for kw in ("minItems", "maxItems"):
            if kw in s:
                v = s[kw]
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                    raise SchemaError(f"'{kw}' must be a non-negative integer", ptr(p, kw))
                if kw == "minItems":
                    if int(v) > lo:
                        lo, lo_ptr = int(v), ptr(p, kw)
                elif hi is None or int(v) < hi:
                    hi, hi_ptr = int(v), ptr(p, kw)
        prefix: list[Any] = []
        pre_ptr = p
        rest: Any = True
        rest_ptr = p
        items = s.get("items")
        if "prefixItems" in s:
            prefix, pre_ptr = s["prefixItems"], ptr(p, "prefixItems")
            if items is not None:
                rest, rest_ptr = items, ptr(p, "items")
        elif isinstance(items, list):
            prefix, pre_ptr = items, ptr(p, "items")
            if "additionalItems" in s:
                rest, rest_ptr = s["additionalItems"], ptr(p, "additionalItems")
        elif items is not None:
            rest, rest_ptr = items, ptr(p, "items")
        if prefix or rest is not True:
            prefix_lists.append((prefix, pre_ptr, rest, rest_ptr))
    k = max((len(pl[0]) for pl in prefix_lists), default=0)

    def members_at(j: int) -> list[Member]:
        out = []
        for prefix, pre_ptr, rest, rest_ptr in prefix_lists:
            if j < len(prefix):
                out.append((prefix[j], ptr(pre_ptr, j)))
            else:
                out.append((rest, rest_ptr))
        return out

    slots: list[str | None] = []
    for j in range(k):
        if hi is not None and j >= hi:
            break
        nt = c.node(members_at(j), depth + 1)
        if nt is None:
            hi = j if hi is None else min(hi, j)
            break
        slots.append(nt)
    rest_nt = c.node(members_at(k), depth + 1) if (hi is None or hi > k) else None
    if rest_nt is None:
        hi = min(hi, len(slots)) if hi is not None else len(slots)
    if hi is not None and lo > hi:
        return None
    # states j = items written so far; the last state loops when there is no maxItems
    top = hi if hi is not None else max(k, lo, 1)
    c.repeat(top, hi_ptr if hi is not None and top == hi else lo_ptr)
    # contains/minContains: count items written on the "matches contains" path, up to need
    need, contains_member = contains(c, flat, hi)
    if need and hi is not None and need > hi:
        return None
    if (top + 1) * (need + 1) * 2 > c.max_rules:
        raise LimitError("max_rules", (top + 1) * (need + 1) * 2, c.max_rules, hi_ptr if hi is not None else lo_ptr,
                         detail="an array state per item count (and per contains count)")

    def with_contains(j: int) -> str | None:
        if not need:
            return None
        return c.node([*members_at(min(j, k)), contains_member], depth + 1)

    slots_c = [with_contains(j) for j in range(len(slots))]
    rest_c = with_contains(k) if rest_nt is not None else None
    if need and not any(slots_c) and rest_c is None:
        return None
    name = {(j, m): c.fresh("arr") for j in range(top + 1) for m in range(need + 1)}
    for j in range(top + 1):
        for m in range(need + 1):
            here = name[(j, m)]
            if j >= lo and m >= need:
                c.rule(here, c.punct_term("close_array", depth, j == 0))
            if hi is not None and j >= hi:
                continue
            item = slots[j] if j < len(slots) else rest_nt
            item_c = slots_c[j] if j < len(slots_c) else rest_c
            sep = c.punct_term("array_sep", depth, j == 0)
            nj = j + 1 if j < top else j
            if item is not None:
                c.rule(here, sep, NT(item), NT(name[(nj, m)]))
            if item_c is not None and m < need:
                c.rule(here, sep, NT(item_c), NT(name[(nj, m + 1)]))
    return name[(0, 0)]


def contains(c: Context, flat: list[Member], hi: int | None) -> tuple[int, Member]:
    """(items that must match ``contains``, the contains member); (0, ...) if none."""
    found = [(s, p) for s, p in flat if "contains" in s]
    if not found:
        return 0, (True, "#")
    if len(found) > 1:
        c.unsupported("contains", ptr(found[1][1], "contains"), "more than one 'contains' on one array")
        return 0, (True, "#")
    s, p = found[0]
    need = s.get("minContains", 1)
    if isinstance(need, float) and need.is_integer():
        need = int(need)
    if not isinstance(need, int) or isinstance(need, bool) or need < 0:
        raise SchemaError("'minContains' must be a non-negative integer", ptr(p, "minContains"))
    if "maxContains" in s and (hi is None or s["maxContains"] < hi):
        c.unsupported("maxContains", ptr(p, "maxContains"),
                      "an upper bound on matching items needs the complement of 'contains'")
    c.repeat(need, ptr(p, "minContains"))
    return need, (s["contains"], ptr(p, "contains"))
