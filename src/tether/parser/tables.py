"""Integer tables of a grammar, as the Earley parser reads them.

1. Number the symbols: terminals ``0 .. T-1`` (in ``tables.terminals``), then the
   nonterminals; symbol ``T`` is an added start symbol ``$start -> start``.
2. Lay every rule out flat: rule ``r`` with ``k`` symbols owns the *dotted positions*
   ``rule_pos[r] .. rule_pos[r] + k``; ``sym[p]`` is the symbol after the dot (or ``-1``
   at the end of the rule) and ``lhs[p]`` the rule's left-hand side. Advancing the dot
   is ``p + 1``, so an Earley item is the single int ``origin << pos_bits | p``.
3. Precompute what prediction needs (Aycock and Horspool, "Practical Earley Parsing",
   2002): nullable symbols, and per nonterminal ``A`` the closure of nonterminals that
   predicting ``A`` predicts (skipping nullable prefixes) and the dotted positions of
   ``A``'s own rules that prediction creates (dot at 0, and past each nullable prefix).

Rules that can never derive a finite text (non-productive) and rules not reachable from
the start are dropped here, so that every item the parser creates can still complete.

Cost: linear in the size of the grammar, plus the prediction closures
(``O(nonterminals²)`` at worst). Tables are immutable and shared by every parser of a
grammar; the per-prediction-set cache (``prediction``) and the interned row keys grow as
parsers meet new sets (both safe to share between threads under the GIL).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from tether.errors import GrammarError
from tether.grammar.ir import NT, Grammar, Rule, T, Terminal

START = "$start"


@dataclass(frozen=True, slots=True)
class Prediction:
    """The items a row predicts, for one set of predicted nonterminals (origin = the row).

    Attributes:
        nts: every nonterminal predicted (closed under prediction).
        scan: terminal -> dotted positions *after* scanning it (``p + 1``).
        wait: nonterminal -> dotted positions after completing it (``p + 1``).
        terminals: ``frozenset(scan)``.
        positions: every predicted dotted position.
        key: small int, equal for equal ``nts``.
    """

    nts: frozenset[int]
    scan: dict[int, tuple[int, ...]]
    wait: dict[int, tuple[int, ...]]
    terminals: frozenset[int]
    positions: frozenset[int]
    key: int


class ParserTables:
    """The integer encoding of a grammar (see the module docstring).

    Attributes:
        terminals: ``Terminal`` per terminal id ``0 .. n_terminals - 1``.
        terminal_ids: terminal name -> id.
        ignore: ids of the terminals that may appear between any two lexemes (``%ignore``).
        nonterminals: names of the nonterminals; symbol id ``n_terminals + k`` is
            ``nonterminals[k]``; ``nonterminals[0]`` is the added ``$start``.
        start: symbol id of ``$start``; ``start_name``: the grammar's start rule.
        rule_lhs, rule_rhs, rule_pos: per rule id: left side, right side (symbol ids), and the
            dotted position of its first symbol.
        sym, lhs, rule_of: per dotted position: symbol after the dot (-1 at the end),
            left side, rule id.
        nullable: per symbol id (a terminal is nullable when its regex matches ε).
        nullable_terminals: ids of those terminals.
        rules_of: per symbol id, the rule ids of a nonterminal (empty for terminals).
        pred_closure: per symbol id, the nonterminals predicting it predicts (itself included).
        own_positions: per symbol id, the dotted positions predicting it creates in its own rules.
        pos_bits: bits of the position part of an item.
        accept_pos: dotted position of ``$start -> start .``.
        dropped: names of rules dropped as non-productive or unreachable.
    """

    def __init__(self, grammar: Grammar, nullable_terminals: Iterable[str] | None = None) -> None:
        rules, dropped = _useful_rules(grammar)
        self.dropped: tuple[str, ...] = tuple(dropped)
        self.start_name = grammar.start
        # terminals: every one the kept rules use, then %ignore ones, in definition order
        used = {s.name for r in rules for s in r.rhs if isinstance(s, T)}
        for name in used | set(grammar.ignore):
            if name not in grammar.terminals:
                raise GrammarError(f"terminal {name!r} is used but not defined")
        self.terminals: list[Terminal] = [
            t for n, t in grammar.terminals.items() if n in used or n in grammar.ignore
        ]
        self.terminal_ids: dict[str, int] = {t.name: i for i, t in enumerate(self.terminals)}
        self.ignore: tuple[int, ...] = tuple(
            dict.fromkeys(self.terminal_ids[n] for n in grammar.ignore)
        )
        n_t = self.n_terminals = len(self.terminals)
        names = [START, *dict.fromkeys(r.lhs for r in rules)]
        self.nonterminals: list[str] = names
        nt_ids = {n: n_t + k for k, n in enumerate(names)}
        self.n_symbols = n_t + len(names)
        self.start = nt_ids[START]

        def sid(s: NT | T) -> int:
            return self.terminal_ids[s.name] if isinstance(s, T) else nt_ids[s.name]

        encoded: list[tuple[int, tuple[int, ...]]] = [(self.start, (nt_ids[grammar.start],))]
        encoded += [(nt_ids[r.lhs], tuple(sid(s) for s in r.rhs)) for r in rules]
        encoded = list(dict.fromkeys(encoded))  # identical alternatives add nothing
        self.rule_lhs = [a for a, _ in encoded]
        self.rule_rhs = [b for _, b in encoded]
        self.rule_pos: list[int] = []
        self.sym: list[int] = []
        self.lhs: list[int] = []
        self.rule_of: list[int] = []
        for r, (a, rhs) in enumerate(encoded):
            self.rule_pos.append(len(self.sym))
            self.sym += [*rhs, -1]
            self.lhs += [a] * (len(rhs) + 1)
            self.rule_of += [r] * (len(rhs) + 1)
        self.pos_bits = max(1, len(self.sym).bit_length())
        self.accept_pos = self.rule_pos[0] + 1

        self.rules_of: list[tuple[int, ...]] = [() for _ in range(self.n_symbols)]
        for r, a in enumerate(self.rule_lhs):
            self.rules_of[a] += (r,)
        if nullable_terminals is None:
            from tether.parser.terminals import matches_empty

            nullable_terminals = [t.name for t in self.terminals if matches_empty(t)]
        self.nullable_terminals = frozenset(
            self.terminal_ids[n] for n in nullable_terminals if n in self.terminal_ids
        )
        init = [i in self.nullable_terminals for i in range(self.n_symbols)]
        self.nullable = _nullable(self.n_symbols, self.rule_lhs, self.rule_rhs, init)
        self.own_positions: list[tuple[int, ...]] = [() for _ in range(self.n_symbols)]
        direct: list[set[int]] = [set() for _ in range(self.n_symbols)]
        for r, rhs in enumerate(self.rule_rhs):
            a, p = self.rule_lhs[r], self.rule_pos[r]
            for k, s in enumerate(rhs):
                self.own_positions[a] += (p + k,)
                if s >= n_t:
                    direct[a].add(s)
                if not self.nullable[s]:
                    break
            else:
                self.own_positions[a] += (p + len(rhs),)
        self.pred_closure: list[frozenset[int]] = [frozenset() for _ in range(self.n_symbols)]
        for a in range(n_t, self.n_symbols):
            seen, todo = {a}, [a]
            while todo:
                for b in direct[todo.pop()]:
                    if b not in seen:
                        seen.add(b)
                        todo.append(b)
            self.pred_closure[a] = frozenset(seen)
        self._prediction_ids = itertools.count()
        self._predictions: dict[frozenset[int], Prediction] = {}
        self._by_nts: dict[frozenset[int], Prediction] = {}
        self.empty_prediction = self.prediction(frozenset())
        self.row_keys: dict[object, int] = {}  # interned row contents (EarleyParser.row_key)
        self.row_key_ids = itertools.count()

    @classmethod
    def from_grammar(
        cls, grammar: Grammar, nullable_terminals: Iterable[str] | None = None
    ) -> ParserTables:
        """Encode ``grammar``.

        A terminal whose regex matches the empty string is a nullable symbol (its lexemes
        are never empty; see ``tether.parser.terminals``). ``nullable_terminals`` names them
        directly, skipping the regex layer (for tests of the parser alone).

        Raises:
            GrammarError: the start rule or a used rule/terminal is undefined, or the start
                rule derives no finite text.
        """
        return cls(grammar, nullable_terminals)

    @property
    def n_rules(self) -> int:
        return len(self.rule_lhs)

    def name(self, symbol: int) -> str:
        """The name of a symbol id (terminal or nonterminal)."""
        if symbol < self.n_terminals:
            return self.terminals[symbol].name
        return self.nonterminals[symbol - self.n_terminals]

    def describe(self, pos: int) -> str:
        """A dotted position as text, e.g. ``value -> '[' . items ']'``."""
        r = self.rule_of[pos]
        k = pos - self.rule_pos[r]
        names = [self.name(s) for s in self.rule_rhs[r]]
        names.insert(k, ".")
        return f"{self.name(self.rule_lhs[r])} -> {' '.join(names)}"

    def prediction(self, seeds: frozenset[int]) -> Prediction:
        """The predicted part of a row whose kernel waits on the nonterminals ``seeds``.

        Cached: the first call per distinct ``seeds`` costs the size of the closure.
        """
        pred = self._predictions.get(seeds)
        if pred is not None:
            return pred
        nts: frozenset[int] = frozenset().union(*(self.pred_closure[a] for a in seeds))
        pred = self._by_nts.get(nts)
        if pred is None:
            scan: dict[int, list[int]] = {}
            wait: dict[int, list[int]] = {}
            positions: list[int] = []
            n_t, sym = self.n_terminals, self.sym
            for a in sorted(nts):
                for p in self.own_positions[a]:
                    positions.append(p)
                    s = sym[p]
                    if s >= 0:
                        (scan if s < n_t else wait).setdefault(s, []).append(p + 1)
            pred = Prediction(
                nts,
                {k: tuple(v) for k, v in scan.items()},
                {k: tuple(v) for k, v in wait.items()},
                frozenset(scan),
                frozenset(positions),
                next(self._prediction_ids),
            )
            # setdefault and a counter keep keys distinct when threads share the tables
            pred = self._by_nts.setdefault(nts, pred)
        self._predictions[seeds] = pred
        return pred


def _nullable(
    n_symbols: int, lhs: list[int], rhs: list[tuple[int, ...]], init: list[bool] | None = None
) -> list[bool]:
    nullable = list(init) if init is not None else [False] * n_symbols
    changed = True
    while changed:
        changed = False
        for a, body in zip(lhs, rhs, strict=True):
            if not nullable[a] and all(nullable[s] for s in body):
                nullable[a] = changed = True
    return nullable


def _useful_rules(grammar: Grammar) -> tuple[list[Rule], list[str]]:
    """Rules of ``grammar`` that are productive and reachable from the start, and the names
    of the nonterminals dropped (the grammar layer's ``simplify`` reports these as errors;
    the parser only needs them gone)."""
    defined = set(grammar.nonterminals())
    if grammar.start not in defined:
        raise GrammarError(f"start rule {grammar.start!r} is not defined")
    for r in grammar.rules:
        for s in r.rhs:
            if isinstance(s, NT) and s.name not in defined:
                raise GrammarError(f"rule {s.name!r} is used in {r.lhs!r} but not defined")
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            if r.lhs not in productive and all(
                isinstance(s, T) or s.name in productive for s in r.rhs
            ):
                productive.add(r.lhs)
                changed = True
    if grammar.start not in productive:
        raise GrammarError(f"start rule {grammar.start!r} derives no finite text")
    kept = [
        r for r in grammar.rules if all(isinstance(s, T) or s.name in productive for s in r.rhs)
    ]
    reach, todo = {grammar.start}, [grammar.start]
    by_lhs: dict[str, list[Rule]] = {}
    for r in kept:
        by_lhs.setdefault(r.lhs, []).append(r)
    while todo:
        for r in by_lhs.get(todo.pop(), ()):
            for s in r.rhs:
                if isinstance(s, NT) and s.name not in reach:
                    reach.add(s.name)
                    todo.append(s.name)
    kept = [r for r in kept if r.lhs in reach]
    dropped = [n for n in defined if n not in reach]
    return kept, dropped


def terminal_set(ids: Iterable[int] | int) -> frozenset[int]:
    """``ids`` as a frozenset (a single int is one terminal)."""
    if isinstance(ids, int):
        return frozenset((ids,))
    return ids if isinstance(ids, frozenset) else frozenset(ids)
