"""JSON Schema (draft 2020-12, 2019-09, draft-07/06/04) → Grammar IR.

1. **Resolve.** The document is indexed once (``$id``/``id``, ``$anchor``, JSON pointers);
   a subschema is compiled as a *conjunction* of schema objects: ``$ref`` targets and
   ``allOf`` branches are added to the conjunction (a repeated member is skipped, so
   recursive references cannot loop), ``anyOf``/``oneOf`` are distributed over it
   (each branch joins the conjunction; the union of the branches is the result).
2. **Merge per type.** For each JSON type the conjunction allows, its keywords are merged
   exactly (bounds intersected, properties merged with each member's own
   ``additionalProperties``/``patternProperties`` reading, string constraints
   intersected as regex ``and`` terminals).
3. **Emit.** Each conjunction becomes a nonterminal (memoized); lexemes are large
   (``{"name":``, a whole string or number) so the engine sees few, regular lexemes.

What cannot be enforced raises ``UnsupportedSchemaError`` naming the keyword and pointer,
or, with ``lenient=True``, is ignored and recorded in ``Grammar.warnings``.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import re
from collections.abc import Callable, Generator
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal
from urllib.parse import unquote, urldefrag, urljoin

from tether.errors import LimitError, SchemaError, UnsupportedSchemaError, limited
from tether.grammar import formats as fmt
from tether.grammar.ir import NT, Grammar, Rule, T, Terminal
from tether.grammar.json_schema import numbers as num
from tether.grammar.json_schema import strings as st
from tether.grammar.json_schema.check import check_document
from tether.grammar.json_schema.layout import Layout, Spec, Whitespace, dumps_str
from tether.limits import Limits, check_deadline, current, deadline

PropertyOrder = Literal["schema", "any"]
Draft = Literal["draft4", "draft6", "draft7", "2019-09", "2020-12"]

TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")

# keywords that only annotate; ignored safely
ANNOTATIONS = frozenset(
    "$schema $id id $anchor $dynamicAnchor $recursiveAnchor $vocabulary $comment $defs "
    "definitions title description default examples example deprecated readOnly writeOnly "
    "contentEncoding contentMediaType contentSchema discriminator nullable".split()
)
# handled keywords
HANDLED = frozenset(
    "type enum const allOf anyOf oneOf $ref not properties required additionalProperties "
    "patternProperties propertyNames minProperties maxProperties items prefixItems "
    "additionalItems minItems maxItems uniqueItems contains minContains maxContains "
    "minLength maxLength pattern format minimum maximum exclusiveMinimum exclusiveMaximum "
    "multipleOf if then else dependentRequired dependentSchemas dependencies "
    "unevaluatedProperties unevaluatedItems $dynamicRef $recursiveRef".split()
)
_OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties",
              "propertyNames", "minProperties", "maxProperties", "dependentRequired",
              "dependentSchemas", "dependencies", "unevaluatedProperties")
_ARRAY_KW = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
             "contains", "unevaluatedItems")
# keywords that say which keys besides the named ones an object may have
_OPEN_KW = ("additionalProperties", "unevaluatedProperties")
_STRING_KW = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")

DEFAULT_BASE = "https://tether.invalid/schema.json"
# most rules one object may spend on ``property_order="any"`` states (2^n · (n + extras + 1))
ANY_ORDER_BUDGET = 8_192

Member = tuple[Any, str]  # (schema object, JSON pointer)


def _join(base: str, ref: str) -> str:
    """Resolve ``ref`` against ``base`` (RFC 3986; also for non-hierarchical URNs)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", ref):
        return ref
    return urljoin(base, ref)


def _ptr(base: str, *parts: object) -> str:
    out = base
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def _json_key(v: Any) -> str:
    """Equality of JSON values as JSON Schema defines it (1 == 1.0, true != 1)."""

    def norm(x: Any) -> Any:
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return x
        if isinstance(x, (int, float)):
            return ["#num", str(Fraction(x))] if not (isinstance(x, float) and not math.isfinite(x)) else ["#num", repr(x)]
        if isinstance(x, list):
            return [norm(i) for i in x]
        if isinstance(x, dict):
            return {k: norm(i) for k, i in x.items()}
        return repr(x)

    return json.dumps(norm(v), sort_keys=True)


def _type_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise SchemaError(f"{limited(v)} is not a JSON value")


