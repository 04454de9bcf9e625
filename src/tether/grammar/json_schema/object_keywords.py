"""``properties``, ``required``, ``additionalProperties``, ``patternProperties``,
``propertyNames``, ``min``/``maxProperties``, ``dependentRequired``: object rules.

Every member speaks about every key (by name, by pattern, or by its
``additionalProperties``); keys outside the named ones fall into disjoint regions of
patterns matched and not matched. Properties come in schema order (one state per slot
and count) or, with ``property_order="any"``, in any order (one state per subset of the
names written, within ``ANY_ORDER_BUDGET``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from typing import Any

from tether.errors import SchemaError
from tether.grammar import bounds
from tether.grammar.ir import NT, Rule, T, Terminal
from tether.grammar.json_schema import strings as st
from tether.grammar.json_schema.context import OPEN_KW, Context, Member, at_pointer, ptr
from tether.grammar.json_schema.layout import dumps_str
from tether.grammar.json_schema.nodes import joined, spec_node
from tether.grammar.json_schema.references import flatten
from tether.grammar.json_schema.string_keywords import (
    ANY_BODY,
    body_nonempty,
    name_body,
    names_regex,
    pattern_body,
    pattern_re,
    string_body,
    wrap,
)
from tether.grammar.json_schema.validation import validator

# most rules one object may spend on ``property_order="any"`` states (2^n · (n + extras + 1))
ANY_ORDER_BUDGET = 8_192


def compile_object(c: Context, flat: list[Member], depth: int, forbidden: set[str] | None = None) -> str | None:
    named: dict[str, list[Member]] = {}
    required: dict[str, None] = {}  # an ordered set: lookups stay O(1) for long lists
    min_p, max_p = 0, None
    count_ptr = flat[0][1] if flat else "#"
    name_schemas: list[Member] = []
    for s, p in flat:
        props = s.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("'properties' must be an object", ptr(p, "properties"))
        for k in props:
            named.setdefault(k, [])
        for k in s.get("required", []) or []:
            if not isinstance(k, str):
                raise SchemaError("'required' must list strings", ptr(p, "required"))
            required[k] = None
        if "minProperties" in s and int(s["minProperties"]) > min_p:
            min_p = int(s["minProperties"])
            if max_p is None:
                count_ptr = ptr(p, "minProperties")
        if "maxProperties" in s:
            v = int(s["maxProperties"])
            if max_p is None or v < max_p:
                max_p, count_ptr = v, ptr(p, "maxProperties")
        if "propertyNames" in s:
            name_schemas.append((s["propertyNames"], ptr(p, "propertyNames")))
    for k in required:
        named.setdefault(k, [])
    deps = dependencies(flat)
    for a, bs in deps.items():
        for k in (a, *bs):
            named.setdefault(k, [])
    # every member constrains every key: by properties, patternProperties or additional
    patterns: list[tuple[str, Any, str, int]] = []  # (pattern, schema, ptr, member index)
    for idx, (s, p) in enumerate(flat):
        pp = s.get("patternProperties", {}) or {}
        for pat, sub in pp.items():
            patterns.append((pat, sub, ptr(p, "patternProperties", pat), idx))
    if min_p > 0 or max_p is not None:  # object states count properties up to this
        c.repeat(max(1, max_p if max_p is not None else min_p), count_ptr)
    if patterns:
        for k, conj in named.items():
            conj += key_members(c, flat, patterns, k)
    else:  # ``key_members`` without patterns: each member's property, else its additional
        per = [(s.get("properties", {}), ptr(p, "properties"),
                (s["additionalProperties"], ptr(p, "additionalProperties")) if "additionalProperties" in s else None)
               for s, p in flat]
        for k, conj in named.items():
            for props, at, other in per:
                if k in props:
                    conj.append((props[k], ptr(at, k)))
                elif other is not None:
                    conj.append(other)
    # property names must satisfy propertyNames
    if name_schemas:
        check = name_check(c, name_schemas)
        for k in list(named):
            if not check(k):
                if k in required:
                    return None
                del named[k]
    forbidden = forbidden or set()
    if forbidden & set(required):
        return None
    slots = []
    for k, conj in named.items():
        if k in forbidden:
            continue
        nt = c.node(conj, depth + 1)
        if nt is None and k in required:
            return None
        if nt is not None:
            slots.append((k, nt, k in required))
    # closed: when no member says what other keys may be (additionalProperties), a key
    # must be named or match a patternProperties pattern
    closed = c.closed and any("properties" in s or "patternProperties" in s for s, _ in flat) \
        and not any(k in s for s, _ in flat for k in OPEN_KW)
    if closed and not patterns:
        extras = []
    else:
        extras = extra_regions(c, flat, patterns, list(named) + sorted(forbidden - set(named)),
                                     name_schemas, depth, closed)
    if max_p is not None and min_p > max_p:
        return None
    if extras and min_p >= 2:
        # the grammar cannot tell additional keys apart: writing one twice counts twice
        c.warn(f"minProperties at {count_ptr}: an additional property may repeat a key, "
               "and a repeated key counts twice (the grammar may allow an object with "
               "fewer distinct keys)")
    present = {k for k, _, _ in slots}
    deps = {a: bs for a, bs in deps.items() if a in present}
    if any(b not in present for bs in deps.values() for b in bs):
        # a name that cannot be present makes its dependents impossible
        absent = {a for a, bs in deps.items() if any(b not in present for b in bs)}
        if absent & set(required):
            return None
        slots = [x for x in slots if x[0] not in absent]
        deps = {a: bs for a, bs in deps.items() if a not in absent}
    if len({k for a, bs in deps.items() for k in (a, *bs)}) > 10:
        c.unsupported("dependentRequired", flat[0][1], "more than 10 names take part")
        deps = {}
    if c.order == "any":
        found: str | None = object_any(c, slots, extras, min_p, max_p, depth, deps,
                                       flat[0][1] if flat else "#")
        return found
    found = object_schema_order(c, slots, extras, min_p, max_p, depth, deps)
    return found


def object_any(c: Context, slots, extras, min_p, max_p, depth, deps, pointer):  # type: ignore[no-untyped-def]
    """``property_order="any"``: exact up to 8 properties or while the states fit
    ``ANY_ORDER_BUDGET``.

    Exact any order needs one state per subset of the named properties written
    (2^n, and no context-free grammar does much better), so beyond the budget only the
    required names and those in ``dependentRequired`` are remembered (each at most
    once, all required ones before ``}``) and the other named properties may come in
    any order, repeated: a duplicate key, which a warning names. Beyond that budget
    too (or with ``minProperties`` above the required count, which repeats could
    fake), schema order, with a warning.
    """
    counting = min_p > 0 or max_p is not None
    cap = max(1, max_p if max_p is not None else min_p) if counting else 1
    per_state = (len(slots) + len(extras) + 1) * (cap + 1 if counting else 1)
    if len(slots) <= 8 or per_state << len(slots) <= ANY_ORDER_BUDGET:
        return object_any_order(c, slots, extras, min_p, max_p, depth, deps)
    dep_names = {k for a, bs in (deps or {}).items() for k in (a, *bs)}
    tracked = {i for i, (k, _, req) in enumerate(slots) if req or k in dep_names}
    n_required = sum(1 for s in slots if s[2])
    if min_p <= n_required:
        counting = max_p is not None
        cap = max(1, max_p) if max_p is not None else 1
        per_state = (len(slots) + len(extras) + 1) * (cap + 1 if counting else 1)
        if per_state << len(tracked) <= ANY_ORDER_BUDGET:
            c.warn(f"property_order='any': an object with {len(slots)} properties keeps "
                   f"its {len(tracked)} required or dependent names unique; the others "
                   f"may repeat (a duplicate key) (at {pointer})")
            return object_any_order(c, slots, extras, min(min_p, 0), max_p, depth, deps,
                                          tracked)
    c.warn(f"property_order='any' needs too many states for an object with "
           f"{len(slots)} properties; it uses schema order (at {pointer})")
    return object_schema_order(c, slots, extras, min_p, max_p, depth, deps)


def key_members(c: Context, flat: list[Member], patterns: list[Any], k: str) -> list[Member]:
    """What each member says about the value of key ``k``."""
    conj: list[Member] = []
    for idx, (s, p) in enumerate(flat):
        props = s.get("properties", {})
        matched = False
        if k in props:
            conj.append((props[k], ptr(p, "properties", k)))
            matched = True
        for pat, sub, q, i in patterns:
            if i == idx and pattern_matches(c, pat, k, q):
                conj.append((sub, q))
                matched = True
        if not matched and "additionalProperties" in s:
            conj.append((s["additionalProperties"], ptr(p, "additionalProperties")))
    return conj


def pattern_matches(c: Context, pattern: str, key: str, pointer: str) -> bool:
    try:
        found = at_pointer(pointer, pattern_re, pattern)
    except st.PatternError as exc:
        c.unsupported("patternProperties", pointer, str(exc))
        return False
    return found.fullmatch(key) is not None


def name_check(c: Context, name_schemas: list[Member]) -> Callable[[str], bool]:
    flat = flatten(c, name_schemas)
    if flat is None:
        return lambda k: False
    body = string_body(c, flat)
    if body is False:
        return lambda k: False
    if body is None:
        check = validator(c, flat)
        return (lambda k: True) if check is None else check
    from tether import regex as rx

    text = f'"{wrap(body)}"' if isinstance(body, str) else None
    tree = ("concat", '"', body, '"')
    node = spec_node(("rx", text) if text is not None else ("expr", tree))
    if node is None:  # the text does not parse: the error, as the engine reports it
        node = (Terminal("k", regex=text) if text is not None else Terminal("k", expr=tree)).to_node()
    return lambda k: rx.matches(node, dumps_str(k).encode("utf-8"))


def extra_regions(c: Context, flat, patterns, named, name_schemas, depth, closed=False):  # type: ignore[no-untyped-def]
    """[(key body, value nonterminal)] for keys outside ``named`` (disjoint regions);
    ``closed``: none for keys that match no pattern."""
    # keys other than the named ones: a small complement the regex layer builds lazily
    # (a spelled-out complement trie grows with every name)
    not_named: Any = (
        ANY_BODY if not named
        else ("and", ANY_BODY, ("not", names_regex(named)))
    )
    names_body = None
    if name_schemas:
        nflat = flatten(c, name_schemas)
        if nflat is None:
            return []
        names_body = name_body(c, nflat)
        if names_body is False:
            return []
    if len(patterns) > 4:
        distinct = {json.dumps(sub, sort_keys=True) for _, sub, _, _ in patterns}
        if len(distinct) == 1 and len({i for *_, i in patterns}) == 1:
            # one schema for every pattern, all in one member: two regions, keys
            # matching some pattern and keys matching none (the members'
            # additionalProperties, absent meaning any value)
            pats = "|".join(f"(?:{at_pointer(q, pattern_body, pt)})" for pt, _, q, _ in patterns)
            pat, sub, q, i = patterns[0]
            adds = [(idx, (s["additionalProperties"], ptr(p, "additionalProperties")))
                    for idx, (s, p) in enumerate(flat) if "additionalProperties" in s]
            regions = [((pats,), [(sub, q), *(m for idx, m in adds if idx != i)]),
                       ((("not", pats),), [m for _, m in adds])][: 1 if closed else 2]
        else:
            c.unsupported("patternProperties", patterns[0][2],
                          "more than 4 patterns with different schemas")
            patterns = []
            regions = None
    else:
        regions = None
    if regions is None:
        regions = []
        compiled = []
        for pat, _sub, q, _i in patterns:
            try:
                compiled.append(at_pointer(q, pattern_body, pat))
            except st.PatternError as exc:
                c.unsupported("patternProperties", q, str(exc))
                compiled.append(None)
        n = len(patterns)
        for mask in range(1 << n):
            inside = [j for j in range(n) if mask >> j & 1]
            if any(compiled[j] is None for j in inside) or (closed and not inside):
                continue
            conj: list[Member] = []
            for idx, (s, p) in enumerate(flat):
                mine = [j for j in inside if patterns[j][3] == idx]
                if mine:
                    conj += [(patterns[j][1], patterns[j][2]) for j in mine]
                elif "additionalProperties" in s:
                    conj.append((s["additionalProperties"], ptr(p, "additionalProperties")))
            key_parts = [compiled[j] for j in inside]
            key_parts += [("not", compiled[j]) for j in range(n) if j not in inside and compiled[j] is not None]
            regions.append((tuple(key_parts), conj))
    out = []
    for region_keys, conj in regions:
        nt = c.node(conj, depth + 1)
        if nt is None:
            continue
        parts: list[Any] = [*(not_named[1:] if isinstance(not_named, tuple) else [not_named]), *region_keys]
        if names_body is not None:
            parts.append(names_body)
        body = parts[0] if len(parts) == 1 else ("and", *parts)
        # all keys but finitely many named ones: never empty (no regex work needed)
        if (region_keys or names_body is not None) and not body_nonempty(body):
            continue
        out.append((body, nt))
    return out


def extra_key_term(c: Context, depth: int, first: bool, body: Any) -> tuple[T, ...]:
    """``key_term``, memoized for the compile (``Context.extra_terms``): every state of an
    object that takes further keys asks for the same two."""
    key = (depth, first, body)
    t = c.extra_terms.get(key)
    if t is None:
        t = c.extra_terms[key] = key_term(c, depth, first, body)
    return t


def key_term(c: Context, depth: int, first: bool, body: Any) -> tuple[T, ...]:
    """The lexemes of a key in the language ``body`` (a string-body regex or tree): its
    punctuation (``Context.key_punct_terms``) and the key's own."""
    before, after = c.layout.open_key(depth, first)
    head = (before,) if before else ()
    if isinstance(body, str):
        own = c.term(("rx", joined(*head, '"', wrap(body), '"', after)), "key")
    else:
        own = c.term(("expr", ("concat", *head, '"', body, '"', after)), "key")
    punct, colon = c.key_around(depth, first)
    return (*punct, own, *colon)


