"""Python types → JSON Schema → Grammar, and typed values back from the generated text.

1. ``schema_of(x)`` gives the JSON Schema of a Pydantic model, a dataclass, a
   ``TypedDict``, ``Literal``, ``Enum``, ``list[...]``, ``dict[str, X]``, ``tuple[...]``,
   ``Optional``/``Union`` or a plain ``int``/``float``/``str``/``bool``/``None`` — through
   Pydantic's ``TypeAdapter`` when Pydantic is installed, else by a small built-in mapping.
2. ``grammar_of(x, **options)`` compiles it (``compile_json_schema``).
3. ``parse_value(x, text)`` parses the generated JSON back into a validated instance of
   ``x`` (a model instance, a dataclass, an Enum member, ...).

Objects are *closed* by default (``closed=True``): a model ignores or rejects keys it does
not declare, so the grammar does not generate any (``additionalProperties: false`` is added
where the type says nothing, and ``grammar_of`` compiles with ``closed=True``); models that
declare ``extra="allow"`` stay open, ``extra="forbid"`` and the default (``"ignore"``) are
closed. ``closed=False`` keeps the specification's open objects.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import Any

from tether.errors import SchemaError

_PRIMITIVES: dict[Any, dict[Any, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    None: {"type": "null"},
}


def _has_pydantic() -> bool:
    try:
        import pydantic  # noqa: F401
    except ImportError:
        return False
    return True


def schema_of(x: Any, *, closed: bool = True) -> dict[Any, Any]:
    """The JSON Schema (draft 2020-12) of the Python type ``x``.

    A dict is returned unchanged (it is already a schema).

    Raises:
        SchemaError: ``x`` is not a type tether (or Pydantic) can describe.
    """
    if isinstance(x, dict):
        return x
    if _has_pydantic():
        from pydantic import TypeAdapter
        from pydantic.errors import PydanticUserError

        try:
            schema = TypeAdapter(x).json_schema()
        except (PydanticUserError, TypeError, ValueError) as exc:
            # e.g. typing.TypedDict before Python 3.12: the built-in mapping may still work
            try:
                return _plain_schema_root(x, closed)
            except SchemaError:
                raise SchemaError(f"cannot describe {_name(x)} as JSON Schema: {exc}") from None
        if closed:
            _close(schema, _open_models(x))
        return schema
    return _plain_schema_root(x, closed)


def _plain_schema_root(x: Any, closed: bool) -> dict[Any, Any]:
    defs: dict[str, dict[Any, Any]] = {}
    schema = _plain_schema(x, defs, closed)
    if defs:
        schema = {**schema, "$defs": defs}
    return schema


def grammar_of(x: Any, *, closed: bool = True, **options: Any):  # type: ignore[no-untyped-def]
    """``compile_json_schema(schema_of(x, closed=closed), closed=closed, **options)``.

    ``closed`` (default True) closes the objects the type declares (see the module
    docstring) and every other object schema with ``properties`` and nothing said of
    other keys; a Pydantic model with ``extra="allow"`` (``additionalProperties: true``)
    or a ``dict[str, X]`` stays open. The other options are ``compile_json_schema``'s
    (``bounded_numbers=``, ``whitespace=``, ``whitespace_pattern=``, ``property_order=``...).
    """
    from tether.grammar.json_schema import compile_json_schema

    return compile_json_schema(schema_of(x, closed=closed), closed=closed, **options)


def parse_value(x: Any, text: str | bytes) -> Any:
    """Parse JSON ``text`` into a validated value of type ``x``.

    Raises:
        ValueError: the text is not JSON or does not validate (Pydantic's
            ``ValidationError`` is a ``ValueError``).
    """
    if isinstance(x, dict):
        value = json.loads(text)
        try:
            import jsonschema
        except ImportError:
            return value
        try:
            jsonschema.validate(value, x)
        except jsonschema.ValidationError as exc:
            raise ValueError(f"the value does not validate: {exc.message}") from None
        return value
    if _has_pydantic():
        from pydantic import TypeAdapter
        from pydantic.errors import PydanticUserError

        try:
            adapter = TypeAdapter(x)
        except PydanticUserError:
            adapter = None
        if adapter is not None:
            return adapter.validate_json(text)
    return _build(x, json.loads(text))


# --------------------------------------------------------------------------- Pydantic helpers


def _open_models(x: Any) -> set[str]:
    """Titles of Pydantic models reachable from ``x`` that allow extra keys."""
    out: set[str] = set()
    seen: set[int] = set()

    def visit(t: Any) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        cfg = getattr(t, "model_config", None)
        if isinstance(cfg, dict):
            if cfg.get("extra") == "allow":
                out.add(cfg.get("title") or t.__name__)
            for f in getattr(t, "model_fields", {}).values():
                visit(f.annotation)
        for a in typing.get_args(t):
            visit(a)

    visit(x)
    return out


def _close(schema: Any, open_titles: set[str]) -> None:
    """Add ``additionalProperties: false`` to object schemas that declare properties."""
    if isinstance(schema, dict):
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and "patternProperties" not in schema
            and schema.get("title") not in open_titles
        ):
            schema["additionalProperties"] = False
        for v in schema.values():
            _close(v, open_titles)
    elif isinstance(schema, list):
        for v in schema:
            _close(v, open_titles)


# --------------------------------------------------------------------------- without Pydantic


def _name(x: Any) -> str:
    return getattr(x, "__name__", None) or repr(x)


def _plain_schema(x: Any, defs: dict[str, dict[Any, Any]], closed: bool) -> dict[Any, Any]:
    if x in _PRIMITIVES:
        return dict(_PRIMITIVES[x])
    origin = typing.get_origin(x)
    args = typing.get_args(x)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_plain_schema(a, defs, closed) for a in args]}
    if origin in (list, typing.List, set, frozenset):  # noqa: UP006
        return {"type": "array", "items": _plain_schema(args[0], defs, closed) if args else {}}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _plain_schema(args[0], defs, closed)}
        items = [_plain_schema(a, defs, closed) for a in args]
        return {"type": "array", "prefixItems": items, "items": False,
                "minItems": len(items), "maxItems": len(items)}
    if origin is dict:
        if args and args[0] is not str:
            raise SchemaError(f"dict keys must be str for JSON, got {_name(args[0])}")
        return {"type": "object", "additionalProperties": _plain_schema(args[1], defs, closed) if args else {}}
    if isinstance(x, type) and issubclass(x, enum.Enum):
        return {"enum": [m.value for m in x]}
    if dataclasses.is_dataclass(x) and isinstance(x, type):
        return _ref(x, defs, closed, _dataclass_schema)
    if isinstance(x, type) and typing.is_typeddict(x):
        return _ref(x, defs, closed, _typeddict_schema)
    if x is Any:
        return {}
    raise SchemaError(f"cannot describe {_name(x)} as JSON Schema (install pydantic for more types)")


def _ref(x: type, defs: dict[str, dict[Any, Any]], closed: bool, build) -> dict[Any, Any]:  # type: ignore[no-untyped-def]
    name = x.__name__
    if name not in defs:
        defs[name] = {}  # placeholder: recursive types refer to it
        defs[name] = build(x, defs, closed)
    return {"$ref": f"#/$defs/{name}"}


def _dataclass_schema(x: type, defs: dict[str, dict[Any, Any]], closed: bool) -> dict[Any, Any]:
    hints = typing.get_type_hints(x)
    props, required = {}, []
    for f in dataclasses.fields(x):
        props[f.name] = _plain_schema(hints[f.name], defs, closed)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    out: dict[Any, Any] = {"type": "object", "properties": props, "required": required}
    if closed:
        out["additionalProperties"] = False
    return out


def _typeddict_schema(x: type, defs: dict[str, dict[Any, Any]], closed: bool) -> dict[Any, Any]:
    hints = typing.get_type_hints(x)
    props = {k: _plain_schema(v, defs, closed) for k, v in hints.items()}
    req = [k for k in hints if k in getattr(x, "__required_keys__", set(hints))]
    out: dict[Any, Any] = {"type": "object", "properties": props, "required": req}
    if closed:
        out["additionalProperties"] = False
    return out


def _build(x: Any, v: Any) -> Any:
    """Turn decoded JSON ``v`` into a value of ``x`` (no Pydantic; light checks)."""
    if x in (None, type(None)):
        if v is not None:
            raise ValueError(f"expected null, got {v!r}")
        return None
    if x in (int, float, str, bool):
        if x is float and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if not isinstance(v, x) or (x is int and isinstance(v, bool)):
            raise ValueError(f"expected {x.__name__}, got {v!r}")
        return v
    origin, args = typing.get_origin(x), typing.get_args(x)
    if origin is typing.Literal:
        if v not in args:
            raise ValueError(f"expected one of {args!r}, got {v!r}")
        return v
    if origin in (typing.Union, types.UnionType):
        for a in args:
            try:
                return _build(a, v)
            except ValueError:
                continue
        raise ValueError(f"{v!r} matches no member of {x!r}")
    if origin in (list, set, frozenset):
        return origin(_build(args[0], i) if args else i for i in v)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], i) for i in v)
        return tuple(_build(a, i) for a, i in zip(args, v, strict=True))
    if origin is dict:
        return {k: _build(args[1], i) if args else i for k, i in v.items()}
    if isinstance(x, type) and issubclass(x, enum.Enum):
        return x(v)
    if dataclasses.is_dataclass(x) and isinstance(x, type):
        hints = typing.get_type_hints(x)
        return x(**{k: _build(hints[k], i) for k, i in v.items() if k in hints})
    if isinstance(x, type) and typing.is_typeddict(x):
        hints = typing.get_type_hints(x)
        return {k: _build(hints[k], i) for k, i in v.items() if k in hints}
    return v


__all__ = ["grammar_of", "parse_value", "schema_of"]
