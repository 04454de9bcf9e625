"""The state one JSON Schema compile shares, and the helpers every keyword family uses.

``Context`` holds the options, the grammar being built, the memo of compiled
conjunctions, the reference index (filled by ``references.py``) and the bookkeeping
(warnings, fresh names, rules and terminals within ``max_rules``/``max_repeat``). The
keyword families (``combinators``, ``per_type``, ``negation``, ``*_keywords``,
``references``, ``validation``, ``canonical``) are functions of a ``Context``; the one
recursive step they share, ``Context.node`` (a conjunction → its nonterminal), is
``compiler.SchemaCompiler.node``, so no family imports the one that calls it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from fractions import Fraction
from itertools import repeat
from typing import Any, Literal

from tether.errors import LimitError, SchemaError, UnsupportedSchemaError, limited
from tether.grammar.ir import NT, Grammar, T, Terminal
from tether.grammar.json_schema import numbers as num
from tether.grammar.json_schema.layout import Layout, Spec
from tether.grammar.json_schema.nodes import lexeme_node
from tether.limits import Limits, current

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
OBJECT_KW = ("properties", "required", "additionalProperties", "patternProperties",
             "propertyNames", "minProperties", "maxProperties", "dependentRequired",
             "dependentSchemas", "dependencies", "unevaluatedProperties")
ARRAY_KW = ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
            "contains", "unevaluatedItems")
# keywords that say which keys besides the named ones an object may have
OPEN_KW = ("additionalProperties", "unevaluatedProperties")
STRING_KW = ("minLength", "maxLength", "pattern", "format")
NUMBER_KW = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")

DEFAULT_BASE = "https://tether.invalid/schema.json"

Member = tuple[Any, str]  # (schema object, JSON pointer)


def ptr(base: str, *parts: object) -> str:
    out = base
    for p in parts:
        q = p if type(p) is str else str(p)
        if "~" in q or "/" in q:
            q = q.replace("~", "~0").replace("/", "~1")
        out = f"{out}/{q}"
    return out


def json_key(v: Any) -> str:
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


def type_of(v: Any) -> str:
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


def allowed_types(flat: list[Member]) -> set[str]:
    """The JSON types every member's ``type`` allows (``number`` includes ``integer``)."""
    types = set(TYPES)
    for s, p in flat:
        if "type" in s:
            t = s["type"]
            one = _TYPE_SETS.get(t) if isinstance(t, str) else None
            types &= one if one is not None else type_set(t, ptr(p, "type"))
    if "number" in types:
        types.add("integer")
    return types


def detect_draft(schema: Any) -> Draft:
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


def at_pointer(pointer: str, fn: Callable[[str], Any], pattern: str) -> Any:
    """``fn(pattern)``, a LimitError naming ``pointer`` beside the offset in the pattern."""
    try:
        return fn(pattern)
    except LimitError as exc:
        raise LimitError(exc.limit, exc.value, exc.maximum, f"{pointer} ({exc.place})") from None


# ``type_set`` of each type name
_TYPE_SETS = {t: frozenset((t, "integer") if t == "number" else (t,)) for t in TYPES}


def type_set(t: Any, pointer: str) -> set[str]:
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


def _key_text(k: Any) -> str | None:
    """The text ``json.dumps`` writes for a dict key (None where it raises TypeError)."""
    if isinstance(k, str):
        return k
    if k is True or k is False or k is None:
        return "true" if k is True else "false" if k is False else "null"
    if isinstance(k, int):
        return int.__repr__(k)
    if isinstance(k, float):
        return _float_text(k)
    return None


def _float_text(x: float) -> str:
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    return float.__repr__(x)


_ITEM: Any = object()  # _structure: the key of an array's item (none)


def _scalar_structure(v: Any) -> Any:
    """A value naming the JSON text of the scalar ``v`` (None: not JSON): a string names
    itself, other scalars are tagged (``True`` is not ``1``, nor ``1`` ``1.0``)."""
    if type(v) is str:
        return v
    if isinstance(v, str):
        return str.__str__(v)
    if v is None or v is True or v is False:
        return ("c", v)
    if isinstance(v, int):
        return ("i", int.__repr__(v))
    if isinstance(v, float):
        return ("f", _float_text(v))
    return None