def object_schema_order(c: Context, slots, extras, min_p, max_p, depth, deps=None):  # type: ignore[no-untyped-def]
    """Properties in schema order: a state per slot ``i`` (the slots before it decided),
    count of properties written (up to ``cap``: what ``min``/``maxProperties`` need, else
    whether one was: the comma) and set of ``dependentRequired`` names written. The
    states are found level by level (no recursion: a level is the slot), named, then
    their rules appended last level first (rules before the rules that use them, as
    ``prune`` sweeps them), ``max_rules`` checked after each."""
    if not (min_p > 0 or max_p is not None) and not deps:
        return _schema_order_plain(c, slots, extras, depth)
    return _schema_order_general(c, slots, extras, min_p, max_p, depth, deps)


def _schema_order_general(c: Context, slots, extras, min_p, max_p, depth, deps):  # type: ignore[no-untyped-def]
    """``object_schema_order`` with counts and dependencies."""
    counting = min_p > 0 or max_p is not None
    cap = max(1, max_p if max_p is not None else min_p) if counting else 1
    c.repeat(cap, c.path[-1] if c.path else "#")
    # required properties beyond max_p make the object impossible
    if max_p is not None and sum(1 for s in slots if s[2]) > max_p:
        return None
    n = len(slots)
    # dependentRequired: the state remembers which participating names were written
    tracked = sorted({k for a, bs in (deps or {}).items() for k in (a, *bs)})
    bit = {k: 1 << i for i, k in enumerate(tracked)}
    need = [(bit[a], sum(bit[b] for b in bs)) for a, bs in (deps or {}).items()]
    # the states (count, seen) of each level, in order of first reach
    levels: list[dict[tuple[int, int], None]] = [{(0, 0): None}]
    for k, _, req in slots:
        b = bit.get(k, 0)
        nxt: dict[tuple[int, int], None] = {}
        for count, seen in levels[-1]:
            if not req:
                nxt[(count, seen)] = None
            if max_p is None or count < max_p:
                nxt[(min(count + 1, cap), seen | b)] = None
        levels.append(nxt)
    last = levels[-1]
    if extras:  # further keys after the named ones: more counts at the last level
        todo = [st for st in last if all(not st[1] & a or st[1] & bs == bs for a, bs in need)]
        while todo:
            count, seen = todo.pop()
            if max_p is None or count < max_p:
                st = (min(count + 1, cap), seen)
                if st not in last:
                    last[st] = None
                    todo.append(st)
    fresh = c.fresh
    names = [{st: NT(fresh("obj")) for st in level} for level in levels]
    rules = c.g.rules
    max_rules = c.max_rules
    close: dict[bool, T] = {}  # the closing brace after no property (True), after some
    tail = names[n]
    for (count, seen), ref in tail.items():
        if not all(not seen & a or seen & bs == bs for a, bs in need):
            continue  # a dependency is missing: no rule, so the state is pruned as unproductive
        name = ref.name
        first = count == 0
        if count >= min_p or not counting:
            t = close.get(first)
            if t is None:
                t = close[first] = c.punct_term("close_object", depth, first)
            rules.append(Rule(name, (t,)))
        if extras and (max_p is None or count < max_p):
            child = tail[(min(count + 1, cap), seen)]
            for body, nt in extras:
                rules.append(Rule(name, (*extra_key_term(c, depth, first, body), NT(nt), child)))
        if len(rules) > max_rules:
            c.too_many_rules()
    append = rules.append
    key_literal_term = c.key_literal_term
    for i in range(n - 1, -1, -1):
        k, nt, req = slots[i]
        slot = NT(nt)
        b = bit.get(k, 0)
        below = names[i + 1]
        keys: list[tuple[T, ...] | None] = [None, None]  # the key's lexemes, after no property (1) or some
        for (count, seen), ref in names[i].items():
            name = ref.name
            if not req:
                append(Rule(name, (below[(count, seen)],)))
            if max_p is None or count < max_p:
                first = count == 0
                key = keys[first]
                if key is None:
                    key = keys[first] = key_literal_term(depth, first, k)
                append(Rule(name, (*key, slot, below[(count + 1 if count < cap else cap, seen | b)])))
            if len(rules) > max_rules:
                c.too_many_rules()
    return names[0][(0, 0)].name


