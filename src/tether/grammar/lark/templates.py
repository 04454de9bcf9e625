"""Lark rule templates (``_separated{x, sep}: x (sep x)*``, used as
``_separated{NAME, ","}``), instantiated after reading: one rule per distinct
(template, arguments), the template's body with its parameters replaced by the
arguments, within ``max_rules`` instances whose arguments stay within
``max_expanded`` symbols."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tether.errors import GrammarError, LimitError
from tether.grammar import bounds
from tether.grammar.ast import Alt, Gen, Node, Ref, Rep, Seq, SetOp, alt, seq, walk
from tether.grammar.ir import Grammar
from tether.grammar.simplify import did_you_mean
from tether.limits import current as current_limits


@dataclass(frozen=True)
class Template:
    """A rule template ``name{a, b}: body``."""

    params: tuple[str, ...]
    body: Node
    pos: int


@dataclass(frozen=True)
class Usage:
    """A use ``name{arg, ...}`` of a template, before instantiation."""

    template: str
    args: tuple[Node, ...]
    pos: int


def bounded_size(node: Node, maximum: int, text: str, pos: int, source: str) -> int:
    """The number of AST nodes in ``node``, counted up to ``maximum`` (LimitError past it:
    the cost of this walk and of hashing the node stays within the limit)."""
    n = 0
    for _ in walk(node):
        n += 1
        if n > maximum:
            raise LimitError("max_expanded", f"more than {maximum} symbols", maximum,
                             bounds.place(text, pos, source), detail="arguments of a rule template")
    return n


class TemplateSite(Protocol):
    """What template expansion reads and writes: the reader's definitions."""

    text: str
    source: str
    rules: dict[str, Node]
    terms: dict[str, Node]
    positions: dict[str, int]
    embedded: dict[str, Grammar]
    templates: dict[str, Template]
    usages: dict[str, Usage]

    def error(self, msg: str, pos: int) -> GrammarError: ...


def expand_templates(site: TemplateSite) -> None:
    """Replace every template use by a reference to its instance: one rule per
    distinct (template, arguments), the template's body with its parameters replaced
    by the arguments. Instances using templates are expanded from a worklist;
    ``max_rules`` bounds the number of instances and ``max_expanded`` the size of
    each instance's arguments (templates that grow their arguments stop there)."""
    if not site.usages:
        return
    lim = current_limits()
    instances: dict[tuple[str, tuple[Node, ...]], str] = {}
    todo: list[tuple[str, Template, dict[str, Node]]] = []

    def instance(use: Usage, args: tuple[Node, ...]) -> Ref:
        tpl = site.templates.get(use.template)
        if tpl is None:
            known = set(site.templates)
            if use.template in site.rules:
                raise site.error(f"'{use.template}' is a rule, not a template: it takes no arguments", use.pos)
            raise site.error(f"unknown template '{use.template}'" + did_you_mean(use.template, known), use.pos)
        if len(args) != len(tpl.params):
            raise site.error(f"template '{use.template}' takes {len(tpl.params)} arguments "
                             f"({', '.join(tpl.params)}), got {len(args)}", use.pos)
        for a in args:
            bounded_size(a, lim.max_expanded, site.text, use.pos, site.source)
        key = (use.template, args)
        name = instances.get(key)
        if name is None:
            if len(instances) >= lim.max_rules:
                raise LimitError("max_rules", len(instances) + 1, lim.max_rules,
                                 bounds.place(site.text, use.pos, site.source),
                                 detail="instances of rule templates")
            name = f"{use.template}__{len(instances) + 1}"
            while name in site.rules or name in site.terms or name in site.templates:
                name += "_"
            instances[key] = name
            site.rules[name] = seq([])  # placeholder until its body is built
            site.positions[name] = tpl.pos
            todo.append((name, tpl, dict(zip(tpl.params, args, strict=True))))
        return Ref(name, pos=use.pos)

    def subst(node: Node, mapping: dict[str, Node]) -> Gen:
        if isinstance(node, Ref):
            use = site.usages.get(node.name)
            if use is not None:
                args = []
                for a in use.args:
                    args.append((yield subst(a, mapping)))
                return instance(use, tuple(args))
            return mapping.get(node.name, node)
        if isinstance(node, Seq | Alt):
            items = []
            for it in node.items:
                items.append((yield subst(it, mapping)))
            return seq(items, node.pos) if isinstance(node, Seq) else alt(items, node.pos)
        if isinstance(node, Rep):
            return Rep((yield subst(node.item, mapping)), node.lo, node.hi, pos=node.pos)
        if isinstance(node, SetOp):
            args2 = []
            for a in node.args:
                args2.append((yield subst(a, mapping)))
            return SetOp(node.op, tuple(args2), node.max_reps, pos=node.pos)
        return node

    for name in [n for n in site.rules if n not in site.embedded]:
        site.rules[name] = bounds.run(subst(site.rules[name], {}))
    while todo:
        name, tpl, mapping = todo.pop()
        site.rules[name] = bounds.run(subst(tpl.body, mapping))
