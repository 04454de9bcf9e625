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
``OutputSpec``            itself (lowered once, kept)         as it says
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
from tether.grammar.ir import Flavor
from tether.regex import Regex

Kind = Literal["text", "regex", "choices", "json", "pydantic", "type", "grammar", "triggered"]


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


def regex_grammar(pattern: str, flavor: Flavor = "python") -> Grammar:
    """A one-terminal grammar for ``pattern`` (`Grammar.from_regex`)."""
    return Grammar.from_regex(pattern, flavor=flavor)


def choices_grammar(options: list[str]) -> Grammar:
    """One of ``options`` exactly (`Grammar.from_choices`)."""
    if not options:
        raise ConstraintError("a choice needs at least one option")
    return Grammar.from_choices(options)


WHITESPACE_NAMES = ("compact", "flexible", "pretty")


@dataclass(frozen=True)
class OutputOptions:
    """How a schema output (JSON Schema dict, Pydantic model, Python type) is compiled for
    generation. See `schema_options`.

    Attributes:
        strict: closed objects and bounded numbers (default True); False gives the
            specification's language (open objects, numbers of any length).
        whitespace: ``"compact"`` (default: no whitespace, ``{"a":1}``), ``"flexible"``
            (up to 16 JSON whitespace characters around every ``{ } [ ] , :``),
            ``"pretty"`` (``json.dumps(v, indent=2)`` layout), or ``regex("...")``: that
            pattern (JSON whitespace only, e.g. ``regex("[ ]?")``) in every gap.
        number_bounds: digit bounds of numbers the schema leaves unbounded; None: the
            default ``NumberBounds()`` (19 integer digits, 17 fraction digits, 3 exponent
            digits) when ``strict``, no bound otherwise. A schema's own bounds win.
    """

    strict: bool = True
    whitespace: str | Regex = "compact"
    number_bounds: Any = None  # NumberBounds | None (tether.grammar.json_schema)


def check_output_options(strict: Any = True, whitespace: Any = "compact", number_bounds: Any = None,
                         *, where: str = "") -> OutputOptions:
    """`OutputOptions` from user arguments; ArgumentError names a bad one."""
    from tether.decoding.decoders import check_bool
    from tether.errors import ArgumentError
    from tether.grammar.json_schema import NumberBounds

    check_bool(f"{where}strict", strict)
    if isinstance(whitespace, Regex):
        check_regex(whitespace)
    elif not isinstance(whitespace, str) or whitespace not in WHITESPACE_NAMES:
        raise ArgumentError(f"{where}whitespace", whitespace,
                            "'compact', 'flexible', 'pretty' or tether.program.regex(<a JSON whitespace pattern>)")
    if number_bounds is not None and not isinstance(number_bounds, NumberBounds):
        raise ArgumentError(f"{where}number_bounds", number_bounds, "None or a NumberBounds(...)")
    return OutputOptions(strict, whitespace, number_bounds)


DEFAULT_OPTIONS = OutputOptions()


def schema_options(kind: Kind, options: OutputOptions = DEFAULT_OPTIONS) -> dict[str, Any]:
    """The JSON Schema compile options of generation-side outputs, by output kind.

    This is the one place where ``generate``, Program holes and typed outputs choose how
    a schema is compiled (`Grammar.from_json_schema` options); every schema output goes
    through `json_grammar`, which applies them. Generation defaults (``strict=True``):

    * closed objects (``closed=True``): an object schema with ``properties`` and nothing
      said of other keys admits only its declared keys, each at most once; an explicit
      ``additionalProperties`` (a Pydantic model with ``extra="allow"``) stays as written;
    * bounded numbers (``bounded_numbers``): at most 19 integer digits, 17 fraction digits
      and 3 exponent digits where the schema leaves a number unbounded (``number_bounds=``
      chooses others; the schema's own bounds win);
    * compact whitespace (``whitespace="compact"``).

    ``strict=False`` is the specification's language (the front end's defaults: open
    objects, unbounded numbers). Validation-side grammars (`Grammar.from_json_schema`
    called directly) keep the front end's spec-faithful defaults.
    """
    opts: dict[str, Any] = {}
    if options.strict:
        opts["closed"] = True
        opts["bounded_numbers"] = True
    if options.number_bounds is not None:
        opts["bounded_numbers"] = options.number_bounds
    if isinstance(options.whitespace, Regex):
        opts["whitespace_pattern"] = options.whitespace.pattern
    elif options.whitespace != "compact":
        opts["whitespace"] = options.whitespace
    return opts


def json_grammar(schema: dict[str, Any] | bool, kind: Kind = "json", options: OutputOptions = DEFAULT_OPTIONS) -> Grammar:
    """The grammar of a schema output, compiled with `schema_options` for ``kind``."""
    try:
        return Grammar.from_json_schema(schema, **schema_options(kind, options))
    except TetherError:
        raise
    except ValueError as exc:  # an option the front end refuses (a whitespace pattern that is not whitespace)
        raise ConstraintError(f"cannot compile the schema output: {limited(str(exc), 300)}") from exc


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