def _schema_order_plain(c: Context, slots: list[tuple[str, str, bool]], extras: list[tuple[Any, str]],
                        depth: int) -> str:
    """``object_schema_order`` without ``min``/``maxProperties`` and ``dependentRequired``
    (most objects): a state is a count, 0 or 1 (whether a property was written: the
    comma), so a level's states are its counts. The same states, names and rules, in the
    same order, without the general case's (count, seen) pairs."""
    c.repeat(1, c.path[-1] if c.path else "#")
    levels: list[list[int]] = [[0]]  # the counts of each level, in order of first reach
    for _, _, req in slots:
        prev = levels[-1]
        levels.append([1] if req else [*prev, 1] if 1 not in prev else list(prev))
    last = levels[-1]
    if extras and 1 not in last:  # further keys after the named ones
        last.append(1)
    fresh = c.fresh
    names = [{count: NT(fresh("obj")) for count in level} for level in levels]
    rules = c.g.rules
    append = rules.append
    max_rules = c.max_rules
    tail = names[-1]
    for count, ref in tail.items():
        name = ref.name
        first = count == 0
        append(Rule(name, (c.punct_term("close_object", depth, first),)))
        if extras:
            child = tail[1]
            for body, nt in extras:
                append(Rule(name, (*extra_key_term(c, depth, first, body), NT(nt), child)))
        if len(rules) > max_rules:
            c.too_many_rules()
    key_literal_term = c.key_literal_term
    for i in range(len(slots) - 1, -1, -1):
        k, nt, req = slots[i]
        slot = NT(nt)
        below = names[i + 1]
        after = below[1]
        keys: list[tuple[T, ...] | None] = [None, None]  # the key's lexemes, after no property (1) or some
        for count, ref in names[i].items():
            name = ref.name
            if not req:
                append(Rule(name, (below[count],)))
            first = count == 0
            key = keys[first]
            if key is None:
                key = keys[first] = key_literal_term(depth, first, k)
            append(Rule(name, (*key, slot, after)))
            if len(rules) > max_rules:
                c.too_many_rules()
    return names[0][0].name


