"""A read Lark grammar → Grammar IR: names checked (unknown, rules in terminals,
``%ignore`` of non-terminals), circular terminals refused, ``&``/``~`` kept to
terminals, llguidance attributes (``stop=``, ``lazy``) made lexer options, then
``lower(..., mode="lexeme")`` (each Lark terminal stays one IR terminal, matched
greedily as Lark and llguidance do), look-arounds judged on whole terminals, embedded
``%json``/``%lark`` grammars joined, and ``simplify``.
"""

from __future__ import annotations

from dataclasses import replace

from tether.errors import GrammarError, LimitError
from tether.grammar import bounds
from tether.grammar.ast import Node, Ref, SetOp, refs, seq, walk
from tether.grammar.compose import embed_into
from tether.grammar.ir import Grammar, T
from tether.grammar.lark.reader import LarkReader
from tether.grammar.lark.regex_checks import check_terminal_looks
from tether.grammar.lark.templates import expand_templates
from tether.grammar.lark.tokens import Tok
from tether.grammar.lower import Lowering
from tether.grammar.simplify import did_you_mean, simplify
from tether.limits import current as current_limits


def parse_lark(text: str, *, source: str = "") -> LarkReader:
    """Read Lark ``text`` (syntax only). Raises GrammarError with line:column, LimitError
    past the active `tether.limits.Limits`."""
    bounds.check_text(text, source)
    p = LarkReader(text, source, read_nested=lambda inner: from_lark(inner, source=source))
    p.parse()
    expand_templates(p)
    user_terms = {k: v for k, v in p.terms.items() if k not in p.imports}
    bounds.check_rules({**p.rules, **user_terms}, text, source, p.positions)
    return p


def from_lark(text: str, *, start: str = "start", source: str = "") -> Grammar:
    """Build a Grammar from Lark ``text`` (see the module docstring).

    Raises:
        GrammarError: syntax errors, unknown names, duplicate definitions, circular
            terminals, unsupported features, bad regexes, rules that never finish.
    """
    p = parse_lark(text, source=source)
    if start not in p.rules:
        if not p.rules and not p.terms:
            raise GrammarError("the grammar has no rules")
        raise GrammarError(f"no start rule: the grammar has no '{start}' rule" + did_you_mean(start, set(p.rules)))
    known = set(p.rules) | set(p.terms) | set(p.embedded)
    for name, body in list(p.rules.items()) + list(p.terms.items()):
        is_term = name in p.terms
        if name in p.imports:
            continue
        for r in sorted(refs(body), key=lambda r: r.pos):
            if r.name not in known:
                raise GrammarError(f"unknown name '{r.name}'" + did_you_mean(r.name, known), text, r.pos, source)
            if is_term and r.name in p.embedded:
                raise GrammarError(f"%json cannot be used in terminals ('{name}')", text, r.pos, source)
            if is_term and r.name in p.rules:
                raise GrammarError(f"terminal '{name}' cannot use rule '{r.name}' (rules cannot be used in terminals)",
                                   text, r.pos, source)
    for node in p.ignore:
        for r in refs(node):
            if r.name not in p.terms:
                raise GrammarError(f"%ignore needs terminals; '{r.name}' is not a terminal", text, r.pos, source)
    check_cycles(p, text, source)
    for body in p.rules.values():
        check_setops(body, p, text, source)
    # attributes on rules (llguidance): the rule becomes one terminal with lexer options
    rules = dict(p.rules)
    for name in p.embedded:
        rules[name] = seq([])  # placeholder, replaced by the embedded grammar below
    lw = Lowering(rules, start, mode="lexeme", terminals=p.terms, text=text, source=source)
    attr_terms = {}
    for name, attrs in p.attrs.items():
        if name in p.rules:
            attr_terms[name] = attr_terminal(lw, name, attrs, p, text, source)
    lw.rules = {k: v for k, v in rules.items() if k not in attr_terms}
    for name, t in attr_terms.items():
        lw.grammar.add_rule(name, t)
    g = lw.run()
    for node in p.ignore:
        node_ne = lw.nonempty(node)
        if node_ne is None:
            continue
        t = lw.terminal(node_ne, node.name if isinstance(node, Ref) else None)
        if t.name not in g.ignore:
            g.ignore.append(t.name)
    notes = check_terminal_looks(g, p.looks, text, source) if p.looks else []
    for name, sub in p.embedded.items():
        g.rules = [r for r in g.rules if r.lhs != name]
        embed_into(g, sub, name)
    g.warnings += p.warnings
    g.lowering = lw.decisions + notes
    return simplify(g, text=text, source=source, positions=p.positions, warn_unreachable=set())