class Context:
    """What one compile shares: options, the grammar, memo, reference index, bookkeeping."""

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
        self.draft: Draft = draft or detect_draft(schema)
        self.g = Grammar(start="root")
        self.terms: dict[Any, T] = {}  # (kind, text) of a lexeme spec -> its terminal
        # memos of ``term`` for the lexemes every object and array asks for again
        self.key_terms: dict[tuple[int, bool, str], tuple[T, ...]] = {}
        self.punct_terms: dict[tuple[str, int, bool], T] = {}
        self.around_terms: dict[tuple[int, bool], tuple[tuple[T, ...], tuple[T, ...]]] = {}
        self.extra_terms: dict[tuple[int, bool, Any], tuple[T, ...]] = {}  # object_keywords.extra_key_term
        self.memo: dict[Any, str | None] = {}
        self.warned: set[str] = set()
        self.index: dict[str, Any] = {}
        self.base_of: dict[int, str] = {}
        self.ptr_of: dict[int, Any] = {}  # a text or a (parent, part) pair: ``references.pointer_of``
        self.docs: dict[str, Any] = {}
        self.pointer_targets: dict[tuple[int, str], Any] = {}  # (id(doc), fragment) -> target
        self.index_version = 0  # counts the changes to the index (``references.index_schema``)
        self.resolved: dict[int, tuple[int, Member]] = {}  # id(holder) -> (index_version, its $ref's target)
        self.keep: list[Any] = []
        self.root_validator: Any = None
        self._synth: dict[Any, dict[Any, Any]] = {}
        self.one_of_warned: set[str] = set()
        self.member_validators: dict[tuple[int, frozenset[str]], Any] = {}
        self._n = 0
        self._shapes: dict[tuple[str | None, Any], int] = {}
        self._shape_of_id: dict[int, int] = {}
        self._structures: dict[tuple[Any, ...], int] = {}  # see ``_structure``
        self._structure_of_id: dict[int, int] = {}
        self.checked: set[int] = set()  # ids of schema objects whose shape was checked
        self.path: list[str] = []  # pointers of the nodes being compiled, outermost first

    # ------------------------------------------------------------------ bookkeeping

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
            self.too_many_rules()

    def too_many_rules(self) -> None:
        raise LimitError("max_rules", len(self.g.rules), self.max_rules, self.path[-1] if self.path else "#",
                         detail="the schema expands to more grammar rules; raise max_rules, or simplify it")

    def repeat(self, value: int, pointer: str) -> None:
        """LimitError unless a bound the grammar expands (``maxLength`` ...) fits ``max_repeat``."""
        if value > self.max_repeat:
            raise LimitError("max_repeat", value, self.max_repeat, pointer)

    def term(self, spec: Spec, hint: str = "t") -> T:
        kind, value = spec[0], spec[1]
        key = (kind, value)
        ref = self.terms.get(key)
        if ref is None:
            # a new name (the count of terminals after a hint that ends in no digit)
            name = f"{hint}{len(self.terms)}"
            ref = self.terms[key] = T(name)
            if kind == "lit":
                self.g.terminals[name] = Terminal(name, literal=value)
            elif kind == "rx":
                self.g.terminals[name] = Terminal(name, regex=value, node=lexeme_node(spec))
            else:
                self.g.terminals[name] = Terminal(name, expr=value, node=lexeme_node(spec))
        return ref

    def key_literal_term(self, depth: int, first: bool, key: str) -> tuple[T, ...]:
        """The lexemes of a named key: ``key_punct_terms`` then the key's own
        (``layout.key_literal``), memoized for the compile (objects repeat names)."""
        k = (depth, first, key)
        t = self.key_terms.get(k)
        if t is None:
            own = self.term(self.layout.key_literal(depth, first, key), "key")
            before, after = self.key_around(depth, first)
            t = self.key_terms[k] = (*before, own, *after)
        return t

    def key_around(self, depth: int, first: bool) -> tuple[tuple[T, ...], tuple[T, ...]]:
        """(``key_punct_terms``, ``key_colon_terms``), memoized for the compile."""
        k = (depth, first)
        found = self.around_terms.get(k)
        if found is None:
            found = self.around_terms[k] = (self.key_punct_terms(depth, first), self.key_colon_terms())
        return found

    def key_punct_terms(self, depth: int, first: bool) -> tuple[T, ...]:
        """The punctuation lexeme before a key when the layout ``split_keys`` (else
        nothing: the key's lexeme holds it)."""
        if not self.layout.split_keys:
            return ()
        return (self.term(self.layout.key_punct(depth, first)),)

    def key_colon_terms(self) -> tuple[T, ...]:
        """The colon lexeme after a key when the layout ``split_keys`` (else nothing: the
        key's lexeme holds it)."""
        if not self.layout.split_keys:
            return ()
        return (self.term(self.layout.key_colon()),)

    def punct_term(self, kind: Literal["close_object", "array_sep", "close_array"], depth: int,
                   first: bool) -> T:
        """``term`` of the layout's ``close_object``/``array_sep``/``close_array`` lexeme,
        memoized for the compile."""
        k = (kind, depth, first)
        t = self.punct_terms.get(k)
        if t is None:
            lay = self.layout
            spec = (lay.close_object(depth, first) if kind == "close_object"
                    else lay.array_sep(depth, first) if kind == "array_sep"
                    else lay.close_array(depth, first))
            t = self.punct_terms[k] = self.term(spec)
        return t

    def shape(self, s: dict[Any, Any]) -> int:
        """The id of the first schema object equal to ``s`` (same JSON text, key order
        included, and same base URI).

        Equal subschemas compile to the same language, so the memo shares one nonterminal
        among copies: documents with inlined definitions (no ``$ref``) repeat the same
        subschema many times.
        """
        i = id(s)
        shape = self._shape_of_id.get(i)
        if shape is None:
            # key order kept: it is the schema property order; a schema the compiler
            # made (not indexed: no base URI of its own) is known by identity only, and
            # so is one that is not plain JSON; and so is the document itself: no other
            # schema object has its text (one inside it is shorter, one of another
            # document has another base URI), and naming it would walk all of it
            # (definitions never referred to, annotations) where the compile names only
            # the subschemas it reaches
            text = self._structure(s) if i in self.base_of and s is not self.root else None
            key = (self.base_of.get(i), ("#id", i) if text is None else text)
            shape = self._shape_of_id[i] = self._shapes.setdefault(key, i)
        return shape

    def _structure(self, value: Any, depth: int = 0) -> Any:
        """A value naming the JSON text of ``value`` (``json.dumps(value)``, key order
        included): equal names, equal texts; None for what ``json.dumps`` refuses (a value
        that is not JSON, a cycle: deeper than ``Limits.max_json_depth``, which the
        document was checked against).

        Arrays and objects are named by a number, once each, from their items' names, so
        naming every subschema of a document costs its size once, where writing each
        one's text would cost its size again at every level it is nested in. Strings
        name themselves; other scalars are tagged tuples.
        """
        if not isinstance(value, (dict, list, tuple)):
            return _scalar_structure(value)
        memo = self._structure_of_id
        found = memo.get(id(value))
        if found is not None:
            return found
        if depth > self.limits.max_json_depth:
            return None
        parts: list[Any]
        # a string names itself; null, booleans and integers are tagged here (as
        # ``_scalar_structure`` tags them); other values are named by a call
        if isinstance(value, dict):
            parts = ["o"]
            items: Iterable[tuple[Any, Any]] = value.items()
        else:
            parts = ["a"]
            items = zip(repeat(_ITEM), value)  # an array's items: no key
        for k, x in items:
            if k is not _ITEM and type(k) is not str:
                k = _key_text(k)
                if k is None:
                    return None
            t = type(x)
            if t is not str:
                if t is bool or x is None:
                    x = ("c", x)
                elif t is int:
                    x = ("i", int.__repr__(x))
                else:
                    x = self._structure(x, depth + 1)
                    if x is None:
                        return None
            if k is _ITEM:
                parts.append(x)
            else:
                parts += (k, x)
        found = memo[id(value)] = self._structures.setdefault(tuple(parts), len(self._structures))
        return found

    def synthetic(self, schema: dict[Any, Any], pointer: str) -> dict[Any, Any]:
        """A schema object made by the compiler (kept alive: members are keyed by id)."""
        key = (pointer, json.dumps(schema, sort_keys=True, default=id))
        found = self._synth.get(key)
        if found is None:
            found = self._synth[key] = schema
            self.ptr_of[id(schema)] = pointer
        return found

    def node(self, members: list[Member], depth: int, consumed: frozenset[Any] = frozenset()) -> str | None:
        """The nonterminal for the conjunction ``members`` at ``depth``; None if empty
        (``compiler.SchemaCompiler.node``)."""
        raise NotImplementedError
