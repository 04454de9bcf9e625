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
from dataclasses import dataclass
from typing import Any

from tether import regex as rx
from tether.errors import LimitError, SchemaError, TetherError, limited
from tether.grammar.ir import NT, Grammar, Rule, T, Terminal
from tether.grammar.json_schema import numbers as num
from tether.grammar.json_schema.canonical import reorder
from tether.grammar.json_schema.check import check_document
from tether.grammar.json_schema.combinators import alternatives
from tether.grammar.json_schema.context import DEFAULT_BASE, Context, Draft, Member, PropertyOrder
from tether.grammar.json_schema.layout import Layout, Spec, Whitespace
from tether.grammar.json_schema.prune import prune
from tether.grammar.json_schema.references import flatten, index_document
from tether.limits import Limits, check_deadline, current, deadline


class SchemaCompiler(Context):
    """A ``Context`` over one document (checked and indexed) with the recursive step."""

    def __init__(self, schema: Any, **options: Any) -> None:
        super().__init__(schema, **options)
        self.pending: set[str] = set()  # names of the nodes being built
        self.recursive: set[str] = set()  # those of them a rule refers to already
        self.depth_matters = self.layout.depth_matters
        check_document(schema, self.limits, "#", self.checked)
        index_document(self, schema, DEFAULT_BASE, "#")

    def node(self, members: list[Member], depth: int, consumed: frozenset[Any] = frozenset()) -> str | None:
        """The nonterminal for the conjunction ``members`` at ``depth``; None if empty.

        Nodes nest (a property's value inside its object, a branch inside its ``anyOf``)
        at most ``Limits.max_nesting`` deep, else LimitError at the innermost pointer.
        """
        if not self.depth_matters:
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
        shapes: tuple[int, ...]
        if len(flat) == 1:  # most conjunctions: no set to build and sort
            shapes = (self.shape(flat[0][0]),)
        else:
            shapes = tuple(sorted({self.shape(s) for s, _ in flat}))
        key = (shapes, consumed, depth)
        found = self.memo.get(key, _UNSEEN)
        if found is not _UNSEEN:
            if found in self.pending:  # a recursive reference to a node being built
                self.recursive.add(found)
            return found
        where = members[-1][1] if members else "#"
        check_deadline(where)
        if len(self.path) >= self.limits.max_nesting:
            raise LimitError("max_nesting", len(self.path) + 1, self.limits.max_nesting, where)
        if key == _ANY_KEY and type(self) is SchemaCompiler:
            replay = _any_value(self)
            if replay is not None:
                return replay.into(self, key, where)
        name = self.fresh("v")
        self.memo[key] = name  # recursion sees the name (assumed non-empty)
        self.pending.add(name)
        self.path.append(where)
        alts = alternatives(self, flat, depth, consumed)
        self.path.pop()  # (left in place by an error: the innermost place is reported)
        self.pending.discard(name)
        if not alts:
            self.memo[key] = None
            return None
        if len(alts) == 1 and len(alts[0]) == 1 and type(alts[0][0]) is NT and name not in self.recursive:
            # one nonterminal (an object's, an array's, a single branch's) and no
            # reference to this node's name yet: the node is that nonterminal (no unit rule)
            found = self.memo[key] = alts[0][0].name
            return found
        rules, max_rules = self.g.rules, self.max_rules
        for rhs in alts:  # ``Context.rule`` of each
            rules.append(Rule(name, tuple(rhs)))
            if len(rules) > max_rules:
                self.too_many_rules()
        return name


_UNSEEN = "<unseen>"  # ``memo.get``'s default (None is a memoized empty node; no name is this object)

# The empty conjunction: any JSON value (an object's further properties, an array's
# items, ``{}``), at depth 0 (a layout whose depth does not matter).
_ANY_KEY: tuple[Any, ...] = ((), frozenset(), 0)


