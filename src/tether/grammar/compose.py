"""Python constructors and composition: one-terminal grammars, choices, and grammars
built from other grammars (sequence, union, embedding one as a rule of another).

Composition renames every rule of a part as ``<name>__<rule>`` (its start becomes
``<name>``) and renames terminals that clash, so symbols never collide.

``sequence`` and ``union`` lower the combined grammar again with the greedy-safe policy
(``tether.grammar.lower``): what follows a part can change which of its literals may be
lexed as one terminal (``from_choices(["a", "ab"])`` followed by ``"bc"`` must not lex
``ab``). Parts built by ``from_gbnf``/``from_kbnf``/``from_choices`` keep their front-end
AST for this; other terminals (regexes, Lark terminals) are kept as they are.
Grammars with ``%ignore`` keep Lark's lexeme semantics and are combined as they are;
``%ignore`` is global, so grammars with different ignored terminals cannot be combined.
``embed_into`` mutates a host at IR level without re-lowering (used for ``%json`` in Lark).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether import regex as rx
from tether.errors import GrammarError
from tether.grammar.ir import NT, Flavor, Grammar, Rule, Symbol, T, Terminal
from tether.grammar.simplify import simplify


def from_regex(pattern: str, *, flavor: Flavor = "python", ignore_case: bool = False) -> Grammar:
    """A grammar whose language is ``pattern`` (full match), as one terminal carrying the
    pattern's node (parsed here, once).

    Raises:
        RegexError: if the regex layer cannot parse ``pattern`` (offset and caret).
    """
    node = rx.parse(pattern, flavor=flavor, ignore_case=ignore_case)
    g = Grammar(start="start")
    if node.nullable:  # terminals never match ε: the rule carries the empty alternative
        # "[\s\S]+" (non-empty) is spelled the same in both flavors
        t = g.add_terminal(Terminal("REGEX", expr=("and", pattern, "[\\s\\S]+"), flavor=flavor,
                                    ignore_case=ignore_case, node=rx.intersect(node, rx.plus(rx.ANY_CHAR))))
        g.add_rule("start")
    else:
        t = g.add_terminal(Terminal("REGEX", regex=pattern, flavor=flavor, ignore_case=ignore_case, node=node))
    g.add_rule("start", t)
    return g


def from_choices(choices: Sequence[str], *, start: str = "start") -> Grammar:
    """A grammar accepting exactly the strings in ``choices`` (one literal each).

    Raises:
        GrammarError: if ``choices`` is empty or not a sequence of strings (or holds a lone
            surrogate).
        LimitError: more than ``max_alternatives`` choices, or more than
            ``max_text_chars`` characters in all.
    """
    if isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
        raise GrammarError("choices must be a list of strings")
    if not choices:
        raise GrammarError("choices is empty: the grammar would accept nothing")
    from tether.grammar import bounds
    from tether.grammar.ast import Lit, alt
    from tether.limits import check

    check("max_alternatives", len(choices), "choices")
    check("max_text_chars", sum(map(len, choices)), "choices (all characters)")
    for i, c in enumerate(choices):
        try:
            bounds.check_encodable(c)
        except GrammarError as exc:
            raise GrammarError(f"choice {i}: {exc.reason}") from None

    g = Grammar(start=start)
    for i, c in enumerate(dict.fromkeys(choices)):
        if c == "":
            g.add_rule(start)
            continue
        g.add_rule(start, g.add_terminal(Terminal(f"CHOICE{i}", literal=c)))
    return attach_ast(g, {start: alt([Lit(c) for c in dict.fromkeys(choices)])}, start)


def _ignore_sig(g: Grammar) -> set[tuple[object, ...]]:
    return {(g.terminals[n].regex, g.terminals[n].literal, g.terminals[n].expr) for n in g.ignore}


def embed_into(host: Grammar, guest: Grammar, name: str, *, check_ignore: bool = True) -> NT:
    """Add ``guest``'s rules to ``host`` (mutated) under the rule ``name``; return ``NT(name)``.

    Raises:
        GrammarError: if ``name`` is already a rule of ``host``, or the two grammars
            ignore different terminals.
    """
    if any(r.lhs == name for r in host.rules):
        raise GrammarError(f"cannot embed as '{name}': the grammar already has that rule")
    if check_ignore and guest.ignore and _ignore_sig(guest) != _ignore_sig(host):
        raise GrammarError(
            f"cannot embed a grammar that ignores {sorted(guest.ignore)} into one that ignores "
            f"{sorted(host.ignore)}: %ignore applies to the whole grammar"
        )
    term_map: dict[str, str] = {}
    for tname, t in guest.terminals.items():
        new, k = tname, 1
        while new in host.terminals and host.terminals[new] != _renamed(t, new):
            k += 1
            new = f"{tname}_{k}"
        term_map[tname] = new
        if new not in host.terminals:
            host.terminals[new] = _renamed(t, new)
    for n in guest.ignore:
        if term_map[n] not in host.ignore:
            host.ignore.append(term_map[n])
    existing = {r.lhs for r in host.rules}

    def rename(n: str) -> str:
        return name if n == guest.start else f"{name}__{n}"

    for n in guest.nonterminals():
        if rename(n) in existing:
            raise GrammarError(f"cannot embed as '{name}': rule '{rename(n)}' already exists")

    def sym(s: Symbol) -> Symbol:
        return T(term_map[s.name]) if isinstance(s, T) else NT(rename(s.name))

    host.rules += [Rule(rename(r.lhs), tuple(sym(s) for s in r.rhs)) for r in guest.rules]
    host.warnings += [w for w in guest.warnings if w not in host.warnings]
    return NT(name)


def _renamed(t: Terminal, name: str) -> Terminal:
    from dataclasses import replace

    return replace(t, name=name)


def attach_ast(g: Grammar, rules: dict[str, Any], start: str) -> Grammar:
    """Record the front-end AST ``g`` was lowered from (used by ``sequence``/``union``)."""
    g.source_ast = (rules, start, g.ir_signature())
    return g


def to_ast(g: Grammar) -> tuple[dict[str, Any], str]:
    """The front-end AST of ``g``: the recorded one if the IR is unchanged since, else
    one built from the IR (literal terminals as literals, other terminals as is)."""
    from tether.grammar.ast import Lit, Node, Ref, Term, alt, seq

    rec = g.source_ast
    if isinstance(rec, tuple) and len(rec) == 3 and rec[2] == g.ir_signature():
        return rec[0], rec[1]
    # A grammar holding a terminal that cannot join the analysis (a set operation, a lazy
    # or stop terminal, a regex the AST cannot say) was lexed as a whole by its front end
    # (the JSON Schema compiler's key literals beside its "any other key" terminal):
    # splitting only its literals would change which lexemes win, so it keeps every
    # terminal as it is.
    opaque = any(_opaque(t) for t in g.terminals.values())
    by: dict[str, list[Any]] = {}
    for r in g.rules:
        items: list[Node] = []
        for sym in r.rhs:
            if isinstance(sym, NT):
                items.append(Ref(sym.name))
            else:
                t = g.terminals[sym.name]
                plain = not opaque and not t.lazy and t.stop is None and t.max_len is None
                if plain and t.literal and not t.ignore_case:
                    items.append(Lit(t.literal))
                    continue
                node = None
                if plain and t.regex is not None:  # a simple regex joins the analysis
                    from tether.grammar.regex_ast import regex_to_ast

                    node = regex_to_ast(t.regex, flags="i" if t.ignore_case else "", flavor=t.flavor)
                items.append(node if node is not None else Term(t))
        by.setdefault(r.lhs, []).append(seq(items))
    return {k: alt(v) for k, v in by.items()}, g.start


def _opaque(t: Terminal) -> bool:
    """Whether ``t`` stays one terminal when its grammar is lowered again (see `to_ast`)."""
    if t.lazy or t.stop is not None or t.max_len is not None or t.expr is not None:
        return True
    if t.literal is not None:
        return t.ignore_case
    from tether.grammar.regex_ast import regex_to_ast

    assert t.regex is not None  # one of regex, literal, expr; not expr, not literal
    return regex_to_ast(t.regex, flags="i" if t.ignore_case else "", flavor=t.flavor) is None


def _rename_ast(rules: dict[str, Any], start: str, name: str) -> dict[str, Any]:
    from tether.grammar.ast import Alt, Ref, Rep, Seq, SetOp

    def new(n: str) -> str:
        return name if n == start else f"{name}__{n}"

    def walk(node: Any) -> Any:
        if isinstance(node, Ref):
            return Ref(new(node.name), pos=node.pos)
        if isinstance(node, Seq | Alt):
            return type(node)(tuple(walk(i) for i in node.items), pos=node.pos)
        if isinstance(node, Rep):
            return Rep(walk(node.item), node.lo, node.hi, pos=node.pos)
        if isinstance(node, SetOp):
            return SetOp(node.op, tuple(walk(a) for a in node.args), node.max_reps, pos=node.pos)
        return node

    return {new(k): walk(v) for k, v in rules.items()}


def _relower(grammars: Sequence[Grammar], start: str, kind: str, body: Any) -> Grammar:
    """Combine the parts' ASTs under ``start -> body(part refs)`` and lower once."""
    from tether.grammar.ast import Ref
    from tether.grammar.lower import lower

    rules: dict[str, Any] = {}
    refs = []
    for i, g in enumerate(grammars):
        r, s = to_ast(g)
        rules.update(_rename_ast(r, s, f"{kind}{i}"))
        refs.append(Ref(f"{kind}{i}"))
    rules[start] = body(refs)
    out = lower(rules, start, mode="char")
    out.warnings = [w for g in grammars for w in g.warnings]
    return attach_ast(simplify(out, warn_unreachable=set()), rules, start)


