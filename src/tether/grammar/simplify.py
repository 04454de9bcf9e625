"""Validate and simplify a Grammar IR (seed 002's AST → HIR passes, on plain BNF).

1. Validate: the grammar has rules, the start rule exists, every referenced rule and
   terminal is defined (a near miss is suggested), every rule reachable from the start
   can derive a finite string (else ``GrammarError`` naming the rule).
2. Drop what the start cannot reach (named in ``Grammar.warnings`` when a user wrote it).
3. Deduplicate alternatives, drop ``A -> A``, and remove unit rules where it cannot grow
   the grammar: a rule with one alternative ``X -> Y`` is replaced by ``Y`` everywhere,
   and ``A -> B`` where ``B`` has one alternative becomes ``A -> rhs(B)``.

Left recursion is kept (the Earley parser handles it). ε-rules are kept: the parser
handles nullable rules; ``nullable_rules`` reports them and ``eliminate_epsilon`` removes
them for consumers that want an ε-free grammar. Consecutive literals are merged by the
front ends' lowering (``tether.grammar.lower``), not here: under greedy lexing merging
two terminals can change the language, so it needs the lowering's safety test.

Cost: linear in the grammar size per pass, a few passes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from tether.errors import GrammarError
from tether.grammar.ir import NT, Grammar, Rule, Symbol, T
from tether.limits import check


def did_you_mean(name: str, candidates: list[str] | set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return f"\nDid you mean '{close[0]}'?" if close else ""


def _err(msg: str, name: str | None, text: str, source: str, positions: dict[str, int] | None) -> GrammarError:
    pos = positions.get(name, -1) if positions and name is not None else -1
    return GrammarError(msg, text, pos, source) if text and pos >= 0 else GrammarError(msg)


def nullable_rules(g: Grammar) -> set[str]:
    """Nonterminals that derive ε."""
    return _closure(g, lambda s: False)


def productive_rules(g: Grammar) -> set[str]:
    """Nonterminals that derive some finite text."""
    return _closure(g, lambda s: isinstance(s, T))


def _closure(g: Grammar, free: Callable[[Symbol], bool]) -> set[str]:
    """The nonterminals with a rule whose every symbol is ``free`` or such a nonterminal:
    a worklist (each rule counts its symbols still missing), linear in the grammar."""
    out: set[str] = set()
    missing: list[int] = []
    users: dict[str, list[int]] = {}
    todo: list[str] = []
    for i, r in enumerate(g.rules):
        k = 0
        for s in r.rhs:
            if not free(s):
                if isinstance(s, NT):
                    k += 1
                    users.setdefault(s.name, []).append(i)
                else:
                    k = -1  # a symbol that can never be free
                    break
        missing.append(k)
        if k == 0 and r.lhs not in out:
            out.add(r.lhs)
            todo.append(r.lhs)
    while todo:
        for i in users.get(todo.pop(), ()):
            if missing[i] > 0:
                missing[i] -= 1
                if missing[i] == 0 and g.rules[i].lhs not in out:
                    out.add(g.rules[i].lhs)
                    todo.append(g.rules[i].lhs)
    return out


def reachable(g: Grammar) -> tuple[set[str], set[str]]:
    """(nonterminals, terminals) reachable from the start (plus the ignored terminals)."""
    by_lhs: dict[str, list[Rule]] = {}
    for r in g.rules:
        by_lhs.setdefault(r.lhs, []).append(r)
    nts, ts = {g.start}, set(g.ignore)
    stack = [g.start]
    while stack:
        for r in by_lhs.get(stack.pop(), ()):
            for s in r.rhs:
                if isinstance(s, T):
                    ts.add(s.name)
                elif s.name not in nts:
                    nts.add(s.name)
                    stack.append(s.name)
    return nts, ts


def validate(
    g: Grammar, *, text: str = "", source: str = "", positions: dict[str, int] | None = None
) -> None:
    """Raise GrammarError for an empty grammar, a missing start rule, undefined or
    non-productive rules, undefined terminals; LimitError past ``Limits.max_rules``."""
    if not g.rules:
        raise GrammarError("the grammar has no rules")
    defined = set(g.nonterminals())
    # rules after the front end expanded repetitions and groups (Limits.max_rules)
    check("max_rules", len(defined), source or "the grammar after expansion")
    if g.start not in defined:
        raise GrammarError(
            f"the start rule '{g.start}' is not defined" + did_you_mean(g.start, defined)
        )
    for r in g.rules:
        for s in r.rhs:
            if isinstance(s, NT) and s.name not in defined:
                raise _err(
                    f"rule '{s.name}' is used by '{r.lhs}' but not defined" + did_you_mean(s.name, defined),
                    r.lhs, text, source, positions,
                )
            if isinstance(s, T) and s.name not in g.terminals:
                raise _err(
                    f"terminal '{s.name}' is used by '{r.lhs}' but not defined"
                    + did_you_mean(s.name, set(g.terminals)),
                    r.lhs, text, source, positions,
                )
    for name in g.ignore:
        if name not in g.terminals:
            raise GrammarError(f"ignored terminal '{name}' is not defined")
    productive = productive_rules(g)
    nts, _ = reachable(g)
    bad = [n for n in g.nonterminals() if n in nts and n not in productive]
    if bad:
        # name the rule whose every alternative needs itself or another bad rule
        raise _err(
            f"rule '{bad[0]}' can never finish: every alternative needs a rule that "
            f"derives no finite text ({', '.join(repr(b) for b in bad[:5])})",
            bad[0], text, source, positions,
        )


def simplify(
    g: Grammar,
    *,
    text: str = "",
    source: str = "",
    positions: dict[str, int] | None = None,
    warn_unreachable: set[str] | None = None,
) -> Grammar:
    """Validate ``g`` and return a simplified copy (same language).

    Args:
        text, source, positions: the grammar text, its name and rule name → offset, so
            errors can point at a definition.
        warn_unreachable: rule names whose dropping is reported in ``warnings``
            (default: every unreachable rule).

    Raises:
        GrammarError: see ``validate``.
    """
    validate(g, text=text, source=source, positions=positions)
    out = Grammar(start=g.start, terminals=dict(g.terminals), ignore=list(g.ignore),
                  warnings=list(g.warnings), lowering=list(g.lowering))
    nts, ts = reachable(g)
    for name in g.nonterminals():
        if name not in nts and (warn_unreachable is None or name in warn_unreachable):
            out.warnings.append(f"rule '{name}' is not reachable from '{g.start}' and was dropped")
    rules = list(dict.fromkeys(r for r in g.rules if r.lhs in nts and r.rhs != (NT(r.lhs),)))

    for _ in range(20):  # unit-rule removal to a fixpoint (bounded)
        by_lhs: dict[str, list[Rule]] = {}
        for r in rules:
            by_lhs.setdefault(r.lhs, []).append(r)
        rename: dict[str, Symbol] = {}
        for name, rs in by_lhs.items():
            if name != g.start and len(rs) == 1 and len(rs[0].rhs) == 1 and rs[0].rhs[0] != NT(name):
                rename[name] = rs[0].rhs[0]
        # resolve chains X -> Y -> Z, stopping at cycles (memoized: a chain of n unit
        # rules costs n steps in all, not n per use)
        resolved: dict[str, Symbol] = {}

        def target(s: Symbol, rename: dict[str, Symbol] = rename,
                   resolved: dict[str, Symbol] = resolved) -> Symbol:
            seen: list[str] = []
            seen_set: set[str] = set()
            x = s
            while isinstance(x, NT) and x.name in rename:
                got = resolved.get(x.name)
                if got is not None:
                    x = got
                    break
                if x.name in seen_set:  # a cycle of unit rules: keep the original behaviour
                    return _walk_cycle(s, rename)
                seen.append(x.name)
                seen_set.add(x.name)
                x = rename[x.name]
            for n in seen:
                resolved[n] = x
            return x

        new: list[Rule] = []
        changed = False
        for r in rules:
            if r.lhs in rename and not isinstance(target(NT(r.lhs)), NT | T):  # pragma: no cover
                continue
            if r.lhs in rename and target(NT(r.lhs)) != NT(r.lhs):
                changed = True
                continue
            rhs = tuple(target(s) if isinstance(s, NT) else s for s in r.rhs)
            if len(rhs) == 1 and isinstance(rhs[0], NT) and rhs[0].name != r.lhs:
                body = by_lhs.get(rhs[0].name, [])
                if len(body) == 1 and rhs[0].name not in rename:
                    rhs = tuple(target(s) if isinstance(s, NT) else s for s in body[0].rhs)
            if rhs != r.rhs:
                changed = True
            if rhs != (NT(r.lhs),):
                new.append(Rule(r.lhs, rhs))
        rules = list(dict.fromkeys(new))
        if not changed:
            break
    out.rules = rules
    out_nts, ts = reachable(out)
    out.rules = [r for r in out.rules if r.lhs in out_nts]
    out.terminals = {n: t for n, t in g.terminals.items() if n in ts}
    return out


def _walk_cycle(s: Symbol, rename: dict[str, Symbol]) -> Symbol:
    seen = set()
    while isinstance(s, NT) and s.name in rename and s.name not in seen:
        seen.add(s.name)
        s = rename[s.name]
    return s


def eliminate_epsilon(g: Grammar) -> Grammar:
    """An equivalent grammar without ε-rules (except ``start -> ε`` when ε is in the
    language, with a fresh start that no rule uses). Long rules are binarized first so
    the expansion stays linear in the grammar size."""
    null = nullable_rules(g)
    rules: list[Rule] = []
    k = 0
    for r in g.rules:  # binarize: A -> X1 X2 ... Xn  ==>  A -> X1 A_1, A_1 -> X2 A_2, ...
        rhs, lhs = r.rhs, r.lhs
        while len(rhs) > 2:
            k += 1
            nxt = f"{r.lhs}__bin{k}"
            rules.append(Rule(lhs, (rhs[0], NT(nxt))))
            if all(isinstance(s, NT) and s.name in null for s in rhs[1:]):
                null.add(nxt)
            lhs, rhs = nxt, rhs[1:]
        rules.append(Rule(lhs, rhs))
    out_rules: list[Rule] = []
    for r in rules:
        variants: list[tuple[Symbol, ...]] = [()]
        for s in r.rhs:
            keep = [v + (s,) for v in variants]
            if isinstance(s, NT) and s.name in null:
                keep += variants
            variants = keep
        for v in variants:
            if v and v != (NT(r.lhs),):
                out_rules.append(Rule(r.lhs, v))
    # drop variants that use a rule whose only derivation was ε (no longer productive)
    prod = productive_rules(Grammar(start=g.start, rules=out_rules))
    out_rules = [r for r in out_rules if all(not isinstance(s, NT) or s.name in prod for s in r.rhs)]
    start = g.start
    out = Grammar(start=start, terminals=dict(g.terminals), ignore=list(g.ignore),
                  warnings=list(g.warnings), lowering=list(g.lowering))
    if g.start in null:
        start = f"{g.start}__eps"
        out.start = start
        has_start = any(r.lhs == g.start for r in out_rules)
        out_rules = [*([Rule(start, (NT(g.start),))] if has_start else []), Rule(start, ()), *out_rules]
    out.rules = list(dict.fromkeys(out_rules))
    return simplify(out)