def object_any_order(c: Context, slots, extras, min_p, max_p, depth, deps=None, tracked=None):  # type: ignore[no-untyped-def]
    """Named properties in any order, each at most once; extras anywhere.

    With ``tracked`` (slot indices), only those properties are remembered (each at most
    once); the others may repeat.
    """
    index = {k: i for i, (k, _, _) in enumerate(slots)}
    dep_masks = [(1 << index[a], sum(1 << index[b] for b in bs)) for a, bs in (deps or {}).items()]
    counting = min_p > 0 or max_p is not None
    cap = max(1, max_p if max_p is not None else min_p) if counting else 1
    req_mask = sum(1 << i for i, s in enumerate(slots) if s[2])
    names: dict[tuple[int, int], NT] = {}
    # terminals are made on first use, in the order the rules need them (their names
    # count up), and then reused: 2^n states share 2n key lexemes
    key_terms: dict[bool, list[tuple[T, ...] | None]] = {True: [None] * len(slots), False: [None] * len(slots)}
    close_terms: dict[bool, T] = {}
    extra_terms: dict[tuple[int, bool], tuple[T, ...]] = {}
    slot_nts = [NT(nt) for _, nt, _ in slots]
    extra_nts = [NT(nt) for _, nt in extras]
    rules = c.g.rules
    order = [(i, k, used_bit) for i, (k, _, _) in enumerate(slots)
             for used_bit in [0 if tracked is not None and i not in tracked else 1 << i]]

    def S(used: int, count: int) -> Generator[Any, NT, NT]:  # noqa: N802
        """The state with the slots ``used`` written, ``count`` properties in all; a
        generator run by ``bounds.run`` (it yields the generator of the state it needs)."""
        key = (used, count)
        found = names.get(key)
        if found is not None:
            return found
        name = c.fresh("obj")
        ref = names[key] = NT(name)
        inc = min(count + 1, cap)
        first = count == 0
        can_add = max_p is None or count < max_p
        if (used & req_mask == req_mask and (count >= min_p or not counting)
                and all(not used & a or used & bs == bs for a, bs in dep_masks)):
            t = close_terms.get(first)
            if t is None:
                t = close_terms[first] = c.term(c.layout.close_object(depth, first))
            rules.append(Rule(name, (t,)))
        if can_add:
            kts = key_terms[first]
            for i, k, bit in order:
                if used & bit:
                    continue
                ks = kts[i]
                if ks is None:
                    ks = kts[i] = c.key_literal_term(depth, first, k)
                child = names.get((used | bit, inc))
                if child is None:  # a state met before is read from the memo
                    child = yield S(used | bit, inc)
                rules.append(Rule(name, (*ks, slot_nts[i], child)))
            for j, (body, _) in enumerate(extras):
                ks = extra_terms.get((j, first))
                if ks is None:
                    ks = extra_terms[(j, first)] = key_term(c, depth, first, body)
                child = names.get((used, inc))
                if child is None:
                    child = yield S(used, inc)
                rules.append(Rule(name, (*ks, extra_nts[j], child)))
        if len(rules) > c.max_rules:
            c.too_many_rules()
        return ref

    return bounds.run(S(0, 0)).name


def dependencies(flat: list[Member]) -> dict[str, list[str]]:
    """``dependentRequired`` and draft-07 array ``dependencies``: name → names it needs."""
    out: dict[str, dict[str, None]] = {}
    for s, p in flat:
        for kw in ("dependentRequired", "dependencies"):
            v = s.get(kw)
            if not isinstance(v, dict):
                continue
            for a, bs in v.items():
                if isinstance(bs, list):
                    if not all(isinstance(b, str) for b in bs):
                        raise SchemaError(f"'{kw}' must list property names", ptr(p, kw, a))
                    names = out.setdefault(a, {})
                    names.update((b, None) for b in bs if b != a)
    return {a: list(names) for a, names in out.items()}
