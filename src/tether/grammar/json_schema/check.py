"""The shape of a schema document, checked before the compiler reads any of it.

A schema may come from a stranger. Before compiling, ``check_document`` walks it once,
iteratively (no recursion, however deep the input), and raises a tether error naming the
JSON pointer of the first problem:

* ``SchemaError``: a value that is not JSON (NaN, a lone surrogate, a set, a non-string
  key, an integer of more than 400 digits), or a keyword the compiler reads holding the
  wrong kind of value (``"required": 5``, ``"minLength": -1``, ``"items": 7``,
  ``"multipleOf": 0``, ``"type": ["string", 5]``, ...). The expected kind of every such
  keyword is one row of ``KEYWORDS``;
* ``LimitError``: the document nested deeper than ``Limits.max_json_depth``, larger than
  ``Limits.max_text_chars``, or an ``enum``/``anyOf``/``oneOf`` longer than
  ``Limits.max_alternatives``.

Keywords the compiler does not read (annotations, unknown keywords) may hold any JSON
value. Bounds that expand (``maxLength`` and the like) are compared with
``Limits.max_repeat`` where the compiler expands them, not here: a bound another keyword
makes vacuous costs nothing.

Cost: linear in the size of the document; ``check_deadline`` every 4,096 values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from tether.errors import LimitError, SchemaError, limited
from tether.limits import Limits, check_deadline

TYPES = ("null", "boolean", "object", "array", "string", "number", "integer")
_TYPE_NAMES = frozenset(TYPES)

# An integer of more digits than this is refused anywhere in a schema: Python will not
# print one above 4,300 digits, and no bound or value needs so many.
MAX_INT_DIGITS = 400
_MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10))


# A pointer is built only for an error: the walk carries (parent, part) pairs.
Ptr = Any  # str (the root) | tuple[Ptr, object]


def _ptr(base: Ptr, part: object) -> Ptr:
    return (base, part)


def _str(p: Ptr) -> str:
    """The JSON pointer text of ``p``."""
    parts = []
    while isinstance(p, tuple):
        p, part = p
        parts.append("/" + str(part).replace("~", "~0").replace("/", "~1"))
    return str(p) + "".join(reversed(parts))


# ----------------------------------------------------------------------------- kinds
#
# A kind checks one keyword value and returns what the walk visits next: (value,
# pointer, levels below the keyword's schema, whether the value is a schema). Plain
# values are checked for JSON-ness (types, keys, NaN, depth) by the walk itself.

Next = list[tuple[Any, Ptr, int, bool]]
Kind = Callable[[str, Any, str], Next]


def _is_count(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v >= 0
    return isinstance(v, float) and math.isfinite(v) and v.is_integer() and v >= 0


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _show(v: Any) -> str:
    """``limited(v)``, also for what ``repr`` refuses (an integer of over 4,300 digits)."""
    try:
        return limited(v)
    except ValueError:
        return f"<{type(v).__name__} of {v.bit_length() if isinstance(v, int) else '?'} bits>"


def _text(v: str, p: str) -> None:
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise SchemaError(f"the string {_show(v)} has a lone surrogate (not Unicode text)", _str(p)) from None


def _plain_size(x: Any) -> int:
    """What a plain value adds to the document's size when it is fine to count it where it
    is met: 1 for ``true``/``false``/``null`` and a small integer, 0 for a string (the
    caller checks and counts it), -1 for anything else (walked as an entry of its own)."""
    t = type(x)
    if t is str:
        return 0
    if t is bool or x is None or (t is int and x.bit_length() <= _MAX_INT_BITS):
        return 1
    return -1


def _members(items: Iterable[tuple[Any, Any]], p: Ptr, depth: int, deep: bool, keys: bool
             ) -> tuple[int, Next]:
    """A plain JSON container's ``(key or index, value)`` pairs at ``depth``: the size of
    the plain values, checked and counted here (and each key checked, with ``keys``: an
    object's), and the entries left to walk, in order (every value when ``deep``: the
    container is at the depth limit, which popping a child reports)."""
    size = 0
    later: Next = []
    for k, x in items:
        if keys and (type(k) is not str or not k.isascii()):
            _key(k, p)
        n = -1 if deep else _plain_size(x)
        if n < 0:
            later.append((x, (p, k), depth + 1, False))
        elif n:
            size += n
        else:
            if not x.isascii():
                _text(x, _ptr(p, k))
            size += 1 + len(x)
    return size, later


def _key(k: Any, p: str) -> None:
    if not isinstance(k, str):
        raise SchemaError(f"an object key must be a string, got {_show(k)}", _str(p))
    _text(k, p)


def _plain(kw: str, v: Any, q: str) -> Next:
    return [(v, q, 1, False)]


def _schema(kw: str, v: Any, q: str, levels: int = 1) -> Next:
    if not isinstance(v, (dict, bool)):
        raise SchemaError(f"a schema must be an object or a boolean, got {_show(v)}", _str(q))
    return [(v, q, levels, True)]


def _schema_map(kw: str, v: Any, q: str) -> Next:
    if not isinstance(v, dict):
        raise SchemaError(f"'{kw}' must be an object (name → schema), got {_show(v)}", _str(q))
    out: Next = []
    for name, sub in v.items():
        if type(name) is not str or not name.isascii():
            _key(name, q)
        if type(sub) is not dict and not isinstance(sub, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, got {_show(sub)}", _str(_ptr(q, name)))
        out.append((sub, (q, name), 2, True))
    return out


def _schema_list(kw: str, v: Any, q: str, *, empty_ok: bool = False) -> Next:
    if not isinstance(v, list) or (not v and not empty_ok):
        what = "an array" if empty_ok else "a non-empty array"
        raise SchemaError(f"'{kw}' must be {what} of schemas, got {_show(v)}", _str(q))
    return [s for i, sub in enumerate(v) for s in _schema(kw, sub, _ptr(q, i), 2)]


def _prefix(kw: str, v: Any, q: str) -> Next:
    return _schema_list(kw, v, q, empty_ok=True)


def _items(kw: str, v: Any, q: str) -> Next:
    # a schema, or (draft 4 to 2019-09) an array of schemas; read alike in every draft
    return _prefix(kw, v, q) if isinstance(v, list) else _schema(kw, v, q)


def _string(kw: str, v: Any, q: str) -> Next:
    if not isinstance(v, str):
        raise SchemaError(f"'{kw}' must be a string, got {_show(v)}", _str(q))
    return [(v, q, 1, False)]


def _names(kw: str, v: Any, q: str) -> Next:
    if not isinstance(v, list):
        raise SchemaError(f"'{kw}' must be an array of property names, got {_show(v)}", _str(q))
    for i, x in enumerate(v):
        if not isinstance(x, str):
            raise SchemaError(f"'{kw}' must list property names (strings), got {_show(x)}", _str(_ptr(q, i)))
    return [(v, q, 1, False)]


def _count(kw: str, v: Any, q: str) -> Next:
    if not _is_count(v):
        raise SchemaError(f"'{kw}' must be a non-negative integer, got {_show(v)}", _str(q))
    return [(v, q, 1, False)]


def _number(kw: str, v: Any, q: str) -> Next:
    if not _is_number(v):
        raise SchemaError(f"'{kw}' must be a number, got {_show(v)}", _str(q))
    if isinstance(v, float) and math.isinf(v):
        # an infinite bound on its open side bounds nothing (the compiler reads it so);
        # on the other side no JSON number is in range
        if (kw in ("minimum", "exclusiveMinimum")) == (v > 0):
            raise SchemaError(f"'{kw}' is {v!r}: no JSON number is in range", _str(q))
        return []
    return [(v, q, 1, False)]


def _bound(kw: str, v: Any, q: str) -> Next:
    # draft 4 reads exclusiveMinimum/exclusiveMaximum as flags beside minimum/maximum
    return [] if isinstance(v, bool) else _number(kw, v, q)


def _positive(kw: str, v: Any, q: str) -> Next:
    if not _is_number(v) or (isinstance(v, float) and not math.isfinite(v)):
        raise SchemaError(f"'{kw}' must be a number, got {_show(v)}", _str(q))
    if v <= 0:
        raise SchemaError(f"'{kw}' must be > 0, got {_show(v)}", _str(q))
    return [(v, q, 1, False)]


def _flag(kw: str, v: Any, q: str) -> Next:
    if not isinstance(v, bool):
        raise SchemaError(f"'{kw}' must be true or false, got {_show(v)}", _str(q))
    return []


def _type(kw: str, v: Any, q: str) -> Next:
    names = [v] if isinstance(v, str) else v
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise SchemaError(f"'type' must be a type name or a list of them, got {_show(v)}", _str(q))
    for x in names:
        if x not in TYPES:
            raise SchemaError(f"unknown type {_show(x)}; expected one of {', '.join(TYPES)}", _str(q))
    return []


def _enum(kw: str, v: Any, q: str) -> Next:
    if not isinstance(v, list):
        raise SchemaError(f"'enum' must be an array, got {_show(v)}", _str(q))
    return [(v, q, 1, False)]


def _alternatives(kw: str, v: Any, q: str) -> Next:
    return _schema_list(kw, v, q)


def _dependent_required(kw: str, v: Any, q: str) -> Next:
    if not isinstance(v, dict):
        raise SchemaError(f"'{kw}' must be an object (name → names), got {_show(v)}", _str(q))
    for name, names in v.items():
        _names(kw, names, _ptr(q, name))
    return [(v, q, 1, False)]


def _dependencies(kw: str, v: Any, q: str) -> Next:
    # draft 4 to 7: each value is a list of names or a schema
    if not isinstance(v, dict):
        raise SchemaError(f"'{kw}' must be an object, got {_show(v)}", _str(q))
    out: Next = []
    for name, dep in v.items():
        _key(name, q)
        if isinstance(dep, list):
            _names(kw, dep, _ptr(q, name))
            out.append((dep, _ptr(q, name), 2, False))
        else:
            out += _schema(kw, dep, _ptr(q, name), 2)
    return out


# Every keyword the compiler reads, and the kind of value it must hold.
KEYWORDS: dict[str, Kind] = {
    "type": _type,
    "enum": _enum,
    "const": _plain,
    "allOf": _alternatives,
    "anyOf": _alternatives,
    "oneOf": _alternatives,
    "not": _schema,
    "if": _schema,
    "then": _schema,
    "else": _schema,
    "$ref": _string,
    "$schema": _string,
    "$id": _string,
    "$dynamicRef": _string,
    "$recursiveRef": _string,
    "$defs": _schema_map,
    "definitions": _schema_map,
    "properties": _schema_map,
    "patternProperties": _schema_map,
    "dependentSchemas": _schema_map,
    "additionalProperties": _schema,
    "propertyNames": _schema,
    "unevaluatedProperties": _schema,
    "required": _names,
    "dependentRequired": _dependent_required,
    "dependencies": _dependencies,
    "minProperties": _count,
    "maxProperties": _count,
    "items": _items,
    "prefixItems": _prefix,
    "additionalItems": _schema,
    "unevaluatedItems": _schema,
    "contains": _schema,
    "minItems": _count,
    "maxItems": _count,
    "minContains": _count,
    "maxContains": _count,
    "uniqueItems": _flag,
    "minLength": _count,
    "maxLength": _count,
    "pattern": _string,
    "format": _string,
    "minimum": _number,
    "maximum": _number,
    "exclusiveMinimum": _bound,
    "exclusiveMaximum": _bound,
    "multipleOf": _positive,
}

# keywords whose array length is a number of alternatives
_ALTERNATIVES = ("enum", "anyOf", "oneOf")


def check_document(schema: Any, limits: Limits, pointer: str = "#",
                   checked: set[int] | None = None) -> None:
    """Check that ``schema`` is a JSON document and a well-formed schema (see the module
    docstring); ``pointer`` names its root in errors. The ids of the schema objects
    checked are added to ``checked``; those already in it are not walked again (the
    caller keeps the objects alive).

    Raises:
        SchemaError: the first ill-formed value, at its JSON pointer.
        LimitError: the document is too deep, too large or has too many alternatives.
    """
    max_depth, max_chars, max_alts = limits.max_json_depth, limits.max_text_chars, limits.max_alternatives
    # (value, pointer, JSON depth, is a schema); popped in document order. Strings, numbers,
    # booleans and null are checked where they are met (no entry, no pointer built) unless
    # they are too deep, which the popping side reports.
    stack: list[tuple[Any, Ptr, int, bool]] = [(schema, pointer, 1, True)]
    size = 0
    steps = 0
    while stack:
        v, p, depth, is_schema = stack.pop()
        steps += 1
        if not steps & 4095:
            check_deadline(_str(p))
        if depth > max_depth:
            raise LimitError("max_json_depth", depth, max_depth, _str(p))
        size += 1
        # containers first (most values are schema objects); a dict or a list is never
        # also a str, int or float (their layouts conflict), so the order is free
        if isinstance(v, dict):
            size += len(v)
            if not is_schema:
                n, later = _members(v.items(), p, depth, depth >= max_depth, True)
                size += n
                stack.extend(reversed(later))
            else:
                if checked is not None:
                    if id(v) in checked:
                        continue
                    checked.add(id(v))
                todo: Next = []
                for kw, x in v.items():
                    if type(kw) is not str or not kw.isascii():
                        _key(kw, p)
                    kind = KEYWORDS.get(kw)
                    if kind is _type and type(x) is str and x in _TYPE_NAMES:
                        continue  # the most common keyword, checked here
                    if kind is None and type(x) is str and depth < max_depth:
                        # an annotation ("description", "title", ...): checked here
                        if not x.isascii():
                            _text(x, _ptr(p, kw))
                        size += 1 + len(x)
                        continue
                    q: Ptr = (p, kw)  # (``_ptr``)
                    if kind is None:
                        todo.append((x, q, 1, False))
                        continue
                    if kw in _ALTERNATIVES and isinstance(x, list) and len(x) > max_alts:
                        raise LimitError("max_alternatives", len(x), max_alts, _str(q))
                    todo += kind(kw, x, q)
                for x, q, levels, sch in reversed(todo):
                    stack.append((x, q, depth + levels, sch))
        elif isinstance(v, list):
            size += len(v)
            n, later = _members(enumerate(v), p, depth, depth >= max_depth, False)
            size += n
            stack.extend(reversed(later))
        elif isinstance(v, str):
            size += len(v)
            if not v.isascii():
                _text(v, p)
        elif isinstance(v, bool) or v is None:
            pass
        elif isinstance(v, int):
            if v.bit_length() > _MAX_INT_BITS:
                raise SchemaError(f"an integer of more than {MAX_INT_DIGITS} digits is too large", _str(p))
        elif isinstance(v, float):
            if v != v:
                raise SchemaError("NaN is no JSON number", _str(p))
            if math.isinf(v):
                raise SchemaError(f"{v!r} is no JSON number", _str(p))
        else:
            raise SchemaError(f"{_show(v)} is not a JSON value ({type(v).__name__})", _str(p))
        if size > max_chars:
            raise LimitError("max_text_chars", f"more than {size}", max_chars, _str(p))