def _typed_spec(output: Any, options: OutputOptions) -> OutputSpec | None:
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
            schema = pytypes.schema_of(output, closed=options.strict)
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
    return OutputSpec(kind, json_grammar(schema, kind, options), parse, schema=schema,
                      extra={"whitespace": options.whitespace})


def output_spec(output: Any, options: OutputOptions = DEFAULT_OPTIONS) -> OutputSpec:
    """Lower ``output`` (see the module table; schema outputs compiled with ``options``).
    Raises ConstraintError for other objects. An `OutputSpec` (already lowered: what a
    `tether.program.generator.Generator` keeps) is returned as it is."""
    if isinstance(output, OutputSpec):
        return output
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
        return OutputSpec("json", json_grammar(output, "json", options), json.loads,
                          schema=output if isinstance(output, dict) else None, extra={"whitespace": options.whitespace})
    typed = _typed_spec(output, options)
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


def _trigger_terminal(name: str, trigger: str, triggers: list[str]) -> Terminal:
    """Free text that ends with ``trigger`` at the first place where any of ``triggers``
    ends: (any text + trigger) minus (any text + a trigger + one or more characters).
    The language is prefix-free, so the lexeme ends exactly there."""
    from tether import regex as rx
    from tether.grammar.ir import set_operation
    from tether.grammar.regexgen import escape_literal

    any_trigger = "(?:" + "|".join(escape_literal(t) for t in triggers) + ")"
    anything = rx.star(rx.ANY_CHAR)
    ends = rx.concat(anything, rx.literal(trigger.encode("utf-8")))
    passed = rx.concat(anything, rx.alt(*(rx.literal(t.encode("utf-8")) for t in triggers)), rx.plus(rx.ANY_CHAR))
    return Terminal(name, expr=("and", "(?s:.)*" + escape_literal(trigger), ("not", "(?s:.)*" + any_trigger + "(?s:.)+")),
                    lazy=True, node=set_operation("and", [ends, set_operation("not", [passed])]))


def triggered_spec(after: Any, output: Any, options: OutputOptions = DEFAULT_OPTIONS) -> OutputSpec:
    """A triggered region: free text up to the first trigger, then the trigger's output.

    ``after`` is a trigger string (then ``output``), a list of them (each followed by
    ``output``) or a dict ``{trigger: output}`` (then ``output`` must be None). The free
    text cannot contain a trigger, so the first trigger to appear picks the output. The
    value is the parsed constrained part (what follows the trigger).

    Raises:
        ArgumentError: ``after`` is not one of those, a trigger is empty, or one trigger
            ends another (``"think>"`` and ``"</think>"``: which one appeared would be
            ambiguous).
    """
    from tether.errors import ArgumentError

    if isinstance(after, str):
        table: dict[str, Any] = {after: output}
    elif isinstance(after, list | tuple):
        table = {t: output for t in after}
        if not all(isinstance(t, str) for t in after):
            raise ArgumentError("after", after, "a trigger string, a list of them or a dict {trigger: output}")
    elif isinstance(after, dict):
        if output is not None:
            raise ArgumentError("output", output, "None when after= is a dict {trigger: output} (each trigger has its own)")
        table = dict(after)
    else:
        raise ArgumentError("after", after, "a trigger string, a list of them or a dict {trigger: output}")
    if not table:
        raise ArgumentError("after", after, "at least one trigger")
    limits.check("max_alternatives", len(table), "after (triggers)")
    triggers = list(table)
    for t in triggers:
        if not isinstance(t, str) or not t:
            raise ArgumentError("after", t, "a non-empty trigger string")
        limits.check("max_prompt_chars", len(t), "after (trigger)")
        for u in triggers:
            if u != t and u.endswith(t):
                raise ArgumentError("after", after, f"triggers where none ends another ({u!r} ends with {t!r})")
    specs = {t: output_spec(o, options) for t, o in table.items()}
    branches = []
    for i, (t, spec) in enumerate(specs.items()):
        head = Grammar(start="start")
        head.add_rule("start", head.add_terminal(_trigger_terminal(f"AFTER{i}", t, triggers)))
        body = spec.grammar if spec.grammar is not None else regex_grammar("(?s:.)*")
        branches.append(Grammar.sequence(head, body))
    grammar = branches[0] if len(branches) == 1 else Grammar.union(*branches)

    def parse(text: str) -> Any:
        trigger, end = first_trigger(text, triggers)
        if trigger is None:
            raise ValueError(f"no trigger ({', '.join(map(repr, triggers))}) in the output")
        return specs[trigger].parse(text[end:])

    return OutputSpec("triggered", grammar, parse, extra={"after": specs})


def first_trigger(text: str, triggers: list[str]) -> tuple[str | None, int]:
    """The trigger that ends first in ``text`` and where it ends; (None, -1) if none does."""
    best: tuple[str | None, int] = (None, -1)
    for t in triggers:
        i = text.find(t)
        if i >= 0 and (best[0] is None or i + len(t) < best[1]):
            best = (t, i + len(t))
    return best


__all__ = ["OutputOptions", "OutputSpec", "check_output_options", "first_trigger", "triggered_spec", "Regex", "choices_grammar", "output_spec", "regex", "regex_grammar"]