class _Compiler:
    def __init__(
        self,
        schema: Any,
        *,
        layout: Layout,
        property_order: PropertyOrder,
        lenient: bool,
        draft: Draft | None,
        max_repeat: int,
        max_rules: int,
        max_depth: int,
        max_expansion: int,
        resolve_remote: Callable[[str], Any] | None,
        limits: Limits | None = None,
        closed: bool = False,
        number_bounds: num.NumberBounds | None = None,
    ) -> None:
        self.limits = limits or current()
        self.root = schema
        self.layout = layout
        self.order = property_order
        self.lenient = lenient
        self.max_repeat = max_repeat
        self.max_rules = max_rules
        self.max_depth = max_depth
        self.max_expansion = max_expansion
        self.resolve_remote = resolve_remote
        self.closed = closed
        self.number_bounds = number_bounds
        self._number_shape: tuple[bool, Any, Any, int] | None = None
        self.draft: Draft = draft or self._detect_draft(schema)
        self.g = Grammar(start="root")
        self.terms: dict[Any, str] = {}
        self.memo: dict[Any, str | None] = {}
        self.warned: set[str] = set()
        self.index: dict[str, Any] = {}
        self.base_of: dict[int, str] = {}
        self.ptr_of: dict[int, str] = {}
        self.docs: dict[str, Any] = {}
        self._keep: list[Any] = []
        self._root_validator: Any = None
        self._synth: dict[Any, dict] = {}
        self._one_of_warned: set[str] = set()
        self._member_validators: dict[tuple[int, frozenset[str]], Any] = {}
        self._n = 0
        self._shapes: dict[tuple[str | None, str], int] = {}
        self._shape_of_id: dict[int, int] = {}
        self.checked: set[int] = set()  # ids of schema objects whose shape was checked
        self.path: list[str] = []  # pointers of the nodes being compiled, outermost first
        check_document(schema, self.limits, "#", self.checked)
        self._index_document(schema, DEFAULT_BASE, "#")

    # ------------------------------------------------------------------ bookkeeping

    @staticmethod
    def _detect_draft(schema: Any) -> Draft:
        uri = schema.get("$schema", "") if isinstance(schema, dict) else ""
        if not isinstance(uri, str):
            return "2020-12"
        if "draft-04" in uri:
            return "draft4"
        if "draft-06" in uri:
            return "draft6"
        if "draft-07" in uri or "draft-03" in uri:
            return "draft7"
        if "2019-09" in uri:
            return "2019-09"
        return "2020-12"

    def warn(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            self.g.warnings.append(message)

    def unsupported(self, keyword: str, pointer: str, detail: str = "") -> None:
        if not self.lenient:
            raise UnsupportedSchemaError(keyword, pointer, detail)
        err = UnsupportedSchemaError(keyword, pointer, detail)
        self.warn(f"{err} (ignored: lenient=True; the grammar may allow invalid values)")

    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def rule(self, lhs: str, *rhs: NT | T) -> None:
        self.g.add_rule(lhs, *rhs)
        if len(self.g.rules) > self.max_rules:
            self._too_many_rules()

    def _too_many_rules(self) -> None:
        raise LimitError("max_rules", len(self.g.rules), self.max_rules, self.path[-1] if self.path else "#",
                         detail="the schema expands to more grammar rules; raise max_rules, or simplify it")

    def _repeat(self, value: int, pointer: str) -> None:
        """LimitError unless a bound the grammar expands (``maxLength`` ...) fits ``max_repeat``."""
        if value > self.max_repeat:
            raise LimitError("max_repeat", value, self.max_repeat, pointer)

    def term(self, spec: Spec, hint: str = "t") -> T:
        kind, value = spec[0], spec[1]
        key = (kind, value)
        name = self.terms.get(key)
        if name is None:
            name = f"{hint}{len(self.terms)}"
            self.terms[key] = name
            if kind == "lit":
                self.g.add_terminal(Terminal(name, literal=value))
            elif kind == "rx":
                self.g.add_terminal(Terminal(name, regex=value, node=spec[2] if len(spec) > 2 else None))
            else:
                self.g.add_terminal(Terminal(name, expr=value))
        return T(name)

    # ------------------------------------------------------------------ references

    def _index_document(self, doc: Any, base: str, pointer: str) -> None:
        self.docs[urldefrag(base)[0]] = doc
        self._index(doc, base, pointer)

    def _index(self, s: Any, base: str, pointer: str) -> None:
        """Record ``$id``/``$anchor`` targets, base URIs and pointers below ``s``
        (pre-order, iterative: any depth; a Python object met twice is indexed once)."""
        stack: list[tuple[Any, str, str]] = [(s, base, pointer)]
        visited: set[int] = set()
        while stack:
            s, base, pointer = stack.pop()
            if isinstance(s, list):
                stack.extend((s[i], base, _ptr(pointer, i)) for i in range(len(s) - 1, -1, -1))
                continue
            if not isinstance(s, dict) or id(s) in visited:
                continue
            visited.add(id(s))
            ident = s.get("$id") if "$id" in s else (s.get("id") if self.draft == "draft4" else None)
            if isinstance(ident, str) and not (self.draft in ("draft4", "draft6", "draft7") and "$ref" in s):
                if ident.startswith("#") and self.draft in ("draft4", "draft6", "draft7"):
                    self.index[_join(base, ident)] = s  # plain-name fragment (old drafts)
                else:
                    base = _join(base, ident)
                    self.index[urldefrag(base)[0]] = s
                    self.docs.setdefault(urldefrag(base)[0], s)
            for kw in ("$anchor", "$dynamicAnchor"):
                anchor = s.get(kw)
                if isinstance(anchor, str):
                    key = urldefrag(base)[0] + "#" + anchor
                    if self.index.setdefault(key, s) is not s:  # two targets: no honest choice
                        raise SchemaError(f"{kw} {limited(anchor)} is defined twice in one "
                                          "schema resource", pointer)
            self.base_of[id(s)] = base
            self.ptr_of[id(s)] = pointer
            children: list[tuple[Any, str, str]] = []
            for k, v in s.items():
                if k in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
                    if isinstance(v, dict):
                        for name, sub in v.items():
                            children.append((sub, base, _ptr(pointer, k, name)))
                elif k in ("items", "prefixItems", "allOf", "anyOf", "oneOf", "additionalProperties",
                           "additionalItems", "propertyNames", "contains", "not", "if", "then", "else",
                           "unevaluatedProperties", "unevaluatedItems"):
                    children.append((v, base, _ptr(pointer, k)))
                elif k == "dependencies" and isinstance(v, dict):
                    for name, sub in v.items():
                        if isinstance(sub, dict):
                            children.append((sub, base, _ptr(pointer, k, name)))
            stack.extend(reversed(children))

    def resolve(self, ref: Any, holder: dict, pointer: str) -> Member:
        if not isinstance(ref, str):
            raise SchemaError("'$ref' must be a string", pointer)
        base = self.base_of.get(id(holder), DEFAULT_BASE)
        target = _join(base, ref)
        if target in self.index:
            s = self.index[target]
            return s, self.ptr_of.get(id(s), target)
        uri, frag = urldefrag(target)
        doc = self.docs.get(uri)
        if doc is None and uri in self.index:
            doc = self.index[uri]
        if doc is None:
            if self.resolve_remote is not None:
                try:
                    doc = self.resolve_remote(uri)
                except Exception as exc:  # noqa: BLE001 - any loader failure is reported alike
                    raise SchemaError(f"cannot load $ref {limited(ref)}: {exc}", pointer) from None
            if doc is None:
                raise UnsupportedSchemaError(
                    "$ref", pointer, f"reference {limited(ref)} is not inside this document"
                )
            self._keep.append(doc)
            check_document(doc, self.limits, uri + "#", self.checked)
            self._index_document(doc, uri, uri + "#")
            if target in self.index:
                s = self.index[target]
                return s, self.ptr_of.get(id(s), target)
        node = doc
        if frag:
            if not frag.startswith("/"):
                raise SchemaError(f"$ref {limited(ref)}: unknown anchor", pointer)
            for part in frag[1:].split("/"):
                part = unquote(part).replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                    node = node[int(part)]
                else:
                    raise SchemaError(f"$ref {limited(ref)} points to nothing", pointer)
        if isinstance(node, dict) and id(node) not in self.checked:
            # a target outside the schema positions walked so far (an unknown keyword)
            check_document(node, self.limits, self.ptr_of.get(id(node), target), self.checked)
        if isinstance(node, dict) and id(node) not in self.base_of:
            self._index(node, uri, uri + "#" + frag)
        return node, self.ptr_of.get(id(node), target)

    # ------------------------------------------------------------------ conjunctions

    def flatten(self, members: list[Member]) -> list[Member] | None:
        """Add ``$ref`` targets and ``allOf`` branches; None if some member is ``false``.

        A member met again is skipped; met again *inside its own expansion* (a ``$ref``/
        ``allOf`` cycle that never reaches a property or an item) it is an error: such a
        schema asks a validator to loop forever.
        """
        out: list[Member] = []
        seen: set[int] = set()
        on_path: set[int] = set()  # members whose $ref/allOf expansion is under way
        stack: list[Member | int] = list(reversed(members))  # an int: leave that member
        steps = 0
        while stack:
            top = stack.pop()
            if isinstance(top, int):
                on_path.discard(top)
                continue
            s, p = top
            steps += 1
            if steps > self.max_expansion:
                raise SchemaError(
                    f"$ref/allOf expansion exceeds {self.max_expansion} schemas", p
                )
            if not steps & 255:
                check_deadline(p)
            if s is True:
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                raise SchemaError(f"a schema must be an object or a boolean, got {limited(s)}", p)
            if id(s) in seen:
                if id(s) in on_path:
                    raise SchemaError(
                        "a $ref/allOf cycle: the schema refers to itself without a property "
                        "or an item in between (a validator would loop forever)", p)
                continue
            seen.add(id(s))
            if "$dynamicRef" in s or "$recursiveRef" in s:
                kw = "$dynamicRef" if "$dynamicRef" in s else "$recursiveRef"
                self.unsupported(kw, p)
            nxt: list[Member] = []
            if "$ref" in s:
                nxt.append(self.resolve(s["$ref"], s, _ptr(p, "$ref")))
                if self.draft in ("draft4", "draft6", "draft7"):
                    on_path.add(id(s))
                    stack.append(id(s))
                    stack.extend(reversed(nxt))
                    continue  # siblings of $ref are ignored in these drafts
            out.append((s, p))
            all_of = s.get("allOf")
            if all_of is not None:
                if not isinstance(all_of, list):
                    raise SchemaError("'allOf' must be an array", _ptr(p, "allOf"))
                nxt += [(b, _ptr(p, "allOf", i)) for i, b in enumerate(all_of)]
            on_path.add(id(s))
            stack.append(id(s))
            stack.extend(reversed(nxt))
        return out

    def node(self, members: list[Member], depth: int, consumed: frozenset = frozenset()) -> str | None:
        """The nonterminal for the conjunction ``members`` at ``depth``; None if empty.

        Nodes nest (a property's value inside its object, a branch inside its ``anyOf``)
        at most ``Limits.max_nesting`` deep, else LimitError at the innermost pointer.
        """
        if not self.layout.depth_matters:
            depth = 0
        elif depth > self.max_depth:
            self.warn(
                f"pretty layout: values nested deeper than {self.max_depth} levels are not "
                "generated (raise max_depth)"
            )
            return None
        flat = self.flatten(members)
        if flat is None:
            return None
        key = (tuple(sorted({self._shape(s) for s, _ in flat})), consumed, depth)
        if key in self.memo:
            return self.memo[key]
        where = members[-1][1] if members else "#"
        check_deadline(where)
        if len(self.path) >= self.limits.max_nesting:
            raise LimitError("max_nesting", len(self.path) + 1, self.limits.max_nesting, where)
        name = self.fresh("v")
        self.memo[key] = name  # recursion sees the name (assumed non-empty)
        self.path.append(where)
        alts = self._alternatives(flat, depth, consumed)
        self.path.pop()  # (left in place by an error: the innermost place is reported)
        if not alts:
            self.memo[key] = None
            return None
        for rhs in alts:
            self.rule(name, *rhs)
        return name

    def _shape(self, s: dict) -> int:
        """The id of the first schema object equal to ``s`` (same JSON text, key order
        included, and same base URI).

        Equal subschemas compile to the same language, so the memo shares one nonterminal
        among copies: documents with inlined definitions (no ``$ref``) repeat the same
        subschema many times.
        """
        i = id(s)
        shape = self._shape_of_id.get(i)
        if shape is None:
            try:
                # key order kept: it is the schema property order; a schema the compiler
                # made (not indexed: no base URI of its own) is known by identity only
                text = json.dumps(s) if i in self.base_of else f"#id:{i}"
            except (TypeError, ValueError):  # not plain JSON: identity only
                text = f"#id:{i}"
            shape = self._shape_of_id[i] = self._shapes.setdefault((self.base_of.get(i), text), i)
        return shape

    def _alternatives(self, flat: list[Member], depth: int, consumed: frozenset) -> list[tuple]:
        for s, p in flat:
            for kw in ("anyOf", "oneOf"):
                if kw in s and (self._shape(s), kw) not in consumed:
                    branches = s[kw]
                    if not isinstance(branches, list) or not branches:
                        raise SchemaError(f"'{kw}' must be a non-empty array", _ptr(p, kw))
                    done = consumed | {(self._shape(s), kw)}
                    if kw == "oneOf" and len(branches) > 1:
                        self._check_one_of(branches, _ptr(p, kw), flat)
                    alts = []
                    for i, b in enumerate(branches):
                        nt = self.node([*flat, (b, _ptr(p, kw, i))], depth, done)
                        if nt is not None:
                            alts.append((NT(nt),))
                    return alts
        for s, p in flat:
            split = self._split(s, p, consumed)
            if split is not None:
                tag, branches = split
                alts = []
                for extra in branches:
                    nt = self.node([*flat, *extra], depth, consumed | {(self._shape(s), tag)})
                    if nt is not None:
                        alts.append((NT(nt),))
                return alts
        return self._typed(flat, depth)

    def _split(self, s: dict, p: str, consumed: frozenset) -> tuple[str, list[list[Member]]] | None:
        """Keywords read as a union of two exact cases, each a list of extra members:
        ``if``/``then``/``else`` → (if ∧ then) ∪ (not if ∧ else); a schema dependency
        ``A: S`` → (A absent) ∪ (A present ∧ S)."""
        if "if" in s and ("then" in s or "else" in s) and (self._shape(s), "if") not in consumed:
            q = _ptr(p, "if")
            then = (s.get("then", True), _ptr(p, "then"))
            other = (s.get("else", True), _ptr(p, "else"))
            return "if", [[(s["if"], q), then], [(self._synthetic({"not": s["if"]}, q), q), other]]
        for kw in ("dependentSchemas", "dependencies"):
            deps = s.get(kw)
            if not isinstance(deps, dict):
                continue
            for a, sub in deps.items():
                if isinstance(sub, list) or (self._shape(s), f"{kw}:{a}") in consumed:
                    continue
                q = _ptr(p, kw, a)
                absent = self._synthetic({"not": {"required": [a]}}, q)
                present = self._synthetic({"required": [a]}, q)
                return f"{kw}:{a}", [[(absent, q)], [(present, q), (sub, q)]]
        return None

    def _synthetic(self, schema: dict, pointer: str) -> dict:
        """A schema object made by the compiler (kept alive: members are keyed by id)."""
        key = (pointer, json.dumps(schema, sort_keys=True, default=id))
        found = self._synth.get(key)
        if found is None:
            found = self._synth[key] = schema
            self.ptr_of[id(schema)] = pointer
        return found

    def _check_one_of(self, branches: list, pointer: str, context: list[Member]) -> None:
        infos = []
        for i, b in enumerate(branches):
            flat = self.flatten([*context, (b, _ptr(pointer, i))])
            infos.append(None if flat is None else self._summary(flat))
        pair = _first_overlap(infos, pointer)
        if pair is None or pointer in self._one_of_warned:
            return
        self._one_of_warned.add(pointer)
        self.warn(
            f"oneOf at {pointer}: branches {pair[0]} and {pair[1]} are not provably disjoint; "
            "compiled as anyOf (a value matching both is allowed)"
        )

    def _summary(self, flat: list[Member]) -> dict:
        """What disjointness checks need: allowed types, enum values, required consts."""
        types = set(TYPES)
        values: list | None = None
        consts: dict[str, set[str]] = {}
        for s, p in flat:
            if "type" in s:
                types &= _type_set(s["type"], p)
            for kw in ("enum", "const"):
                if kw in s:
                    vals = [s[kw]] if kw == "const" else list(s[kw])
                    keys = {_json_key(v) for v in vals}
                    values = [v for v in (values if values is not None else vals) if _json_key(v) in keys]
            props = s.get("properties")
            req = set(s.get("required") or [])
            if isinstance(props, dict):
                for k, sub in props.items():
                    if k not in req:
                        continue
                    sub_flat = self.flatten([(sub, p)]) or []
                    for ss, _ in sub_flat:
                        for kw in ("enum", "const"):
                            if kw in ss:
                                vals = [ss[kw]] if kw == "const" else list(ss[kw])
                                ks = {_json_key(v) for v in vals}
                                consts[k] = consts[k] & ks if k in consts else ks
        if "number" in types:
            types.add("integer")
        value_keys = None if values is None else frozenset(_json_key(v) for v in values)
        vtypes = None if values is None else {_type_of(v) for v in values}
        return {"types": types, "values": values, "consts": consts, "keys": value_keys, "vtypes": vtypes}

    # ------------------------------------------------------------------ typed compile

    def _typed(self, flat: list[Member], depth: int) -> list[tuple]:
        types = set(TYPES)
        for s, p in flat:
            if "type" in s:
                types &= _type_set(s["type"], _ptr(p, "type"))
        if "number" in types:
            types.add("integer")
        nots: dict = {}
        for s, p in flat:
            types = self._apply_not(s, p, types, nots)
            self._check_keywords(s, p, types)
        values: list | None = None
        for s, p in flat:
            for kw in ("enum", "const"):
                if kw in s:
                    if kw == "enum" and not isinstance(s[kw], list):
                        raise SchemaError("'enum' must be an array", _ptr(p, kw))
                    vals = [s[kw]] if kw == "const" else list(s[kw])
                    if values is None:
                        values = vals
                    else:
                        keys = {_json_key(v) for v in vals}
                        values = [v for v in values if _json_key(v) in keys]
        if values is not None:
            return self._values(values, flat, types, depth)
        alts: list[tuple] = []
        if "null" in types:
            alts.append((self.term(("lit", "null")),))
        if "boolean" in types:
            alts.append((self.term(("lit", "true")),))
            alts.append((self.term(("lit", "false")),))
        if "number" in types or "integer" in types:
            rx = self._number(flat, integer="number" not in types)
            if isinstance(rx, tuple) and rx[0] == "mod":
                alts.append((NT(self._multiples_rules(rx[1])),))
            elif rx is not None:
                alts.append((self.term(("rx", rx) if isinstance(rx, str) else ("expr", rx), "num"),))
        if "string" in types:
            spec = self._string(flat, nots.get("strings", []))
            if spec is not None:
                alts.append((self.term(spec, "str"),))
        if "array" in types:
            a = self._array(flat, depth)
            if a is not None:
                alts.append((NT(a),))
        if "object" in types:
            o = self._object(flat, depth, nots.get("keys", set()))
            if o is not None:
                alts.append((NT(o),))
        return alts

    def _apply_not(self, s: dict, p: str, types: set[str], nots: dict) -> set[str]:
        """Apply ``not`` where it can be enforced exactly; record string/key exclusions in
        ``nots`` (``"strings"``: string-body languages to exclude, ``"keys"``: property
        names that must be absent)."""
        if "not" not in s:
            return types
        sub = s["not"]
        q = _ptr(p, "not")
        flat = self.flatten([(sub, q)])
        if flat is None:  # not false: no constraint
            return types
        if not flat:  # not true / not {}: nothing is valid
            return set()
        keys = [set(k for k in ss if k not in ANNOTATIONS) for ss, _ in flat]
        if all(k <= {"type"} for k in keys):
            excluded = set(TYPES)
            for ss, pp in flat:
                if "type" in ss:
                    excluded &= _type_set(ss["type"], _ptr(pp, "type"))
            if "number" in excluded:
                excluded.add("integer")
            out = types - excluded
            if "integer" in excluded and "number" in out:
                self.unsupported("not", q, "excluding integers from numbers")
            return out
        string_kw = {"type", "pattern", "format", "minLength", "maxLength", "enum", "const"}
        if all(k <= string_kw for k in keys) and all(
            ss.get("type", "string") == "string" and all(isinstance(v, str) for v in _values_of(ss))
            for ss, _ in flat
        ):
            # strings matching all of these are excluded; other types are not touched
            if any("format" in ss and ss["format"] not in fmt.FORMATS for ss, _ in flat):
                self.unsupported("not", q, "of an unknown format")
                return types
            body = self._name_body(flat)
            if body is None:  # not {type: string}
                return types - {"string"}
            if body is not False:
                nots.setdefault("strings", []).append(body)
            return types
        required_only = self._required_names(flat)
        if required_only is not None:
            nots.setdefault("keys", set()).update(required_only)
            return types
        self.unsupported("not", q, "only 'not' of types, of string constraints or of 'required'")
        return types

    def _required_names(self, flat: list[Member]) -> set[str] | None:
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
                    bf = self.flatten([(b, "#")])
                    inner = self._required_names(bf) if bf else None
                    if inner is None:
                        return None
                    names |= inner
                continue
            return None
        return names if len(flat) == 1 or len(names) <= 1 else None

    def _check_keywords(self, s: dict, p: str, types: set[str]) -> None:
        if self.draft in ("draft6", "draft7") and "string" in types:
            for kw in ("contentMediaType", "contentEncoding"):
                if kw in s:
                    self.warn(f"{kw} is not enforced (at {_ptr(p, kw)})")
        for kw, v in s.items():
            if kw in ANNOTATIONS or kw not in HANDLED:
                continue
            q = _ptr(p, kw)
            if kw in ("if", "then", "else"):
                continue  # read as a union in _split
            if kw == "uniqueItems":
                if v is True and "array" in types:
                    self.unsupported(kw, q, "array items cannot be required to differ")
                continue
            if kw == "unevaluatedItems" and "array" in types and v is not True:
                self.unsupported(kw, q)
            if kw == "unevaluatedProperties":
                if "object" in types and v not in ({}, True):
                    self.unsupported(kw, q)

    def _values(self, values: list, flat: list[Member], types: set[str], depth: int) -> list[tuple]:
        """Alternatives for enum/const values that satisfy every member."""
        keep = []
        # the values already satisfy every member's enum/const (intersected in _typed):
        # the check reads the other keywords only, so a long enum costs linear time
        check = self._validator(flat, {_type_of(v) for v in values}, without_values=True)
        for i, v in enumerate(values):
            if not i & 1023:
                check_deadline(flat[0][1] if flat else "#")
            t = _type_of(v)
            if t not in types and not (t == "integer" and "number" in types):
                continue
            if check is not None and not check(v):
                continue
            keep.append(v)
        alts = []
        seen = set()
        for v in keep:
            spec = self.layout.value_spec(v, depth)
            if spec in seen:
                continue
            seen.add(spec)
            alts.append((self.term(spec, "lit"),))
        return alts

    def _validator(self, flat: list[Member], types: set[str] | None = None, *,
                   without_values: bool = False) -> Callable[[Any], bool] | None:
        """A check of values against every member (jsonschema), or None if nothing to check.

        With ``types``, members whose keywords cannot affect values of those types are
        skipped; with ``without_values``, their ``enum``/``const`` are not checked (the
        caller has intersected them already).
        """
        relevant = set(HANDLED) - {"enum", "const", "type"}
        if types is not None:
            for t, kws in (("object", _OBJECT_KW), ("array", _ARRAY_KW), ("string", _STRING_KW)):
                if t not in types:
                    relevant -= set(kws)
            if not types & {"integer", "number"}:
                relevant -= set(_NUMBER_KW)
        # with ``without_values`` (values for one branch of every anyOf/oneOf in ``flat``,
        # which is in ``flat`` too): a value of the branch satisfies its anyOf, and its
        # oneOf when the branches are provably disjoint (no warning), so neither is
        # checked again: a oneOf of n consts costs n checks, not n²
        members: list[tuple[dict, frozenset[str]]] = []
        for s, p in flat:
            drop: frozenset[str] = frozenset()
            if without_values:
                drop = frozenset(k for k in ("enum", "const", "anyOf", "oneOf") if k in s and not (
                    k == "oneOf" and _ptr(p, "oneOf") in self._one_of_warned))
            if any(k in relevant and k not in drop for k in s):
                members.append((s, drop))
        if not members:
            return None
        try:
            import jsonschema
        except ImportError:
            self.warn("enum/const values are not checked against sibling keywords "
                      "(install jsonschema)")
            return None
        if self._root_validator is None:
            cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
            self._root_validator = cls(self.root if isinstance(self.root, (dict, bool)) else {})
        try:
            vals = []
            for s, drop in members:
                v = self._member_validators.get((id(s), drop))
                if v is None:
                    part = s
                    if drop:
                        part = {k: x for k, x in s.items() if k not in drop}
                        self._keep.append(part)
                    v = self._root_validator.evolve(schema=part)
                    self._member_validators[(id(s), drop)] = v
                vals.append(v)
        except Exception:  # noqa: BLE001
            return None

        def check(v: Any) -> bool:
            try:
                return all(val.is_valid(v) for val in vals)
            except Exception:  # noqa: BLE001 - unresolvable refs: keep the value
                return True

        return check

    # ------------------------------------------------------------------ numbers

    def _number(self, flat: list[Member], *, integer: bool) -> str | tuple | None:
        """The number lexeme (a regex, an expr, ``("mod", m)``, or None if empty); with
        ``bounded_numbers``, digits the schema leaves unbounded are bounded."""
        self._number_shape = None
        rx = self._number_exact(flat, integer=integer)
        if self.number_bounds is None or self._number_shape is None or rx is None:
            return rx
        if isinstance(rx, tuple) and rx[0] == "mod":
            return rx  # multiples read digit by digit: unbounded (see docs/json_schema.md)
        is_int, lo, hi, frac = self._number_shape
        if is_int and lo is not None and hi is not None:
            return rx  # finitely many integers already
        idig = fdig = 0
        for b in (lo, hi):
            if b is not None:
                i, f = num.digits_of(b[0])
                idig, fdig = max(idig, i), max(fdig, f + 1)  # one more: a value between
        cap = self.number_bounds.regex(integer=is_int, integer_digits=idig, fraction_digits=max(fdig, frac))
        if isinstance(rx, tuple) and rx[0] == "and":
            return (*rx, cap)
        return ("and", rx, cap)

    def _number_exact(self, flat: list[Member], *, integer: bool) -> str | tuple | None:
        lo: tuple[Decimal, bool] | None = None  # (bound, strict)
        hi: tuple[Decimal, bool] | None = None
        mults: list[tuple[Fraction, str]] = []

        def tighten_lo(b: Decimal, strict: bool) -> None:
            nonlocal lo
            if lo is None or b > lo[0] or (b == lo[0] and strict):
                lo = (b, strict)

        def tighten_hi(b: Decimal, strict: bool) -> None:
            nonlocal hi
            if hi is None or b < hi[0] or (b == hi[0] and strict):
                hi = (b, strict)

        for s, p in flat:
            for kw in _NUMBER_KW:
                if kw not in s:
                    continue
                v = s[kw]
                q = _ptr(p, kw)
                if isinstance(v, bool) and kw.startswith("exclusive"):
                    continue  # draft-04 flag, read with minimum/maximum
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise SchemaError(f"'{kw}' must be a number, got {limited(v)}", q)
                if isinstance(v, float) and not math.isfinite(v):
                    if v != v or (kw in ("minimum", "exclusiveMinimum") and v > 0) or (
                        kw in ("maximum", "exclusiveMaximum") and v < 0
                    ):
                        raise SchemaError(f"'{kw}' is {v!r}: no JSON number is in range", q)
                    continue  # an infinite bound on the open side bounds nothing
                if isinstance(v, int) and abs(v) >= 10**400 or isinstance(v, float) and abs(v) >= 1e300 and kw == "multipleOf":
                    raise SchemaError(f"'{kw}' with {len(str(abs(int(v))))} digits is too large", q)
                d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
                if kw == "minimum":
                    tighten_lo(d, s.get("exclusiveMinimum") is True)
                elif kw == "maximum":
                    tighten_hi(d, s.get("exclusiveMaximum") is True)
                elif kw == "exclusiveMinimum":
                    tighten_lo(d, True)
                elif kw == "exclusiveMaximum":
                    tighten_hi(d, True)
                else:
                    if v <= 0:
                        raise SchemaError(f"'multipleOf' must be > 0, got {v}", q)
                    mults.append((Fraction(str(d)), q))
        if lo is not None and hi is not None and (lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1]))):
            return None
        step: int | None = None
        if mults:
            frac_mults = [m for m, _ in mults if m.denominator != 1]
            int_mults = [int(m) for m, _ in mults if m.denominator == 1]
            if frac_mults:
                if integer or int_mults:
                    # an integer n is a multiple of p/q iff p divides n
                    step = math.lcm(*(int_mults + [m.numerator for m in frac_mults]))
                    integer = True
                else:
                    k = max(num.digits_of(Decimal(m.numerator) / Decimal(m.denominator))[1] for m in frac_mults)
                    self._number_shape = (False, lo, hi, k)
                    return self._fractional_multiple(frac_mults, mults[0][1], lo, hi)
            else:
                step = math.lcm(*int_mults)
                integer = True  # multiples of an integer are integers
        self._number_shape = (integer, lo, hi, 0)
        if integer:
            ilo = None if lo is None else (math.floor(lo[0]) + 1 if lo[1] else math.ceil(lo[0]))
            ihi = None if hi is None else (math.ceil(hi[0]) - 1 if hi[1] else math.floor(hi[0]))
            if ilo is not None and ihi is not None and ilo > ihi:
                return None
            if step is not None and step > 1:
                rx = num.multiples_regex(step, ilo, ihi)
                if rx is None and ilo is None and ihi is None and step <= MAX_MODULUS:
                    return ("mod", step)  # digit-by-digit rules (see _multiples_rules)
                if rx is None:
                    self.unsupported("multipleOf", mults[0][1],
                                     f"multiples of {step} over this range cannot be enumerated")
                    rx = num.integer_range(ilo, ihi)
                return None if rx == num.NEVER else rx
            return num.integer_range(ilo, ihi)
        if lo is None and hi is None:
            return num.NUMBER
        rx = num.decimal_range(
            lo[0] if lo else None, lo[1] if lo else False, hi[0] if hi else None, hi[1] if hi else False
        )
        return None if rx == num.NEVER else rx

    def _multiples_rules(self, m: int) -> str:
        """Rules for canonical integers divisible by ``m``: the remainder automaton read
        digit by digit (one-digit lexemes; used only where no regex is small enough)."""
        key = ("mod", m)
        if key in self.memo:
            return self.memo[key]  # type: ignore[return-value]
        name = self.memo[key] = self.fresh(f"mult{m}")
        state = [self.fresh(f"mod{m}_r{r}") for r in range(m)]

        def digits_to(r: int, first: bool) -> dict[int, list[int]]:
            out: dict[int, list[int]] = {}
            for d in range(1 if first else 0, 10):
                out.setdefault((r * 10 + d) % m, []).append(d)
            return out

        def cls(ds: list[int]) -> T:
            text = "".join(str(d) for d in ds)
            return self.term(("rx", f"[{text}]" if len(ds) > 1 else text), "digit")

        for r in range(m):
            if r == 0:
                self.rule(state[r])
            for target, ds in sorted(digits_to(r, False).items()):
                self.rule(state[r], cls(ds), NT(state[target]))
        nonzero = self.fresh(f"mult{m}_nz")
        for target, ds in sorted(digits_to(0, True).items()):
            self.rule(nonzero, cls(ds), NT(state[target]))
        self.rule(name, self.term(("lit", "0")))
        self.rule(name, NT(nonzero))
        self.rule(name, self.term(("lit", "-")), NT(nonzero))
        return name

    def _fractional_multiple(self, mults: list[Fraction], pointer: str, lo, hi) -> str | tuple | None:  # type: ignore[no-untyped-def]
        m = mults[0]
        if any(x != m for x in mults) or m.numerator != 1 or 10 ** (len(str(m.denominator)) - 1) != m.denominator:
            self.unsupported("multipleOf", pointer, f"multipleOf {m} (only integers and 10^-k)")
            return num.NUMBER
        k = len(str(m.denominator)) - 1
        digits = f"-?(?:0|[1-9][0-9]*)(?:\\.[0-9]{{1,{k}}})?"
        if lo is None and hi is None:
            return digits
        rx = num.decimal_range(
            lo[0] if lo else None, lo[1] if lo else False, hi[0] if hi else None, hi[1] if hi else False
        )
        if rx == num.NEVER:
            return None
        return ("and", rx, digits)

    # ------------------------------------------------------------------ strings

    def _string_body(self, flat: list[Member]) -> Any:
        """The string-body language: a regex string, an expr tuple, None (any) or False."""
        lo, hi = 0, None
        lo_ptr = hi_ptr = "#"
        pieces: list[tuple[st.Node | str, str]] = []  # AST or a ready regex
        for s, p in flat:
            if "minLength" in s:
                v = s["minLength"]
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    if not (isinstance(v, float) and v.is_integer() and v >= 0):
                        raise SchemaError(f"'minLength' must be a non-negative integer, got {limited(v)}", _ptr(p, "minLength"))
                if int(v) > lo:
                    lo, lo_ptr = int(v), _ptr(p, "minLength")
            if "maxLength" in s:
                v = s["maxLength"]
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                    raise SchemaError(f"'maxLength' must be a non-negative integer, got {limited(v)}", _ptr(p, "maxLength"))
                if hi is None or int(v) < hi:
                    hi, hi_ptr = int(v), _ptr(p, "maxLength")
            if "pattern" in s:
                pat = s["pattern"]
                q = _ptr(p, "pattern")
                if not isinstance(pat, str):
                    raise SchemaError("'pattern' must be a string", q)
                try:
                    pieces.append((_at(q, _search_language, pat), q))
                except st.PatternError as exc:
                    self.unsupported("pattern", q, str(exc))
            if "format" in s:
                f = s["format"]
                q = _ptr(p, "format")
                if f in fmt.FORMATS:
                    pieces.append((_format_language(f), q))
                    if f in fmt.MAX_LENGTH and (hi is None or hi > fmt.MAX_LENGTH[f]):
                        hi, hi_ptr = fmt.MAX_LENGTH[f], q
                else:
                    self.warn(f"format {limited(f)} is not enforced (at {q})")
        if hi is not None and lo > hi:
            return False
        asts: list[tuple[st.Node | str, str]] = list(pieces)
        # try to fold the length bounds into a single pattern exactly
        need_length = lo > 0 or hi is not None
        if need_length and asts:
            folded = []
            done = False
            for a, q in asts:
                if not done and not isinstance(a, str):
                    b = st.with_length(a, lo, hi)
                    if b is not None:
                        if b is not a:  # the bounds became a repeat count
                            self._repeat(lo, lo_ptr)
                            if hi is not None:
                                self._repeat(hi, hi_ptr)
                        a, done = b, True
                folded.append((a, q))
            asts = folded
            need_length = not done
        if need_length:
            for bound, q in ((hi, hi_ptr), (lo, lo_ptr)):
                if bound is not None:
                    self._repeat(bound, q)
            asts.append((st.rep(st.ANY, lo, hi), lo_ptr))
        if not asts:
            return None
        regexes = []
        for a, _ in asts:
            if isinstance(a, str):
                regexes.append(a)
            elif st.is_empty_language(a):
                return False
            else:
                regexes.append(st.render(a))
        regexes = list(dict.fromkeys(regexes))
        return regexes[0] if len(regexes) == 1 else ("and", *regexes)

    def _string(self, flat: list[Member], excluded: list | None = None) -> Spec | None:
        body = self._string_body(flat)
        if body is False:
            return None
        if excluded:
            parts = [ANY_BODY if body is None else body, *(("not", e) for e in excluded)]
            body = ("and", *parts)
            if not self._body_nonempty(body):
                return None
        elif isinstance(body, tuple) and not self._body_nonempty(body):
            return None  # constraints that exclude each other (pattern ∧ format ∧ length)
        if body is None:
            return ("rx", ANY_STRING)
        if isinstance(body, str):
            return ("rx", f'"{_wrap(body)}"')
        return ("expr", ("concat", '"', body, '"'))

    # ------------------------------------------------------------------ arrays

    def _array(self, flat: list[Member], depth: int) -> str | None:
        lo, hi = 0, None
        lo_ptr = hi_ptr = flat[0][1] if flat else "#"
        prefix_lists: list[tuple[list, str, Any, str]] = []  # (prefix, ptr, rest, rest_ptr)
        for s, p in flat:
            for kw in ("minItems", "maxItems"):
                if kw in s:
                    v = s[kw]
                    if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                        raise SchemaError(f"'{kw}' must be a non-negative integer", _ptr(p, kw))
                    if kw == "minItems":
                        if int(v) > lo:
                            lo, lo_ptr = int(v), _ptr(p, kw)
                    elif hi is None or int(v) < hi:
                        hi, hi_ptr = int(v), _ptr(p, kw)
            prefix: list = []
            pre_ptr = p
            rest: Any = True
            rest_ptr = p
            items = s.get("items")
            if "prefixItems" in s:
                prefix, pre_ptr = s["prefixItems"], _ptr(p, "prefixItems")
                if items is not None:
                    rest, rest_ptr = items, _ptr(p, "items")
            elif isinstance(items, list):
                prefix, pre_ptr = items, _ptr(p, "items")
                if "additionalItems" in s:
                    rest, rest_ptr = s["additionalItems"], _ptr(p, "additionalItems")
            elif items is not None:
                rest, rest_ptr = items, _ptr(p, "items")
            if prefix or rest is not True:
                prefix_lists.append((prefix, pre_ptr, rest, rest_ptr))
        k = max((len(pl[0]) for pl in prefix_lists), default=0)

        def members_at(j: int) -> list[Member]:
            out = []
            for prefix, pre_ptr, rest, rest_ptr in prefix_lists:
                if j < len(prefix):
                    out.append((prefix[j], _ptr(pre_ptr, j)))
                else:
                    out.append((rest, rest_ptr))
            return out

        slots: list[str | None] = []
        for j in range(k):
            if hi is not None and j >= hi:
                break
            nt = self.node(members_at(j), depth + 1)
            if nt is None:
                hi = j if hi is None else min(hi, j)
                break
            slots.append(nt)
        rest_nt = self.node(members_at(k), depth + 1) if (hi is None or hi > k) else None
        if rest_nt is None:
            hi = min(hi, len(slots)) if hi is not None else len(slots)
        if hi is not None and lo > hi:
            return None
        # states j = items written so far; the last state loops when there is no maxItems
        top = hi if hi is not None else max(k, lo, 1)
        self._repeat(top, hi_ptr if hi is not None and top == hi else lo_ptr)
        # contains/minContains: count items written on the "matches contains" path, up to need
        need, contains = self._contains(flat, hi)
        if need and hi is not None and need > hi:
            return None
        if (top + 1) * (need + 1) * 2 > self.max_rules:
            raise LimitError("max_rules", (top + 1) * (need + 1) * 2, self.max_rules, hi_ptr if hi is not None else lo_ptr,
                             detail="an array state per item count (and per contains count)")

        def with_contains(j: int) -> str | None:
            if not need:
                return None
            return self.node([*members_at(min(j, k)), contains], depth + 1)

        slots_c = [with_contains(j) for j in range(len(slots))]
        rest_c = with_contains(k) if rest_nt is not None else None
        if need and not any(slots_c) and rest_c is None:
            return None
        name = {(j, m): self.fresh("arr") for j in range(top + 1) for m in range(need + 1)}
        for j in range(top + 1):
            for m in range(need + 1):
                here = name[(j, m)]
                if j >= lo and m >= need:
                    self.rule(here, self.term(self.layout.close_array(depth, j == 0)))
                if hi is not None and j >= hi:
                    continue
                item = slots[j] if j < len(slots) else rest_nt
                item_c = slots_c[j] if j < len(slots_c) else rest_c
                sep = self.term(self.layout.array_sep(depth, j == 0))
                nj = j + 1 if j < top else j
                if item is not None:
                    self.rule(here, sep, NT(item), NT(name[(nj, m)]))
                if item_c is not None and m < need:
                    self.rule(here, sep, NT(item_c), NT(name[(nj, m + 1)]))
        return name[(0, 0)]

    def _contains(self, flat: list[Member], hi: int | None) -> tuple[int, Member]:
        """(items that must match ``contains``, the contains member); (0, ...) if none."""
        found = [(s, p) for s, p in flat if "contains" in s]
        if not found:
            return 0, (True, "#")
        if len(found) > 1:
            self.unsupported("contains", _ptr(found[1][1], "contains"), "more than one 'contains' on one array")
            return 0, (True, "#")
        s, p = found[0]
        need = s.get("minContains", 1)
        if isinstance(need, float) and need.is_integer():
            need = int(need)
        if not isinstance(need, int) or isinstance(need, bool) or need < 0:
            raise SchemaError("'minContains' must be a non-negative integer", _ptr(p, "minContains"))
        if "maxContains" in s and (hi is None or s["maxContains"] < hi):
            self.unsupported("maxContains", _ptr(p, "maxContains"),
                             "an upper bound on matching items needs the complement of 'contains'")
        self._repeat(need, _ptr(p, "minContains"))
        return need, (s["contains"], _ptr(p, "contains"))

    # ------------------------------------------------------------------ objects

    def _object(self, flat: list[Member], depth: int, forbidden: set[str] | None = None) -> str | None:
        named: dict[str, list[Member]] = {}
        required: dict[str, None] = {}  # an ordered set: lookups stay O(1) for long lists
        min_p, max_p = 0, None
        count_ptr = flat[0][1] if flat else "#"
        name_schemas: list[Member] = []
        for s, p in flat:
            props = s.get("properties", {})
            if not isinstance(props, dict):
                raise SchemaError("'properties' must be an object", _ptr(p, "properties"))
            for k in props:
                named.setdefault(k, [])
            for k in s.get("required", []) or []:
                if not isinstance(k, str):
                    raise SchemaError("'required' must list strings", _ptr(p, "required"))
                required[k] = None
            if "minProperties" in s and int(s["minProperties"]) > min_p:
                min_p = int(s["minProperties"])
                if max_p is None:
                    count_ptr = _ptr(p, "minProperties")
            if "maxProperties" in s:
                v = int(s["maxProperties"])
                if max_p is None or v < max_p:
                    max_p, count_ptr = v, _ptr(p, "maxProperties")
            if "propertyNames" in s:
                name_schemas.append((s["propertyNames"], _ptr(p, "propertyNames")))
        for k in required:
            named.setdefault(k, [])
        deps = _dependencies(flat)
        for a, bs in deps.items():
            for k in (a, *bs):
                named.setdefault(k, [])
        # every member constrains every key: by properties, patternProperties or additional
        patterns: list[tuple[str, Any, str, int]] = []  # (pattern, schema, ptr, member index)
        for idx, (s, p) in enumerate(flat):
            pp = s.get("patternProperties", {}) or {}
            for pat, sub in pp.items():
                patterns.append((pat, sub, _ptr(p, "patternProperties", pat), idx))
        if min_p > 0 or max_p is not None:  # object states count properties up to this
            self._repeat(max(1, max_p if max_p is not None else min_p), count_ptr)
        for k, conj in named.items():
            conj += self._key_members(flat, patterns, k)
        # property names must satisfy propertyNames
        if name_schemas:
            check = self._name_check(name_schemas)
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
            nt = self.node(conj, depth + 1)
            if nt is None and k in required:
                return None
            if nt is not None:
                slots.append((k, nt, k in required))
        # closed: when no member says what other keys may be (additionalProperties), a key
        # must be named or match a patternProperties pattern
        closed = self.closed and any("properties" in s or "patternProperties" in s for s, _ in flat) \
            and not any(k in s for s, _ in flat for k in _OPEN_KW)
        if closed and not patterns:
            extras = []
        else:
            extras = self._extra_regions(flat, patterns, list(named) + sorted(forbidden - set(named)),
                                         name_schemas, depth, closed)
        if max_p is not None and min_p > max_p:
            return None
        if extras and min_p >= 2:
            # the grammar cannot tell additional keys apart: writing one twice counts twice
            self.warn(f"minProperties at {count_ptr}: an additional property may repeat a key, "
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
            self.unsupported("dependentRequired", flat[0][1], "more than 10 names take part")
            deps = {}
        if self.order == "any":
            return self._object_any(slots, extras, min_p, max_p, depth, deps,
                                    flat[0][1] if flat else "#")
        return self._object_schema_order(slots, extras, min_p, max_p, depth, deps)

    def _object_any(self, slots, extras, min_p, max_p, depth, deps, pointer):  # type: ignore[no-untyped-def]
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
            return self._object_any_order(slots, extras, min_p, max_p, depth, deps)
        dep_names = {k for a, bs in (deps or {}).items() for k in (a, *bs)}
        tracked = {i for i, (k, _, req) in enumerate(slots) if req or k in dep_names}
        n_required = sum(1 for s in slots if s[2])
        if min_p <= n_required:
            counting = max_p is not None
            cap = max(1, max_p) if max_p is not None else 1
            per_state = (len(slots) + len(extras) + 1) * (cap + 1 if counting else 1)
            if per_state << len(tracked) <= ANY_ORDER_BUDGET:
                self.warn(f"property_order='any': an object with {len(slots)} properties keeps "
                          f"its {len(tracked)} required or dependent names unique; the others "
                          f"may repeat (a duplicate key) (at {pointer})")
                return self._object_any_order(slots, extras, min(min_p, 0), max_p, depth, deps,
                                              tracked)
        self.warn(f"property_order='any' needs too many states for an object with "
                  f"{len(slots)} properties; it uses schema order (at {pointer})")
        return self._object_schema_order(slots, extras, min_p, max_p, depth, deps)

    def _key_members(self, flat: list[Member], patterns: list, k: str) -> list[Member]:
        """What each member says about the value of key ``k``."""
        conj: list[Member] = []
        for idx, (s, p) in enumerate(flat):
            props = s.get("properties", {})
            matched = False
            if k in props:
                conj.append((props[k], _ptr(p, "properties", k)))
                matched = True
            for pat, sub, q, i in patterns:
                if i == idx and self._pattern_matches(pat, k, q):
                    conj.append((sub, q))
                    matched = True
            if not matched and "additionalProperties" in s:
                conj.append((s["additionalProperties"], _ptr(p, "additionalProperties")))
        return conj

    # ------------------------------------------------------------------ canonical order

    def reorder(self, members: list[Member], value: Any) -> Any:
        """``value`` with object keys in the order the grammar writes them."""
        flat = self.flatten(members)
        if flat is None:
            return value
        consumed: set = set()
        while True:
            pick = next(((s, p, kw) for s, p in flat for kw in ("anyOf", "oneOf")
                         if kw in s and (self._shape(s), kw) not in consumed), None)
            if pick is None:
                break
            s, p, kw = pick
            consumed.add((self._shape(s), kw))
            branches = [(b, _ptr(p, kw, i)) for i, b in enumerate(s[kw])]
            chosen = next((b for b in branches if self._is_valid(b[0], value)), branches[0])
            flat = self.flatten([*flat, chosen]) or flat
        while True:  # if/then/else and schema dependencies: the case the value is in
            split = next(((s, sp) for s, p in flat if (sp := self._split(s, p, frozenset(consumed))) is not None), None)
            if split is None:
                break
            s, (tag, cases) = split
            consumed.add((self._shape(s), tag))
            if tag == "if":
                case = cases[0] if self._is_valid(s["if"], value) else cases[1]
            else:
                case = cases[1] if isinstance(value, dict) and tag.split(":", 1)[1] in value else cases[0]
            flat = self.flatten([*flat, *case]) or flat
        key = _json_key(value)
        for s, _ in flat:  # enum/const values are written as the schema spells them
            for kw in ("const", "enum"):
                vals = [s[kw]] if kw == "const" and kw in s else s.get(kw) if kw == "enum" else None
                for v in vals if isinstance(vals, list) else []:
                    if _json_key(v) == key:
                        return v
        if isinstance(value, dict):
            order: dict[str, None] = {}  # an ordered set
            for s, _ in flat:
                order.update((k, None) for k in s.get("properties", {}) or {})
            for s, _ in flat:
                order.update((k, None) for k in s.get("required", []) or [])
            for a, bs in _dependencies(flat).items():
                order.update((k, None) for k in (a, *bs))
            patterns = [(pat, sub, _ptr(p, "patternProperties", pat), idx)
                        for idx, (s, p) in enumerate(flat)
                        for pat, sub in (s.get("patternProperties", {}) or {}).items()]
            keys = [k for k in order if k in value] + [k for k in value if k not in order]
            return {k: self.reorder(self._key_members(flat, patterns, k), value[k]) for k in keys}
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
                        conj.append((pre[j], _ptr(p, "items", j)))
                    elif rest is not None:
                        conj.append((rest, _ptr(p, "items")))
                out.append(self.reorder(conj, v))
            return out
        return value

    def _is_valid(self, schema: Any, value: Any) -> bool:
        if not isinstance(schema, dict):
            return schema is not False
        try:
            import jsonschema
        except ImportError:
            t = schema.get("type")
            return t is None or _type_of(value) in _type_set(t, "#")
        if self._root_validator is None:
            cls = jsonschema.validators.validator_for(self.root, default=jsonschema.Draft202012Validator)
            self._root_validator = cls(self.root if isinstance(self.root, (dict, bool)) else {})
        try:
            return bool(self._root_validator.evolve(schema=schema).is_valid(value))
        except Exception:  # noqa: BLE001 - unresolvable refs etc.: undecided, not valid
            return False

    def _pattern_matches(self, pattern: str, key: str, pointer: str) -> bool:
        try:
            found = _at(pointer, _pattern_re, pattern)
        except st.PatternError as exc:
            self.unsupported("patternProperties", pointer, str(exc))
            return False
        return found.fullmatch(key) is not None

    def _name_check(self, name_schemas: list[Member]) -> Callable[[str], bool]:
        flat = self.flatten(name_schemas)
        if flat is None:
            return lambda k: False
        body = self._string_body(flat)
        if body is False:
            return lambda k: False
        if body is None:
            check = self._validator(flat)
            return (lambda k: True) if check is None else check
        from tether import regex as rx

        term = (Terminal("k", regex=f'"{_wrap(body)}"') if isinstance(body, str)
                else Terminal("k", expr=("concat", '"', body, '"')))
        node = term.to_node()
        return lambda k: rx.matches(node, dumps_str(k).encode("utf-8"))

    def _extra_regions(self, flat, patterns, named, name_schemas, depth, closed=False):  # type: ignore[no-untyped-def]
        """[(key body, value nonterminal)] for keys outside ``named`` (disjoint regions);
        ``closed``: none for keys that match no pattern."""
        # keys other than the named ones: a small complement the regex layer builds lazily
        # (a spelled-out complement trie grows with every name)
        not_named: Any = (
            ANY_BODY if not named
            else ("and", ANY_BODY, ("not", "|".join(_key_body(k) for k in named)))
        )
        names_body = None
        if name_schemas:
            nflat = self.flatten(name_schemas)
            if nflat is None:
                return []
            names_body = self._name_body(nflat)
            if names_body is False:
                return []
        if len(patterns) > 4:
            distinct = {json.dumps(sub, sort_keys=True) for _, sub, _, _ in patterns}
            if len(distinct) == 1 and len({i for *_, i in patterns}) == 1:
                # one schema for every pattern, all in one member: two regions, keys
                # matching some pattern and keys matching none (the members'
                # additionalProperties, absent meaning any value)
                pats = "|".join(f"(?:{_at(q, _pattern_body, pt)})" for pt, _, q, _ in patterns)
                pat, sub, q, i = patterns[0]
                adds = [(idx, (s["additionalProperties"], _ptr(p, "additionalProperties")))
                        for idx, (s, p) in enumerate(flat) if "additionalProperties" in s]
                regions = [((pats,), [(sub, q), *(m for idx, m in adds if idx != i)]),
                           ((("not", pats),), [m for _, m in adds])][: 1 if closed else 2]
            else:
                self.unsupported("patternProperties", patterns[0][2],
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
                    compiled.append(_at(q, _pattern_body, pat))
                except st.PatternError as exc:
                    self.unsupported("patternProperties", q, str(exc))
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
                        conj.append((s["additionalProperties"], _ptr(p, "additionalProperties")))
                key_parts = [compiled[j] for j in inside]
                key_parts += [("not", compiled[j]) for j in range(n) if j not in inside and compiled[j] is not None]
                regions.append((tuple(key_parts), conj))
        out = []
        for key_parts, conj in regions:
            nt = self.node(conj, depth + 1)
            if nt is None:
                continue
            parts: list[Any] = [*(not_named[1:] if isinstance(not_named, tuple) else [not_named]), *key_parts]
            if names_body is not None:
                parts.append(names_body)
            body = parts[0] if len(parts) == 1 else ("and", *parts)
            # all keys but finitely many named ones: never empty (no regex work needed)
            if (key_parts or names_body is not None) and not self._body_nonempty(body):
                continue
            out.append((body, nt))
        return out

    def _name_body(self, nflat: list[Member]) -> Any:
        """Key-body language for ``propertyNames`` (string keywords and enum/const)."""
        body = self._string_body(nflat)
        if body is False:
            return False
        lits = None
        for s, _ in nflat:
            for kw in ("enum", "const"):
                if kw in s:
                    vals = {v for v in ([s[kw]] if kw == "const" else s[kw]) if isinstance(v, str)}
                    lits = vals if lits is None else lits & vals
        if lits is None:
            return body
        if not lits:
            return False
        alt = st.render(st.alt(*[st.lit(v) for v in sorted(lits)]))
        return alt if body is None else ("and", body if isinstance(body, str) else body, alt)

    def _body_nonempty(self, body: Any) -> bool:
        if isinstance(body, str):
            return True
        try:
            from tether import regex as rx

            node = Terminal("k", expr=("concat", '"', body, '"')).to_node()
            return not rx.is_empty(node)
        except Exception:  # noqa: BLE001 - keep the region if emptiness cannot be decided
            return True

    def _key_term(self, depth: int, first: bool, body: Any) -> T:
        before, after = self.layout.open_key(depth, first)
        if isinstance(body, str):
            return self.term(("rx", f'{before}"{_wrap(body)}"{after}'), "key")
        return self.term(("expr", ("concat", before, '"', body, '"', after)), "key")

    def _object_schema_order(self, slots, extras, min_p, max_p, depth, deps=None):  # type: ignore[no-untyped-def]
        counting = min_p > 0 or max_p is not None
        cap = max(1, max_p if max_p is not None else min_p) if counting else 1
        self._repeat(cap, self.path[-1] if self.path else "#")
        n = len(slots)
        names: dict[tuple[int, int, int], str] = {}
        # dependentRequired: the state remembers which participating names were written
        tracked = sorted({k for a, bs in (deps or {}).items() for k in (a, *bs)})
        bit = {k: 1 << i for i, k in enumerate(tracked)}

        def consistent(seen: int) -> bool:
            return all(not seen & bit[a] or all(seen & bit[b] for b in bs) for a, bs in (deps or {}).items())

        def S(i: int, c: int, seen: int = 0) -> Generator[tuple[int, int, int], str, str]:  # noqa: N802 - rule family named as in the docs
            """The state after slot ``i`` with ``c`` properties written; a generator run by
            ``_trampoline`` (it yields the state it needs and receives its name)."""
            key = (i, c, seen)
            if key in names:
                return names[key]
            name = names[key] = self.fresh("obj")
            inc = min(c + 1, cap)
            can_add = max_p is None or (c < max_p)
            if i < n:
                k, nt, req = slots[i]
                if not req:
                    child = yield (i + 1, c, seen)
                    self.rule(name, NT(child))
                if can_add:
                    t = self.term(self.layout.key_literal(depth, c == 0, k), "key")
                    child = yield (i + 1, inc, seen | bit.get(k, 0))
                    self.rule(name, t, NT(nt), NT(child))
            elif not consistent(seen):
                pass  # a dependency is missing: no rule, so the state is pruned as unproductive
            else:
                if c >= min_p or (not counting):
                    self.rule(name, self.term(self.layout.close_object(depth, c == 0)))
                if can_add:
                    for body, nt in extras:
                        t = self._key_term(depth, c == 0, body)
                        child = yield (n, inc, seen)
                        self.rule(name, t, NT(nt), NT(child))
            return name

        # required properties beyond max_p make the object impossible
        if max_p is not None and sum(1 for s in slots if s[2]) > max_p:
            return None
        return _trampoline(S, (0, 0, 0), names)

    def _object_any_order(self, slots, extras, min_p, max_p, depth, deps=None, tracked=None):  # type: ignore[no-untyped-def]
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
        key_terms: dict[bool, list[T | None]] = {True: [None] * len(slots), False: [None] * len(slots)}
        close_terms: dict[bool, T] = {}
        extra_terms: dict[tuple[int, bool], T] = {}
        slot_nts = [NT(nt) for _, nt, _ in slots]
        extra_nts = [NT(nt) for _, nt in extras]
        rules = self.g.rules
        order = [(i, k, used_bit) for i, (k, _, _) in enumerate(slots)
                 for used_bit in [0 if tracked is not None and i not in tracked else 1 << i]]

        def S(used: int, c: int) -> Generator[tuple[int, int], NT, NT]:  # noqa: N802
            """The state with the slots ``used`` written, ``c`` properties in all; a
            generator run by ``_trampoline`` (it yields the state it needs)."""
            key = (used, c)
            found = names.get(key)
            if found is not None:
                return found
            name = self.fresh("obj")
            ref = names[key] = NT(name)
            inc = min(c + 1, cap)
            first = c == 0
            can_add = max_p is None or c < max_p
            if (used & req_mask == req_mask and (c >= min_p or not counting)
                    and all(not used & a or used & bs == bs for a, bs in dep_masks)):
                t = close_terms.get(first)
                if t is None:
                    t = close_terms[first] = self.term(self.layout.close_object(depth, first))
                rules.append(Rule(name, (t,)))
            if can_add:
                kts = key_terms[first]
                for i, k, bit in order:
                    if used & bit:
                        continue
                    t = kts[i]
                    if t is None:
                        t = kts[i] = self.term(self.layout.key_literal(depth, first, k), "key")
                    child = yield (used | bit, inc)
                    rules.append(Rule(name, (t, slot_nts[i], child)))
                for j, (body, _) in enumerate(extras):
                    t = extra_terms.get((j, first))
                    if t is None:
                        t = extra_terms[(j, first)] = self._key_term(depth, first, body)
                    child = yield (used, inc)
                    rules.append(Rule(name, (t, extra_nts[j], child)))
            if len(rules) > self.max_rules:
                self._too_many_rules()
            return ref

        return _trampoline(S, (0, 0), names).name


def _trampoline(fn: Callable[..., Generator], args: tuple, memo: dict | None = None) -> Any:  # type: ignore[type-arg]
    """``fn(*args)`` for a recursive generator function, without Python recursion: a call
    ``child = yield child_args`` stands for ``child = fn(*child_args)``, and the
    generator's return value is the result. Calls run in the order recursion would.
    ``memo`` (child_args -> result, which ``fn`` fills as it starts) answers a call met
    before without starting a generator."""
    stack = [fn(*args)]
    value: Any = None
    steps = 0
    while stack:
        try:
            request = stack[-1].send(value)
        except StopIteration as stop:
            stack.pop()
            value = stop.value
            continue
        steps += 1
        if not steps & 1023:
            check_deadline()
        if memo is not None:
            value = memo.get(request)
            if value is not None:
                continue
        stack.append(fn(*request))
        value = None
    return value


def _at(pointer: str, fn: Callable[[str], Any], pattern: str) -> Any:
    """``fn(pattern)``, a LimitError naming ``pointer`` beside the offset in the pattern."""
    try:
        return fn(pattern)
    except LimitError as exc:
        raise LimitError(exc.limit, exc.value, exc.maximum, f"{pointer} ({exc.place})") from None


@functools.cache
def _format_language(name: str) -> st.Node:
    return st.search_language(st.parse_pattern("^(?:" + fmt.FORMATS[name] + ")$"))


@functools.lru_cache(maxsize=4096)
def _search_language(pattern: str) -> st.Node:
    """The language of strings ``pattern`` finds (memoized: nodes are immutable; a
    ``PatternError`` is raised again on every call)."""
    return st.search_language(st.parse_pattern(pattern))


@functools.lru_cache(maxsize=4096)
def _pattern_body(pattern: str) -> str:
    """The string-body regex of the strings ``pattern`` finds (memoized)."""
    return st.render(_search_language(pattern))


@functools.lru_cache(maxsize=4096)
def _pattern_re(pattern: str) -> re.Pattern[str]:
    """``st.matches`` of ``pattern``'s language as a compiled Python regex (memoized)."""
    return re.compile(st.render_plain(_search_language(pattern)), re.DOTALL)


@functools.lru_cache(maxsize=1 << 16)
def _key_body(key: str) -> str:
    """The string-body regex of exactly ``key`` (memoized: every object lists its names)."""
    return st.render(st.lit(key))


def _dependencies(flat: list[Member]) -> dict[str, list[str]]:
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
                        raise SchemaError(f"'{kw}' must list property names", _ptr(p, kw, a))
                    names = out.setdefault(a, {})
                    names.update((b, None) for b in bs if b != a)
    return {a: list(names) for a, names in out.items()}


def _values_of(s: dict) -> list:
    out = list(s["enum"]) if isinstance(s.get("enum"), list) else []
    if "const" in s:
        out.append(s["const"])
    return out


def _wrap(body: str) -> str:
    """Group a body regex so it can sit between two quotes."""
    return body if "|" not in body else f"(?:{body})"


def _type_set(t: Any, pointer: str) -> set[str]:
    names = [t] if isinstance(t, str) else t
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise SchemaError(f"'type' must be a type name or a list of them, got {limited(t)}", pointer)
    bad = [x for x in names if x not in TYPES]
    if bad:
        raise SchemaError(f"unknown type {bad[0]!r}; expected one of {', '.join(TYPES)}", pointer)
    out = set(names)
    if "number" in out:
        out.add("integer")
    return out


def _disjoint(a: dict, b: dict) -> bool:
    """Whether no value satisfies both summaries (``_summary``), as far as they show."""
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


def _first_overlap(infos: list[dict | None], pointer: str) -> tuple[int, int] | None:
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
        if not _disjoint(infos[i], infos[j]):  # type: ignore[arg-type]
            return i, j
    return None


_MAX_CANDIDATES = 200_000


def _candidate_pairs(infos: list, idx: list[int]) -> list[tuple[int, int]] | None:
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


MAX_MODULUS = 1000  # largest multipleOf read digit by digit
ANY_BODY = st.render(st.Rep(st.ANY, 0, None))
# unconstrained strings accept every JSON escape (\\/ and \\uXXXX too)
ANY_STRING = '"(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*"'


def compile_json_schema(
    schema: Any,
    *,
    whitespace: Whitespace = "compact",
    indent: int = 2,
    max_whitespace: int = 16,
    property_order: PropertyOrder = "schema",
    lenient: bool = False,
    draft: Draft | None = None,
    max_repeat: int | None = None,
    max_rules: int | None = None,
    max_depth: int = 24,
    max_expansion: int = 10_000,
    resolve_remote: Callable[[str], Any] | None = None,
    closed: bool = False,
    bounded_numbers: bool | num.NumberBounds = False,
    whitespace_pattern: str | None = None,
) -> Grammar:
    """Compile a JSON Schema into a Grammar whose language is the valid JSON documents.

    Every document the grammar allows validates against ``schema`` (except where
    ``Grammar.warnings`` says otherwise, e.g. ``lenient=True`` or a ``oneOf`` read as
    ``anyOf``), and every valid document written in the output policy is allowed: the
    layout given by ``whitespace`` (``"compact"``, ``"pretty"`` with ``indent``,
    ``"flexible"`` with at most ``max_whitespace`` whitespace characters per gap), object
    properties in ``properties`` order then additional ones (``property_order="schema"``)
    or in any order (``"any"``), strings in canonical escaping, numbers as
    ``dumps`` writes them. See docs/json_schema.md.

    The schema is hostile until checked: its shape is checked first (``check.py``), and
    the compile is bounded by the active ``tether.limits.Limits`` (``compile_seconds``,
    ``max_nesting``, ``max_json_depth``, ``max_alternatives``, ``max_text_chars``, and
    ``max_repeat``/``max_rules`` unless given here).

    Args:
        schema: the schema (a dict or a boolean), as ``json.loads`` returns it, or its
            JSON text.
        lenient: ignore what cannot be enforced, recording it in ``Grammar.warnings``.
        draft: override the draft (default: from ``$schema``, else 2020-12).
        max_repeat: largest ``minLength``/``maxLength``/``minItems``/``maxItems``/
            ``minContains``/``maxProperties`` expanded (default ``Limits.max_repeat``).
        max_rules: largest grammar, in rules (default ``Limits.max_rules``).
        max_depth: deepest nesting generated with ``whitespace="pretty"``.
        max_expansion: most schemas a ``$ref``/``allOf`` chain may pull into one place.
        resolve_remote: loads the document of a ``$ref`` outside this schema (URI → schema).
        closed: an object schema that declares ``properties`` or ``patternProperties``
            but says nothing of other keys (no ``additionalProperties`` or
            ``unevaluatedProperties`` in any member of its ``allOf``/``$ref`` conjunction)
            admits only the names it declares (with its ``required`` names) and the keys
            its patterns match, as OpenAI's strict structured outputs do: a missing
            ``additionalProperties`` reads as ``false`` for the conjunction as a whole.
            ``{"type": "object"}`` alone stays free-form. Off: the specification's open
            objects.
        bounded_numbers: ``True`` (``NumberBounds()``: 19 integer digits, 17 fraction
            digits, 3 exponent digits) or a ``NumberBounds``: numbers get at most that
            many digits where the schema does not bound them; the schema's own bounds win.
        whitespace_pattern: the flexible layout with this regex as the whitespace of
            every gap around ``{ } [ ] , :`` (it must match only JSON whitespace).

    Raises:
        UnsupportedSchemaError: a keyword that cannot be enforced (names keyword and pointer).
        SchemaError: an invalid schema, or one no value satisfies (names the pointer).
        LimitError: the schema, or the grammar it needs, exceeds a limit (names the limit
            and the pointer).

    Cost: linear in the schema size for typical schemas; bounded by ``max_rules`` and
    ``Limits.compile_seconds``.
    """
    if whitespace not in ("compact", "pretty", "flexible"):
        raise ValueError(f"whitespace must be 'compact', 'pretty' or 'flexible'; got {whitespace!r}")
    if property_order not in ("schema", "any"):
        raise ValueError(f"property_order must be 'schema' or 'any'; got {property_order!r}")
    if not isinstance(closed, bool):
        raise ValueError(f"closed must be True or False; got {closed!r}")
    bounds = num.NumberBounds() if bounded_numbers is True else bounded_numbers or None
    if bounds is not None and not isinstance(bounds, num.NumberBounds):
        raise ValueError(f"bounded_numbers must be a bool or a NumberBounds; got {bounded_numbers!r}")
    if whitespace_pattern is not None:
        if whitespace == "pretty":
            raise ValueError("whitespace_pattern needs whitespace='flexible' (or the default)")
        whitespace = "flexible"
        _check_whitespace_pattern(whitespace_pattern)
    lim = current()
    if isinstance(schema, (str, bytes, bytearray)):
        schema = _load_text(schema, lim)
    c: _Compiler | None = None
    try:
        with deadline("JSON Schema compile"):
            c = _Compiler(
                schema,
                layout=Layout(whitespace, indent, max_whitespace, whitespace_pattern),
                property_order=property_order,
                lenient=lenient,
                draft=draft,
                max_repeat=lim.max_repeat if max_repeat is None else max_repeat,
                max_rules=lim.max_rules if max_rules is None else max_rules,
                max_depth=max_depth,
                max_expansion=max_expansion,
                resolve_remote=resolve_remote,
                limits=lim,
                closed=closed,
                number_bounds=bounds,
            )
            start = c.node([(schema, "#")], 0)
            if start is None:
                raise SchemaError("the schema allows no value: its constraints contradict each other", "#")
            c.rule("root", NT(start))
            _prune(c.g)
    except RecursionError:
        # a backstop: nesting is bounded by Limits.max_nesting, which the Python stack
        # holds at its default; a raised limit may not fit
        place = c.path[-1] if c is not None and c.path else "#"
        raise LimitError("max_nesting", "deeper than the Python stack holds", lim.max_nesting, place,
                         detail="lower Limits.max_nesting, or simplify the schema") from None
    if not any(r.lhs == "root" for r in c.g.rules):
        raise SchemaError("the schema allows no finite value", "#")
    return c.g


def _check_whitespace_pattern(pattern: str) -> None:
    """ValueError unless ``pattern`` is a regex matching only JSON whitespace."""
    if not isinstance(pattern, str):
        raise ValueError(f"whitespace_pattern must be a regex string; got {limited(pattern)}")
    from tether import regex as rx

    node = Terminal("ws", expr=("and", pattern, ("not", "[ \t\n\r]*"))).to_node()  # RegexError
    if not rx.is_empty(node):
        raise ValueError(f"whitespace_pattern {limited(pattern)} matches more than JSON whitespace "
                         "(space, tab, newline, carriage return)")


def _load_text(text: str | bytes | bytearray, lim: Limits) -> Any:
    """The schema in JSON ``text``; SchemaError/LimitError for what is not JSON."""
    if len(text) > lim.max_text_chars:
        raise LimitError("max_text_chars", len(text), lim.max_text_chars, "the schema text")
    try:
        return json.loads(text)
    except RecursionError:
        raise LimitError("max_json_depth", "deeper than the Python stack holds", lim.max_json_depth,
                         "the schema text") from None
    except (ValueError, UnicodeError) as exc:  # JSONDecodeError, over-long integer literals
        raise SchemaError(f"the schema is not JSON text: {exc}", "#") from None


def dumps_for(
    schema: Any,
    value: Any,
    *,
    whitespace: Whitespace = "compact",
    indent: int = 2,
    property_order: PropertyOrder = "schema",
    draft: Draft | None = None,
) -> str:
    """The text ``compile_json_schema(schema, ...)`` accepts for ``value`` (a valid value).

    Object keys are put in the grammar's order (``properties`` order across ``$ref``,
    ``allOf`` and the first ``anyOf``/``oneOf`` branch the value validates against, then
    the other keys); the rest is ``dumps``. Useful to write few-shot examples and to test
    that valid values are accepted.
    """
    if property_order == "schema":
        try:
            c = _Compiler(schema, layout=Layout(whitespace, indent), property_order=property_order,
                          lenient=True, draft=draft, max_repeat=0, max_rules=0, max_depth=0,
                          max_expansion=10_000, resolve_remote=None)
            value = c.reorder([(schema, "#")], value)
        except (SchemaError, LimitError, RecursionError):
            pass
    return Layout(whitespace, indent).dumps(value)


def _prune(g: Grammar) -> None:
    """Drop rules that use nonterminals deriving no finite text, then unreachable ones.

    Rules and terminals are kept in their order. Rules are defined children first, so a
    few sweeps in rule order settle productivity and a few in reverse order reachability;
    a worklist over what is left finishes either. Symbols are compared by name: the
    compiler's terminal names (``key3``) never equal rule names (``obj_7``, ``root``),
    and every terminal it uses is defined; otherwise ``_prune_general`` does the work.

    Cost: about three passes over the rules, each symbol read in C.
    """
    rules = g.rules
    if not set(map(_LHS, rules)).isdisjoint(g.terminals):
        _prune_general(g)
        return
    productive = set(g.terminals)
    is_productive = productive.__contains__
    rest = rules
    for _ in range(_SWEEPS):
        left = []
        for r in rest:
            if all(map(is_productive, map(_NAME, r.rhs))):
                productive.add(r.lhs)
            else:
                left.append(r)
        if len(left) == len(rest):
            break
        rest = left
    else:
        rest = _close_productive(rest, productive)
    bad = {id(r) for r in rest}  # rules using a nonterminal that derives nothing
    reach = {g.start}
    is_reached = reach.__contains__
    todo = [r for r in rules if id(r) not in bad] if bad else rules
    for _ in range(_SWEEPS):
        left = []
        n_reached = len(reach)
        for r in reversed(todo):
            if is_reached(r.lhs):
                reach.update(map(_NAME, r.rhs))
            else:
                left.append(r)
        if not left or len(reach) == n_reached:
            todo = []
            break
        todo = left[::-1]
    if todo:  # a worklist over the rules not yet expanded
        by_lhs: dict[str, list[Rule]] = {}
        for r in todo:
            by_lhs.setdefault(r.lhs, []).append(r)
        stack = [a for a in by_lhs if a in reach]
        while stack:
            for r in by_lhs.pop(stack.pop(), ()):
                for x in r.rhs:
                    if x.name not in reach:
                        reach.add(x.name)
                        if x.name in by_lhs:
                            stack.append(x.name)
    if bad:
        g.rules = [r for r in rules if r.lhs in reach and id(r) not in bad]
    else:
        g.rules = [r for r in rules if r.lhs in reach]
    g.terminals = {k: v for k, v in g.terminals.items() if k in reach}


def _close_productive(rest: list[Rule], productive: set[str]) -> list[Rule]:
    """Finish ``productive`` over the rules ``rest`` with a worklist; the rules that use
    a name deriving nothing."""
    count: list[int] = []
    users: dict[str, list[int]] = {}
    todo: list[str] = []
    for k, r in enumerate(rest):
        n = 0
        for x in r.rhs:
            if x.name not in productive:
                n += 1
                users.setdefault(x.name, []).append(k)
        count.append(n)
        if not n and r.lhs not in productive:
            productive.add(r.lhs)
            todo.append(r.lhs)
    while todo:
        for k in users.get(todo.pop(), ()):
            count[k] -= 1
            if not count[k] and rest[k].lhs not in productive:
                productive.add(rest[k].lhs)
                todo.append(rest[k].lhs)
    return [r for k, r in enumerate(rest) if count[k]]


_SWEEPS = 4  # sweeps over the rules before a worklist takes over
_NAME = operator.attrgetter("name")
_LHS = operator.attrgetter("lhs")


def _prune_general(g: Grammar) -> None:
    """``_prune`` for any grammar (symbols told apart by kind): a worklist, linear."""
    rules = g.rules
    pending = [0] * len(rules)
    uses: dict[str, list[int]] = {}
    ready: list[int] = []
    for idx, r in enumerate(rules):
        n = 0
        for x in r.rhs:
            if not isinstance(x, T):
                n += 1
                uses.setdefault(x.name, []).append(idx)
        pending[idx] = n
        if not n:
            ready.append(idx)
    productive: set[str] = set()
    while ready:
        lhs = rules[ready.pop()].lhs
        if lhs in productive:
            continue
        productive.add(lhs)
        for idx in uses.get(lhs, ()):
            pending[idx] -= 1
            if not pending[idx]:
                ready.append(idx)
    # a rule whose every nonterminal is productive has a productive lhs
    g.rules = [r for idx, r in enumerate(rules) if not pending[idx]]
    reach = {g.start}
    stack = [g.start]
    by_lhs: dict[str, list] = {}
    for r in g.rules:
        by_lhs.setdefault(r.lhs, []).append(r)
    used_t: set[str] = set()
    while stack:
        for r in by_lhs.get(stack.pop(), []):
            for x in r.rhs:
                if isinstance(x, NT) and x.name not in reach:
                    reach.add(x.name)
                    stack.append(x.name)
                elif isinstance(x, T):
                    used_t.add(x.name)
    g.rules = [r for r in g.rules if r.lhs in reach]
    g.terminals = {k: v for k, v in g.terminals.items() if k in used_t}


__all__ = ["compile_json_schema", "dumps_for"]
