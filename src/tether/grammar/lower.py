"""Lower front-end ASTs (``tether.grammar.ast``) into the Grammar IR.

Two policies, because the parser lexes greedily (longest match, no backtracking, like
Lark's and llguidance's lexers) and front ends disagree on what a terminal is:

``lexeme`` (Lark): the grammar says what the terminals are (UPPERCASE terminals,
    string and regex literals); each becomes one IR terminal and keeps the greedy
    semantics Lark and llguidance users expect. Groups, options and repetitions become
    named rules.

``char`` (GBNF, KBNF, and ``sequence``/``union`` of grammars): llama.cpp reads GBNF as a
    character-level grammar with no lexer, so any grouping into terminals must not change
    the language. Opaque regexes (KBNF ``#"..."``, xgrammar ``Regex("...")``, set
    operations, terminals of already-lowered grammars) stay terminals of their own and
    are lexed greedily; everything else follows this policy. Lowering starts from the
    largest candidates (maximal rule-free sub-expressions, with non-recursive rules
    inlined) and keeps a candidate ``T`` as one terminal only if greedy lexing cannot
    lose a parse: for every candidate ``U`` that may start where ``T`` starts, no
    non-empty ``w`` in L(T) followed by a character that may follow ``T`` is a prefix
    of a string in L(U) (``analysis.swallows``). A failing candidate is split (inlined
    rules are un-inlined first, then sequences into items, repetitions into rules,
    literals into characters) and the test is run again until nothing fails. Single
    characters always pass, so the result keeps llama.cpp's language exactly; e.g.
    ``ws ::= [ \\t\\n]*`` followed by a mandatory ``"\\n"`` stays a rule over the
    one-character terminal ``[ \\t\\n]`` while ``[0-9]+`` becomes one terminal.
    The test over-approximates which candidates compete (all with overlapping first
    characters, FOLLOW sets merged over all uses), so it may split more than needed,
    never less. ``Lowering.decisions`` records what was kept and what was split.

Nullable candidates become ``ε | T`` with T the non-empty part (terminals never match ε).
Repetitions become left-recursive rules (``R -> ε | R X``), bounded ones a chain of
optional rules; identical groups are lowered once.
"""

from __future__ import annotations

from typing import Literal

from tether.errors import GrammarError, LimitError
from tether.grammar import bounds
from tether.grammar.analysis import Automaton, Facts, rx_nullable, swallows_fast
from tether.grammar.ast import (
    EPS,
    Alt,
    Cls,
    Lit,
    Node,
    Ranges,
    Ref,
    Rep,
    Rx,
    Seq,
    SetOp,
    Term,
    overlaps,
    refs,
    union,
)
from tether.grammar.bounds import node_size
from tether.grammar.ir import NT, Flavor, Grammar, Symbol, T, Terminal
from tether.grammar.regexgen import has_setop, terminal_expr, to_regex
from tether.grammar.terminal_nodes import TerminalNodes
from tether.limits import check_deadline, current

NONEMPTY = Rx("[\\s\\S]+")  # valid in both regex flavors
# largest expanded size (``bounds.node_size``, rule references inlined) of a sub-expression
# lowered as one terminal in char mode: the greedy-lexing test builds an automaton of
# that many states; a larger one is split into rules (same language)
UNIT_SIZE = 20_000
# rounds of the greedy-lexing test before every rule reference is split at once
SPLIT_ROUNDS = 12
Mode = Literal["lexeme", "char"]


