"""JSON Schema (draft 2020-12, 2019-09, draft-07/06/04) → Grammar IR.

1. **Resolve** (``references.py``). The document is indexed once (``$id``/``id``,
   ``$anchor``, JSON pointers); a subschema is compiled as a *conjunction* of schema
   objects: ``$ref`` targets and ``allOf`` branches are added to the conjunction (a
   repeated member is skipped, so recursive references cannot loop), ``anyOf``/``oneOf``
   are distributed over it (``combinators.py``: each branch joins the conjunction; the
   union of the branches is the result).
2. **Merge per type** (``per_type.py``). For each JSON type the conjunction allows, its
   keywords are merged exactly (bounds intersected, ``number_keywords.py``; properties
   merged with each member's own ``additionalProperties``/``patternProperties`` reading,
   ``object_keywords.py``; items, ``array_keywords.py``; string constraints intersected
   as regex ``and`` terminals, ``string_keywords.py``; ``not``, ``negation.py``).
3. **Emit.** Each conjunction becomes a nonterminal (``SchemaCompiler.node``, memoized);
   lexemes are large (``{"name":``, a whole string or number) so the engine sees few,
   regular lexemes; unusable rules are pruned (``prune.py``).

What cannot be enforced raises ``UnsupportedSchemaError`` naming the keyword and pointer,
or, with ``lenient=True``, is ignored and recorded in ``Grammar.warnings``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tether.errors import LimitError, SchemaError, limited
from tether.grammar.ir import NT, Grammar, Terminal
from tether.grammar.json_schema import numbers as num
from tether.grammar.json_schema.canonical import reorder
from tether.grammar.json_schema.check import check_document
from tether.grammar.json_schema.combinators import alternatives
from tether.grammar.json_schema.context import DEFAULT_BASE, Context, Draft, Member, PropertyOrder
from tether.grammar.json_schema.layout import Layout, Whitespace
from tether.grammar.json_schema.prune import prune
from tether.grammar.json_schema.references import flatten, index_document
from tether.limits import Limits, check_deadline, current, deadline


class SchemaCompiler(Context):
    """A ``Context`` over one document (checked and indexed) with the recursive step."""

    def __init__(self, schema: Any, **options: Any) -> None:
        super().__init__(schema, **options)
        check_document(schema, self.limits, "#", self.checked)
        index_document(self, schema, DEFAULT_BASE, "#")

    def node(self, members: list[Member], depth: int, consumed: frozenset[Any] = frozenset()) -> str | None:
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
        flat = flatten(self, members)
        if flat is None:
            return None
        key = (tuple(sorted({self.shape(s) for s, _ in flat})), consumed, depth)
        if key in self.memo:
            return self.memo[key]
        where = members[-1][1] if members else "#"
        check_deadline(where)
        if len(self.path) >= self.limits.max_nesting:
            raise LimitError("max_nesting", len(self.path) + 1, self.limits.max_nesting, where)
        name = self.fresh("v")
        self.memo[key] = name  # recursion sees the name (assumed non-empty)
        self.path.append(where)
        alts = alternatives(self, flat, depth, consumed)
        self.path.pop()  # (left in place by an error: the innermost place is reported)
        if not alts:
            self.memo[key] = None
            return None
        for rhs in alts:
            self.rule(name, *rhs)
        return name


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
    c: SchemaCompiler | None = None
    try:
        with deadline("JSON Schema compile"):
            c = SchemaCompiler(
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
            prune(c.g)
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
            c = SchemaCompiler(schema, layout=Layout(whitespace, indent), property_order=property_order,
                               lenient=True, draft=draft, max_repeat=0, max_rules=0, max_depth=0,
                          max_expansion=10_000, resolve_remote=None)
            value = reorder(c, [(schema, "#")], value)
        except (SchemaError, LimitError, RecursionError):
            pass
    return Layout(whitespace, indent).dumps(value)


__all__ = ["compile_json_schema", "dumps_for"]
