"""What ``output=`` may be, lowered to a Grammar plus a parser for the typed value.

========================  ==================================  =========================
``output``                constraint                          ``Generation.value``
========================  ==================================  =========================
``None``                  free text                           the text
``regex("...")``          the regex (full match)              the text
``["a", "b"]``            one of the strings                  the chosen string
JSON Schema ``dict``      the schema                          ``json.loads(text)``
Pydantic model class      its JSON Schema                     validated model instance
Python type (``int``,     its JSON Schema (pydantic's         validated value
``list[str]``, Literal…)  ``TypeAdapter``)
``Grammar``               the grammar                         the text
========================  ==================================  =========================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from tether import limits
from tether.errors import ConstraintError, MissingDependencyError, TetherError, limited
from tether.grammar import Grammar, Terminal
from tether.regex import Regex

Kind = Literal["text", "regex", "choices", "json", "pydantic", "type", "grammar"]


def regex(pattern: str, *, flavor: Literal["python", "ecma"] = "python") -> Regex:
    """Constrain the output to match ``pattern`` as a whole (full match).

    Raises ConstraintError when ``pattern`` is not a string or ``flavor`` is unknown
    (the pattern itself is parsed when the output is compiled: RegexError)."""
    return check_regex(Regex(pattern, flavor))


def check_regex(r: Regex) -> Regex:
    if not isinstance(r.pattern, str):
        raise ConstraintError(f"a regex pattern must be a string; got {type(r.pattern).__name__} {limited(r.pattern)}")
    if r.flavor not in ("python", "ecma"):
        raise ConstraintError(f"regex flavor must be 'python' or 'ecma'; got {limited(r.flavor)}")
    limits.check("max_text_chars", len(r.pattern), "regex pattern")
    return r


@dataclass
class OutputSpec:
    """A lowered ``output=``: the grammar (None = free text) and how to build the value."""

    kind: Kind
    grammar: Grammar | None
    parse: Callable[[str], Any]
    schema: dict[str, Any] | None = None
    choices: list[str] | None = None
    pattern: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def regex_grammar(pattern: str, flavor: str = "python") -> Grammar:
    """A one-terminal grammar for ``pattern`` (Grammar.from_regex when the front end exists)."""
    from_regex = getattr(Grammar, "from_regex", None)
    if from_regex is not None:
        return from_regex(pattern, flavor=flavor)  # type: ignore[no-any-return]
    g = Grammar(start="start")
    g.add_rule("start", g.add_terminal(Terminal("OUT", regex=pattern, flavor=flavor)))  # type: ignore[arg-type]
    return g


def choices_grammar(options: list[str]) -> Grammar:
    """One of ``options`` exactly (Grammar.from_choices when the front end exists)."""
    if not options:
        raise ConstraintError("a choice needs at least one option")
    from_choices = getattr(Grammar, "from_choices", None)
    if from_choices is not None:
        return from_choices(options)  # type: ignore[no-any-return]
    g = Grammar(start="start")
    for i, o in enumerate(dict.fromkeys(options)):
        if o == "":
            g.add_rule("start")
        else:
            g.add_rule("start", g.add_terminal(Terminal(f"C{i}", literal=o)))
    return g


def schema_options(kind: Kind) -> dict[str, Any]:
    """The JSON Schema compile options of generation-side outputs, by output kind.

    This is the one place where ``generate``, Program holes and typed outputs choose how
    a schema is compiled (`Grammar.from_json_schema` options); every schema output goes
    through `json_grammar`, which applies them. Today no option is set: the front end's
    defaults hold for ``"json"`` (a schema dict), ``"pydantic"`` and ``"type"`` outputs.
    """
    return {}


def json_grammar(schema: dict[str, Any] | bool, kind: Kind = "json") -> Grammar:
    """The grammar of a schema output, compiled with `schema_options` for ``kind``."""
    return Grammar.from_json_schema(schema, **schema_options(kind))  # type: ignore[attr-defined,no-any-return]


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError:
        raise MissingDependencyError("pydantic (for Pydantic models and Python types)", "pydantic") from None
    return pydantic


def _is_pydantic_model(obj: Any) -> bool:
    if not isinstance(obj, type):
        return False
    try:
        import pydantic
    except ImportError:
        return False
    return issubclass(obj, pydantic.BaseModel)


def _is_type_like(obj: Any) -> bool:
    import typing

    return isinstance(obj, type) or typing.get_origin(obj) is not None


def _typed_spec(output: Any) -> OutputSpec | None:
    """Pydantic models and Python types, through the grammar layer's ``pytypes`` (closed
    objects, typed parsing) when present, else through Pydantic directly."""
    if isinstance(output, str) or not (_is_pydantic_model(output) or _is_type_like(output)):
        return None
    kind: Kind = "pydantic" if _is_pydantic_model(output) else "type"
    try:
        from tether.grammar import pytypes
    except ImportError:
        pytypes = None  # type: ignore[assignment]
    try:
        if pytypes is not None:
            schema = pytypes.schema_of(output)
            parse: Callable[[str], Any] = lambda s: pytypes.parse_value(output, s)  # noqa: E731
        elif kind == "pydantic":
            schema, parse = output.model_json_schema(), output.model_validate_json
        else:
            adapter = _pydantic().TypeAdapter(output)
            schema, parse = adapter.json_schema(), adapter.validate_json
    except TetherError:
        raise
    except Exception as exc:  # noqa: BLE001 -- pydantic refusing the type
        raise ConstraintError(f"cannot use the type {limited(output)} as output: {type(exc).__name__}: "
                              f"{limited(str(exc), 300)}") from exc
    return OutputSpec(kind, json_grammar(schema, kind), parse, schema=schema)


def output_spec(output: Any) -> OutputSpec:
    """Lower ``output`` (see the module table). Raises ConstraintError for other objects."""
    if output is None:
        return OutputSpec("text", None, lambda s: s)
    if isinstance(output, Regex):
        check_regex(output)
        return OutputSpec("regex", regex_grammar(output.pattern, output.flavor), lambda s: s,
                          pattern=output.pattern, extra={"flavor": output.flavor})
    if isinstance(output, Grammar):
        return OutputSpec("grammar", output, lambda s: s)
    if isinstance(output, list | tuple) and all(isinstance(o, str) for o in output):
        opts = list(output)
        limits.check("max_alternatives", len(opts), "output (choices)")
        return OutputSpec("choices", choices_grammar(opts), lambda s: s, choices=opts)
    if isinstance(output, dict) or isinstance(output, bool):
        return OutputSpec("json", json_grammar(output), json.loads, schema=output if isinstance(output, dict) else None)
    typed = _typed_spec(output)
    if typed is not None:
        return typed
    if isinstance(output, str):
        raise ConstraintError(
            f"output={limited(output)} is a plain string: write tether.program.regex({limited(output)}) "
            "for a regex, or [..] for a list of choices"
        )
    raise ConstraintError(
        f"cannot use {type(output).__name__} {limited(output)} as output: expected None, "
        "tether.program.regex(...), a list of strings, a JSON Schema dict, a Pydantic model, "
        "a Python type or a Grammar"
    )


__all__ = ["OutputSpec", "Regex", "choices_grammar", "output_spec", "regex", "regex_grammar"]