class Lowering:
    """One lowering run; ``grammar`` holds the result, ``decisions`` the terminal choices."""

    def __init__(
        self,
        rules: dict[str, Node],
        start: str,
        *,
        mode: Mode,
        terminals: dict[str, Node] | None = None,
        text: str = "",
        source: str = "",
    ) -> None:
        self.rules, self.start, self.mode = rules, start, mode
        self.term_defs = terminals or {}
        self.text, self.source = text, source
        self.grammar = Grammar(start=start)
        self.decisions: list[str] = []
        self._term_by_key: dict[tuple[object, ...], str] = {}
        self._aux: dict[Node, str] = {}
        self._opt: dict[str, str] = {}
        self._counter = 0
        self._owner = start
        self.split: set[Node] = set()
        self._inlined: dict[str, int] = {}
        self._emitted = 0  # symbols the repetitions wrote into the grammar (max_expanded)
        self.facts = Facts(rules, self.resolve)
        self.lexical: set[str] = self._lexical_rules() if mode == "char" else set()
        self._unitable: dict[Node, bool] = {}
        self._nodes = TerminalNodes(self.resolve)

    # -- names --------------------------------------------------------------
    def resolve(self, ref: Ref) -> Node:
        if ref.name in self.rules:
            return self.rules[ref.name]
        if ref.name in self.term_defs:
            return self.term_defs[ref.name]
        raise GrammarError(f"'{ref.name}' is used but not defined", self.text, ref.pos, self.source)

    def fresh(self, kind: str) -> str:
        self._counter += 1
        return f"{self._owner}_{kind}{self._counter}"

    # -- terminals ----------------------------------------------------------
    def nullable(self, node: Node) -> bool:
        return self.facts.nullable(node)

    def nonempty(self, node: Node) -> Node | None:
        """The non-empty part of L(node), or None if L(node) ⊆ {ε}."""
        if isinstance(node, Lit):
            return node if node.text else None
        if isinstance(node, Cls | Term):
            return node
        if isinstance(node, Rx | SetOp):
            if isinstance(node, Rx) and not rx_nullable(node):
                return node
            if isinstance(node, SetOp) and not self.nullable(node):
                return node
            return SetOp("and", (node, NONEMPTY), pos=node.pos)
        if isinstance(node, Ref):
            if self.nullable(node):
                return self.nonempty(self.resolve(node))
            return node
        if isinstance(node, Seq):
            alts: list[Node] = []
            for i, it in enumerate(node.items):
                ne = self.nonempty(it)
                if ne is not None:
                    rest = node.items[i + 1 :]
                    alts.append(Seq((ne, *rest)) if rest else ne)
                if not self.nullable(it):
                    break
            if not alts:
                return None
            return alts[0] if len(alts) == 1 else Alt(tuple(alts))
        if isinstance(node, Alt):
            nes = [n for n in (self.nonempty(i) for i in node.items) if n is not None]
            if not nes:
                return None
            return nes[0] if len(nes) == 1 else Alt(tuple(dict.fromkeys(nes)))
        if isinstance(node, Rep):
            if node.hi == 0:
                return None
            ne = self.nonempty(node.item)
            if ne is None:
                return None
            if node.lo == 0 or self.nullable(node.item):
                return Rep(ne, 1, node.hi)
            return node
        raise TypeError(node)

    def terminal(self, node: Node, name: str | None = None) -> T:
        """The IR terminal for a non-nullable lexical ``node``."""
        if isinstance(node, Term):
            t0 = node.terminal
            assert isinstance(t0, Terminal)  # the AST holds IR terminals as objects
            key0: tuple[object, ...] = ("term", t0)
            if key0 not in self._term_by_key:
                new, k = t0.name, 1
                while new in self.grammar.terminals:
                    k += 1
                    new = f"{t0.name}_{k}"
                from dataclasses import replace

                self.grammar.add_terminal(replace(t0, name=new))
                self._term_by_key[key0] = new
            return T(self._term_by_key[key0])
        if isinstance(node, Seq) and node.items and all(
            isinstance(i, Lit) and not i.ignore_case for i in node.items
        ):  # consecutive literals merge into one literal terminal
            node = Lit("".join(i.text for i in node.items if isinstance(i, Lit)))
        if isinstance(node, Lit):
            key: tuple[object, ...] = ("lit", node.text, node.ignore_case)
        elif isinstance(node, Rx) and not node.flags:  # keep the user's regex as written
            key = ("re", node.pattern) if node.flavor == "python" else ("re", node.pattern, node.flavor)
            if node.lazy:
                key = (*key, "lazy")
        else:
            expr = terminal_expr(node, self.resolve)
            key = ("expr", expr) if isinstance(expr, tuple) else ("re", expr)
            if isinstance(node, Rx) and node.lazy:
                key = (*key, "lazy")
        if key in self._term_by_key:
            return T(self._term_by_key[key])
        if name is None or name in self.grammar.terminals:
            if key[0] == "lit":
                name = '"' + str(key[1]) + '"' + ("i" if key[2] else "")
            else:
                name = f"/{key[1]}/" if key[0] == "re" else f"__EXPR{len(self.grammar.terminals)}"
        base, k = name, 1
        while name in self.grammar.terminals:
            k += 1
            name = f"{base}_{k}"
        if key[0] == "lit":
            t = Terminal(name, literal=str(key[1]), ignore_case=bool(key[2]))
        elif key[0] == "re":
            ecma = isinstance(node, Rx) and node.flavor == "ecma"  # front ends write only these two
            flavor: Flavor = "ecma" if ecma else "python"
            t = Terminal(name, regex=str(key[1]), lazy=isinstance(node, Rx) and node.lazy,
                         flavor=flavor, node=self._nodes.node(node, flavor))
        else:
            operands = node.args if isinstance(node, SetOp) else ()
            ecma = any(isinstance(a, Rx) and a.flavor == "ecma" for a in operands)
            assert isinstance(key[1], tuple)  # ("expr", expr): terminal_expr's tuple
            flavor = "ecma" if ecma else "python"
            t = Terminal(name, expr=key[1], flavor=flavor, node=self._nodes.node(node, flavor))
        self._term_by_key[key] = name
        self.grammar.add_terminal(t)
        return T(name)

    def optional_terminal(self, node: Node, name: str | None = None) -> list[Symbol]:
        """Symbols for a lexical ``node`` that may be nullable: ``[T]`` or ``[opt]``."""
        ne = self.nonempty(node)
        if ne is None:
            return []
        t = self.terminal(ne, name)
        if not self.nullable(node):
            return [t]
        if t.name not in self._opt:
            opt = self.fresh("opt")
            self.grammar.add_rule(opt)
            self.grammar.add_rule(opt, t)
            self._opt[t.name] = opt
        return [NT(self._opt[t.name])]

    # -- char mode: which sub-expressions are units ---------------------------
    def _lexical_rules(self) -> set[str]:
        """Rules that may be inlined into a terminal: they reach no recursion and no
        name outside the rules, and inlined they stay within ``UNIT_SIZE`` symbols and
        ``max_nesting`` levels (the passes that inline them recurse on that depth).
        Computed children first, without recursion (``bounds.inlined_sizes``)."""
        sizes = bounds.inlined_sizes(self.rules)
        max_depth = current().max_nesting
        out: set[str] = set()
        # a rule is lexical if all its references are lexical (sizes only holds rules whose
        # references are acyclic rules; a reference to a non-rule name disqualifies)
        order = [n for n in self.rules if n in sizes]
        bad = {n for n in order if any(r.name not in self.rules for r in refs(self.rules[n]))}
        changed = True
        while changed and bad:
            changed = False
            for n in order:
                if n not in bad and any(r.name in bad for r in refs(self.rules[n])):
                    bad.add(n)
                    changed = True
        for n in order:
            depth, size = sizes[n]
            if n not in bad and size <= UNIT_SIZE and depth <= max_depth:
                out.add(n)
        self._inlined = {n: sizes[n][1] for n in out}
        return out

    def unitable(self, node: Node) -> bool:
        if self.mode != "char":
            return False
        got = self._unitable.get(node)
        if got is None:
            got = all(r.name in self.lexical and r not in self.split for r in refs(node))
            if got and node_size(node, self._inlined)[1] > UNIT_SIZE:
                got = False  # too large to analyse as one terminal: its parts are lowered
            if got and isinstance(node, Ref):
                got = node not in self.split
            if got and not isinstance(node, Rx | SetOp | Term) and self._has_opaque(node):
                got = False  # opaque regexes stay terminals of their own
            self._unitable[node] = got
        return got

    def _has_opaque(self, node: Node) -> bool:
        stack, seen = [node], set()
        while stack:
            n = stack.pop()
            if isinstance(n, Rx | SetOp | Term):
                return True
            if isinstance(n, Ref):
                if n.name not in seen and n.name in self.rules:
                    seen.add(n.name)
                    stack.append(self.rules[n.name])
            elif isinstance(n, Seq | Alt):
                stack.extend(n.items)
            elif isinstance(n, Rep):
                stack.append(n.item)
        return False

    def is_unit(self, node: Node) -> bool:
        return self.unitable(node) and node not in self.split

    def _seq_parts(self, node: Seq) -> list[Node]:
        """Children of a sequence as lowered: maximal runs of unit-able items grouped."""
        if node in self.split:
            return list(node.items)
        parts: list[Node] = []
        run: list[Node] = []
        for it in node.items:
            if self.is_unit(it) and not isinstance(it, Rx | SetOp | Term):
                run.append(it)
                continue
            if run:
                self._close_run(run, parts)
                run = []
            parts.append(it)
        if run:
            self._close_run(run, parts)
        return parts

    def _close_run(self, run: list[Node], parts: list[Node]) -> None:
        """Group a run of unit items as one unit, unless the group is too large to be one
        (``UNIT_SIZE``): then its items stay apart."""
        if len(run) == 1:
            parts.append(run[0])
            return
        grp = Seq(tuple(run))
        if self.unitable(grp):
            parts.append(grp)
        else:
            parts.extend(run)

    def _collect(self, node: Node, follow: Ranges, units: dict[Node, Ranges], todo: list[str]) -> None:
        if self.is_unit(node) and not (isinstance(node, Lit) and node in self.split):
            units[node] = union(units.get(node, ()), follow)
            return
        if isinstance(node, Seq):
            parts = self._seq_parts(node)
            tails = [follow] * (len(parts) + 1)
            for i in range(len(parts) - 1, -1, -1):
                f = self.facts.first(parts[i])
                tails[i] = union(f, tails[i + 1]) if self.nullable(parts[i]) else f
            for i, p in enumerate(parts):
                if p is node:  # a one-item run equal to the sequence itself
                    self._collect_items(node, follow, units, todo)
                    return
                self._collect(p, tails[i + 1], units, todo)
        elif isinstance(node, Alt):
            for it in node.items:
                self._collect(it, follow, units, todo)
        elif isinstance(node, Rep):
            f = union(follow, self.facts.first(node.item)) if node.hi is None or node.hi > 1 else follow
            self._collect(node.item, f, units, todo)
        elif isinstance(node, Ref):
            todo.append(node.name)
        elif isinstance(node, Lit):  # split literal: one unit per character
            for i, c in enumerate(node.text):
                nxt = node.text[i + 1] if i + 1 < len(node.text) else None
                f = ((ord(nxt), ord(nxt)),) if nxt is not None else follow
                if node.ignore_case and nxt is not None:
                    f = self.facts.first(Lit(nxt, True))
                units[Lit(c, node.ignore_case)] = union(units.get(Lit(c, node.ignore_case), ()), f)
        else:
            units[node] = union(units.get(node, ()), follow)

    def _collect_items(self, node: Seq, follow: Ranges, units: dict[Node, Ranges], todo: list[str]) -> None:
        items = node.items
        tails = [follow] * (len(items) + 1)
        for i in range(len(items) - 1, -1, -1):
            f = self.facts.first(items[i])
            tails[i] = union(f, tails[i + 1]) if self.nullable(items[i]) else f
        for i, it in enumerate(items):
            self._collect(it, tails[i + 1], units, todo)

    def choose_units(self) -> None:
        """Iterate the greedy-lexing test to a fixpoint (char mode)."""
        autos: dict[Node, Automaton] = {}
        memo: dict[tuple[Node, Ranges, Node], bool] = {}
        rounds = 0
        while True:
            rounds += 1
            check_deadline("lowering a grammar")
            self._unitable.clear()
            units: dict[Node, Ranges] = {}
            todo, done = [self.start], set()
            while todo:
                name = todo.pop()
                if name in done:
                    continue
                done.add(name)
                self._collect(self.rules[name], self.facts.follow_rule[name], units, todo)
            # opaque regexes (KBNF #"...", except! of a regex) are greedy terminals by
            # definition: they are neither tested nor split
            cands: list[tuple[Node, Node]] = []
            for n in units:
                ne = self.nonempty(n) if not isinstance(n, Rx | SetOp | Term) else None
                if ne is not None:
                    cands.append((n, ne))
            firsts = {n: self.facts.first(ne) for n, ne in cands}
            for _, ne in cands:
                if ne not in autos:
                    autos[ne] = Automaton(ne, self.resolve)
            lits = {ne: ne.text if isinstance(ne, Lit) and not ne.ignore_case else None for _, ne in cands}
            # index candidates by first code point range so a literal-heavy grammar does
            # not compare every pair
            to_split: set[Node] = set()
            union = Automaton(Alt(tuple(ne for _, ne in cands)), self.resolve) if len(cands) > 40 else None
            for t, tne in cands:
                fol = units[t]
                if not fol:
                    continue
                # one product with the union of all candidates rules most terminals out
                if union is not None and not swallows_fast(autos[tne], lits[tne], fol, union, None):
                    continue
                for u, une in cands:
                    if u in to_split or not overlaps(firsts[t], firsts[u]):
                        continue
                    key = (tne, fol, une)
                    got = memo.get(key)
                    if got is None:
                        got = memo[key] = swallows_fast(autos[tne], lits[tne], fol, autos[une], lits[une])
                    if got:
                        to_split.add(u)
                        self.decisions.append(
                            f"split {self._show(u)}: greedy lexing after "
                            f"{self._show(t)} could swallow what follows"
                        )
            if not to_split:
                break
            if rounds >= SPLIT_ROUNDS:
                # a long chain of inlined rules splits one link per round: past a few rounds
                # split every rule reference at once (more splitting is always safe)
                self.split.update(Ref(n) for n in self.rules)
            for n in to_split:
                inner = [r for r in refs(n) if r not in self.split]
                if inner:
                    self.split.update(inner)
                elif isinstance(n, Cls) or (isinstance(n, Lit) and len(n.text) <= 1):
                    raise AssertionError("a single character cannot swallow")  # pragma: no cover
                else:
                    self.split.add(n)
        for n in units:
            if self.nonempty(n) is not None:
                self.decisions.append(f"terminal {self._show(n)}")

    def _show(self, n: Node) -> str:
        try:
            s = to_regex(n, self.resolve)
        except ValueError:
            s = type(n).__name__
        return "/" + (s if len(s) <= 60 else s[:57] + "...") + "/"

    # -- emission -------------------------------------------------------------
    def symbols(self, node: Node) -> list[Symbol]:
        """The right-hand-side symbols for ``node`` inside a sequence."""
        if self.mode == "char" and self.is_unit(node) and not (isinstance(node, Lit) and node in self.split):
            name = node.name.upper() if isinstance(node, Ref) else None
            return self.optional_terminal(node, name)
        if isinstance(node, Seq):
            out: list[Symbol] = []
            parts = self._seq_parts(node) if self.mode == "char" else list(node.items)
            if len(parts) == 1 and parts[0] is node:
                parts = list(node.items)
            for p in parts:
                out += self.symbols(p)
            return out
        if isinstance(node, Lit):
            if self.mode == "char":  # a split literal
                return [self.terminal(Lit(c, node.ignore_case)) for c in node.text]
            return [self.terminal(node)] if node.text else []
        if isinstance(node, Cls | Rx | SetOp | Term):
            return self.optional_terminal(node)
        if isinstance(node, Ref):
            if node.name in self.term_defs:
                return self.optional_terminal(node, node.name)
            return [NT(node.name)]
        if isinstance(node, Alt):
            return [NT(self.aux(node))]
        if isinstance(node, Rep):
            return self.repeat(node)
        raise TypeError(node)

    def alternatives(self, node: Node) -> list[list[Symbol]]:
        if isinstance(node, Alt) and not (self.mode == "char" and self.is_unit(node)):
            return [self.symbols(it) for it in node.items]
        return [self.symbols(node)]

    def aux(self, node: Node) -> str:
        name = self._aux.get(node)
        if name is None:
            name = self._aux[node] = self.fresh("group")
            for alt_syms in self.alternatives(node):
                self.grammar.add_rule(name, *alt_syms)
        return name

    def repeat(self, node: Rep) -> list[Symbol]:
        if node.hi == 0:
            return []
        key = Rep(node.item, node.lo, node.hi)
        if key in self._aux:
            return [NT(self._aux[key])]
        x = self.symbols(node.item)
        if not x:
            return []
        lo, hi = node.lo, node.hi
        self._emitted += len(x) * max(1, hi if hi is not None else lo + 1)
        if self._emitted > current().max_expanded:
            raise LimitError("max_expanded", self._emitted, current().max_expanded,
                             bounds.place(self.text, node.pos, self.source),
                             detail="symbols after the repetitions are expanded")
        check_deadline("lowering a grammar")
        if lo <= 1 and hi is None:  # R -> ε | R X   or   R -> X | R X
            name = self._aux[key] = self.fresh("star" if lo == 0 else "plus")
            self.grammar.add_rule(name, *([] if lo == 0 else x))
            self.grammar.add_rule(name, NT(name), *x)
            return [NT(name)]
        if (lo, hi) == (0, 1):
            name = self._aux[key] = self.fresh("opt")
            self.grammar.add_rule(name)
            self.grammar.add_rule(name, *x)
            return [NT(name)]
        body: list[Symbol] = x * lo
        if hi is None:
            body += self.repeat(Rep(node.item, 0, None))
        else:
            tail: list[Symbol] = []
            for _ in range(hi - lo):  # O_k -> ε | X O_(k-1)
                o = self.fresh("opt")
                self.grammar.add_rule(o)
                self.grammar.add_rule(o, *x, *tail)
                tail = [NT(o)]
            body += tail
        name = self._aux[key] = self.fresh("rep")
        self.grammar.add_rule(name, *body)
        return [NT(name)]

    def run(self, order: list[str] | None = None) -> Grammar:
        if self.mode == "char":
            self.choose_units()
        for name in order or list(self.rules):
            self._owner = name
            body = self.rules[name]
            if self.mode == "char" and self.is_unit(body):
                self.grammar.add_rule(name, *self.optional_terminal(body, name.upper()))
                continue
            for syms in self.alternatives(body):
                self.grammar.add_rule(name, *syms)
        return self.grammar


def lower(rules: dict[str, Node], start: str, *, mode: Mode, text: str = "", source: str = "") -> Grammar:
    """Lower ``rules`` (name → AST) into a Grammar (not yet simplified) whose ``lowering``
    lists the terminal choices."""
    lw = Lowering(rules, start, mode=mode, text=text, source=source)
    g = lw.run()
    g.lowering = lw.decisions
    return g


__all__ = ["EPS", "Lowering", "lower", "has_setop"]