def _combine(grammars: Sequence[Grammar], start: str, kind: str) -> tuple[Grammar, list[NT]]:
    if not grammars:
        raise GrammarError(f"{kind} of no grammars")
    out = Grammar(start=start)
    for i, g in enumerate(grammars):
        if not isinstance(g, Grammar):
            raise GrammarError(f"{kind}: argument {i} is a {type(g).__name__}, not a Grammar")
    if any(_ignore_sig(g) != _ignore_sig(grammars[0]) for g in grammars):
        raise GrammarError(f"{kind}: the grammars ignore different terminals; %ignore applies to the whole grammar")
    parts = [embed_into(out, g, f"{kind}{i}", check_ignore=False) for i, g in enumerate(grammars)]
    return out, parts


def sequence(*grammars: Grammar, start: str = "start") -> Grammar:
    """A grammar for the concatenation of the languages of ``grammars``."""
    from tether.grammar.ast import seq

    if grammars and all(isinstance(g, Grammar) and not g.ignore for g in grammars):
        return _relower(grammars, start, "seq", lambda refs: seq(refs))
    out, parts = _combine(grammars, start, "seq")
    out.add_rule(start, *parts)
    return simplify(out)


def union(*grammars: Grammar, start: str = "start") -> Grammar:
    """A grammar for the union of the languages of ``grammars``."""
    from tether.grammar.ast import alt

    if grammars and all(isinstance(g, Grammar) and not g.ignore for g in grammars):
        return _relower(grammars, start, "alt", lambda refs: alt(refs))
    out, parts = _combine(grammars, start, "alt")
    for p in parts:
        out.add_rule(start, p)
    return simplify(out)