def attr_terminal(lw: Lowering, name: str, attrs: dict[str, object], p: LarkReader, text: str, source: str):  # type: ignore[no-untyped-def]
    body = p.rules[name]
    for r in refs(body):
        if r.name in p.rules:
            raise GrammarError(f"rule '{name}' has lexer attributes, so it cannot use rule '{r.name}'",
                               text, r.pos, source)
    stop = attrs.get("stop")
    stop_node: Node | None = None
    if isinstance(stop, tuple):  # stop=/regex/ or stop=TERMINAL
        kind, value, pos = stop
        if kind == "regex":
            stop_node = p.regex(Tok("regex", str(value), int(pos)))
        elif value in p.terms:
            stop_node = Ref(str(value), pos=int(pos))
        else:
            raise GrammarError(f"stop= on '{name}' names '{value}', which is not a terminal",
                               text, int(pos), source)
        stop = None
    for k in ("max_tokens", "temperature"):
        if k in attrs:
            msg = f"{k}= on '{name}' is ignored (token-level limits belong to the decoder)"
            p.warnings.append(msg)
    ne = lw.nonempty(body)
    if ne is None:
        raise GrammarError(f"rule '{name}' matches only the empty string", text, p.positions[name], source)
    if stop_node is not None:  # value (not containing the stop) then the stop; lazy
        ne = seq([SetOp("and", (ne, SetOp("except", (stop_node,)))), stop_node])
    t = lw.terminal(ne, name.upper())
    term = lw.grammar.terminals[t.name]
    lazy = bool(attrs.get("lazy", False)) or stop is not None or stop_node is not None
    new = replace(term, stop=stop if isinstance(stop, str) and stop else None, lazy=lazy)
    lw.grammar.terminals[t.name] = new
    return T(t.name)


def check_cycles(p: LarkReader, text: str, source: str) -> None:
    """Refuse circular terminals (depth-first, with an explicit stack), then bound what
    inlining the terminals into one another makes: nesting (``max_nesting``) and size
    (``max_expanded``)."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    for root in p.terms:
        if root in state or root in p.imports:
            continue
        state[root] = 1
        stack: list[tuple[str, list[Ref]]] = [(root, refs(p.terms[root]))]
        while stack:
            name, todo = stack[-1]
            if not todo:
                state[name] = 2
                stack.pop()
                continue
            r = todo.pop()
            if r.name not in p.terms:
                continue
            s = state.get(r.name)
            if s == 1:
                raise GrammarError(f"circular reference in terminal '{r.name}'", text, r.pos, source)
            if s is None:
                state[r.name] = 1
                stack.append((r.name, refs(p.terms[r.name])))
    lim = current_limits()
    for name, (depth, size) in bounds.inlined_sizes(p.terms).items():
        if depth > lim.max_nesting:
            raise LimitError("max_nesting", depth, lim.max_nesting,
                             bounds.place(text, p.positions.get(name, -1), source),
                             detail=f"terminal '{name}' with the terminals it uses inlined")
        if size > lim.max_expanded:
            raise LimitError("max_expanded", size, lim.max_expanded,
                             bounds.place(text, p.positions.get(name, -1), source),
                             detail=f"terminal '{name}' with the terminals it uses inlined")


def check_setops(node: Node, p: LarkReader, text: str, source: str) -> None:
    """``&`` and prefix ``~`` build terminals: as in llguidance they are refused in rules
    (write ``ST: A & B`` and use ``ST``)."""
    for n in walk(node):
        if isinstance(n, SetOp):
            op = "&" if n.op == "and" else "~"
            raise GrammarError(f"{op} is only supported for terminals, not rules: define a terminal "
                               f"(e.g. ST: A {op} B) and use it", text, n.pos, source)