@dataclass(frozen=True)
class _Replay:
    """What building the node of ``_ANY_KEY`` does to a compile, to do it again in another.

    The node is self-contained (its only nodes are itself), and what it makes depends on
    the options alone: the fresh names it asks for (by hint, in order; a fresh name is its
    hint and the compile's count), the terminals (by spec and hint, in order of first use;
    a new terminal's name is its hint and the count of terminals) and the rules, over
    those. ``into`` asks for the same names and terminals in the same order and appends
    the same rules, each through ``Context.rule`` (``max_rules``, with the pointer the
    build would name), so the grammar is the one the build would make there.
    """

    hints: tuple[str, ...]  # the node's own first
    terms: tuple[tuple[Spec, str], ...]
    # the rules in order, (lhs, rhs): the lhs an index into the fresh names, each symbol of
    # the rhs an index into the terminals then the names (``len(terms) + k``: name ``k``)
    rules: tuple[tuple[int, tuple[int, ...]], ...]
    n_inner: int  # the first ``n_inner`` rules are the inner nodes'; then the node's own

    def into(self, c: SchemaCompiler, key: tuple[Any, ...], where: str) -> str:
        names = [c.fresh(h) for h in self.hints]
        c.memo[key] = names[0]
        syms: list[NT | T] = [c.term(spec, hint) for spec, hint in self.terms]
        syms += [NT(name) for name in names]
        at = syms.__getitem__
        rules = c.g.rules
        if len(rules) + len(self.rules) <= c.max_rules:  # no limit met: appended at once
            rules += [Rule(names[lhs], tuple(map(at, rhs))) for lhs, rhs in self.rules]
            return names[0]
        c.path.append(where)  # the rule past max_rules raises, naming the build's pointer
        for k, (lhs, rhs) in enumerate(self.rules):
            if k == self.n_inner:
                c.path.pop()
            c.rule(names[lhs], *map(at, rhs))
        return names[0]


class _Recorder(SchemaCompiler):
    """A compile of ``{}`` that records its fresh names and new terminals (``_any_value``)."""

    def __init__(self, schema: Any, **options: Any) -> None:
        super().__init__(schema, **options)
        self.hints: list[str] = []
        self.new_terms: list[tuple[Spec, str]] = []

    def fresh(self, hint: str) -> str:
        self.hints.append(hint)
        return super().fresh(hint)

    def term(self, spec: Spec, hint: str = "t") -> T:
        n = len(self.terms)
        t = super().term(spec, hint)
        if len(self.terms) > n:
            node = self.g.terminals[t.name].node
            # the spec with the node the terminal got (``nodes.spec_node`` reads it): a
            # replay builds the same terminal without looking the node up again; not a
            # ``LazyNode`` (a build hands a new one, or the node once it is built)
            built = isinstance(node, rx.Node)
            self.new_terms.append(((spec[0], spec[1], node) if built else spec, hint))
        return t


_ANY_VALUE: dict[Any, _Replay | None] = {}


def _any_value(c: SchemaCompiler) -> _Replay | None:
    """The ``_Replay`` of the any-value node under ``c``'s options (built once for them);
    None where building it raises or warns (the compile then builds it itself)."""
    options = dict(layout=c.layout, property_order=c.order, lenient=c.lenient, draft=c.draft,
                   max_repeat=c.max_repeat, max_rules=c.max_rules, max_depth=c.max_depth,
                   max_expansion=c.max_expansion, closed=c.closed, number_bounds=c.number_bounds,
                   limits=c.limits)
    if c.layout.depth_matters:
        return None
    try:
        key = tuple(options.values())
        hash(key)
    except TypeError:
        return None
    if key in _ANY_VALUE:
        return _ANY_VALUE[key]
    found: _Replay | None = None
    try:
        r = _Recorder({}, resolve_remote=None, **options)
        name = r.node([], 0)
    except TetherError:
        name = None
    if name is not None and not r.g.warnings and len(r.memo) == 1:
        index = {f"{h}_{i}": i for i, h in enumerate(r.hints, 1)}
        term_index = {t.name: i for i, t in enumerate(r.terms.values())}

        n_terms = len(r.new_terms)

        def syms(rhs: tuple[Any, ...]) -> tuple[int, ...]:
            return tuple(term_index[x.name] if isinstance(x, T) else n_terms + index[x.name] - 1
                         for x in rhs)

        n_inner = sum(1 for rule in r.g.rules if rule.lhs != name)
        if (all(rule.lhs != name for rule in r.g.rules[:n_inner]) and index.get(name) == 1
                and all(x.name in index or x.name in term_index for rule in r.g.rules for x in rule.rhs)
                and all(rule.lhs in index for rule in r.g.rules)):
            found = _Replay(tuple(r.hints), tuple(r.new_terms),
                            tuple((index[rule.lhs] - 1, syms(rule.rhs)) for rule in r.g.rules), n_inner)
    if len(_ANY_VALUE) >= 64:
        _ANY_VALUE.clear()
    _ANY_VALUE[key] = found
    return found


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
    if not any(r.lhs == "root" for r in reversed(c.g.rules)):  # the last rule, when kept
        raise SchemaError("the schema allows no finite value", "#")
    return c.g


def _check_whitespace_pattern(pattern: str) -> None:
    """ValueError unless ``pattern`` is a regex matching only JSON whitespace."""
    if not isinstance(pattern, str):
        raise ValueError(f"whitespace_pattern must be a regex string; got {limited(pattern)}")
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
