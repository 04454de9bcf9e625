"""Integer tables of a grammar, as the Earley parser reads them.

1. Number the symbols: terminals ``0 .. T-1`` (in ``tables.terminals``), then the
   nonterminals; symbol ``T`` is an added start symbol ``$start -> start``.
2. Lay every rule out flat: rule ``r`` with ``k`` symbols owns the *dotted positions*
   ``rule_pos[r] .. rule_pos[r] + k``; ``sym[p]`` is the symbol after the dot (or ``-1``
   at the end of the rule) and ``lhs[p]`` the rule's left-hand side. Advancing the dot
   is ``p + 1``, so an Earley item is the single int ``origin << pos_bits | p``.
3. Know what prediction needs (Aycock and Horspool, "Practical Earley Parsing", 2002):
   nullable symbols (up front), and per nonterminal ``A`` the dotted positions of ``A``'s
   own rules that predicting it creates (dot at 0, and past each nullable prefix) and the
   nonterminals those positions wait on, from which the closure of a predicted set
   follows. These are computed per nonterminal the first time a row predicts it, not for
   every symbol up front: a large grammar's first row needs only a few of them.

Rules that can never derive a finite text (non-productive) and rules not reachable from
the start are dropped here, so that every item the parser creates can still complete.

Cost: construction is linear in the size of the grammar, a few passes over the rules
with no Python loop per symbol beyond encoding each right side once (measured: about
45 ms for a JSON Schema grammar of 21k rules and 76k dotted positions, 1-2 ms for a
typical schema). A prediction costs its closure the first time per predicted set.
Tables are shared by every parser of a grammar; they only grow on first use (per-
nonterminal positions, the per-prediction-set cache ``prediction``, the interned row
keys), idempotently, so sharing them between threads is safe under the GIL.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tether.errors import GrammarError
from tether.grammar.ir import Grammar, Rule, T, Terminal

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
            left side, rule id (``rule_of`` is built on first use).
        nullable: per symbol id (a terminal is nullable when its regex matches ε).
        nullable_terminals: ids of those terminals.
        rules_of: per symbol id, the rule ids of a nonterminal (empty for terminals).
        pred_closure: per symbol id, the nonterminals predicting it predicts (itself
            included); computed per symbol on first use.
        own_positions: per symbol id, the dotted positions predicting it creates in its own
            rules; computed per symbol on first use.
        pos_bits: bits of the position part of an item.
        max_items: Earley items one row may hold (``Limits.max_earley_items`` when the
            tables were built); a push past it raises LimitError.
        accept_pos: dotted position of ``$start -> start .``.
        dropped: names of rules dropped as non-productive or unreachable.
    """

    def __init__(self, grammar: Grammar, nullable_terminals: Iterable[str] | None = None) -> None:
        from tether.limits import current

        # bounds read once, at compile time, under the caller's limits (decode-time pushes
        # must not depend on whatever limits are active then)
        self.max_items: int = current().max_earley_items
        enc = _encode(grammar)
        self.dropped: tuple[str, ...] = enc.dropped
        self.start_name = grammar.start
        self.terminals: list[Terminal] = enc.terminals
        self.terminal_ids: dict[str, int] = {t.name: i for i, t in enumerate(self.terminals)}
        self.ignore: tuple[int, ...] = tuple(
            dict.fromkeys(self.terminal_ids[n] for n in grammar.ignore)
        )
        n_t = self.n_terminals = len(self.terminals)
        self.nonterminals: list[str] = enc.nonterminals
        self.n_symbols = n_t + len(enc.nonterminals)
        self.start = n_t
        self.rule_lhs: list[int] = enc.lhs
        self.rule_rhs: list[tuple[int, ...]] = enc.rhs
        # the flat layout, with no Python loop per symbol (a right side is extended in
        # C: a third of the time of concatenating each with its end mark)
        lens = [len(rhs) + 1 for rhs in enc.rhs]
        self.rule_pos: list[int] = list(itertools.accumulate(lens, initial=0))
        n_pos = self.rule_pos.pop()
        sym: list[int] = []
        extend, mark = sym.extend, sym.append
        for rhs in enc.rhs:
            extend(rhs)
            mark(-1)
        self.sym = sym
        chain = itertools.chain.from_iterable
        self.lhs: list[int] = list(chain(map(operator.mul, zip(enc.lhs), lens)))  # (a,) * len
        self._rule_of: list[int] | None = None
        self.pos_bits = max(1, n_pos.bit_length())
        self.accept_pos = self.rule_pos[0] + 1

        self.rules_of: list[tuple[int, ...]] = enc.rules_of or _rules_of(enc.lhs, self.n_symbols)
        if nullable_terminals is None:
            from tether.parser.terminals import matches_empty

            nullable_terminals = [t.name for t in self.terminals if matches_empty(t)]
        self.nullable_terminals = frozenset(
            self.terminal_ids[n] for n in nullable_terminals if n in self.terminal_ids
        )
        self.nullable = _nullable(n_t, self.n_symbols, enc.lhs, enc.rhs, self.nullable_terminals)
        self.own_positions = _PerSymbol(self._own_positions, self.n_symbols)
        self.pred_closure = _PerSymbol(self._closure, self.n_symbols)
        self._direct: dict[int, tuple[int, ...]] = {}
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

    @property
    def rule_of(self) -> list[int]:
        """Per dotted position, its rule id (built on first use; ``describe`` needs it)."""
        ro = self._rule_of
        if ro is None:
            lens = [len(rhs) + 1 for rhs in self.rule_rhs]
            ro = self._rule_of = list(
                itertools.chain.from_iterable(map(itertools.repeat, range(len(lens)), lens))
            )
        return ro

    def _own_positions(self, a: int) -> tuple[int, ...]:
        """The dotted positions predicting ``a`` creates in its own rules (dot at 0 and past
        each nullable prefix); also records the nonterminals those positions wait on."""
        out: list[int] = []
        direct: set[int] = set()
        n_t, nullable = self.n_terminals, self.nullable
        for r in self.rules_of[a]:
            p = self.rule_pos[r]
            rhs = self.rule_rhs[r]
            for k, s in enumerate(rhs):
                out.append(p + k)
                if s >= n_t:
                    direct.add(s)
                if not nullable[s]:
                    break
            else:
                out.append(p + len(rhs))
        self._direct[a] = tuple(direct)
        return tuple(out)

    def _closure(self, a: int) -> frozenset[int]:
        if a < self.n_terminals:
            return frozenset()
        return self._close((a,))

    def _close(self, seeds: Iterable[int]) -> frozenset[int]:
        """The nonterminals predicting ``seeds`` predicts (``seeds`` included; terminal ids
        among them predict nothing)."""
        own, direct, n_t = self.own_positions, self._direct, self.n_terminals
        seen = {a for a in seeds if a >= n_t}
        todo = list(seen)
        while todo:
            a = todo.pop()
            d = direct.get(a)
            if d is None:
                own[a]  # fills direct[a]
                d = direct[a]
            for b in d:
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return frozenset(seen)

    def prediction(self, seeds: frozenset[int]) -> Prediction:
        """The predicted part of a row whose kernel waits on the nonterminals ``seeds``.

        Cached: the first call per distinct ``seeds`` costs the size of the closure.
        """
        pred = self._predictions.get(seeds)
        if pred is not None:
            return pred
        nts = self._close(seeds)
        pred = self._by_nts.get(nts)
        if pred is None:
            scan: dict[int, list[int]] = {}
            wait: dict[int, list[int]] = {}
            positions: list[int] = []
            n_t, sym, own = self.n_terminals, self.sym, self.own_positions
            for a in sorted(nts):
                for p in own[a]:
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


class _PerSymbol:
    """A read-only sequence indexed by symbol id whose entries are computed on first use."""

    __slots__ = ("_fn", "_vals")

    def __init__(self, fn: Callable[[int], Any], n: int) -> None:
        self._fn = fn
        self._vals: list[Any] = [None] * n

    def __len__(self) -> int:
        return len(self._vals)

    def __getitem__(self, i: int) -> Any:
        v = self._vals[i]
        if v is None:
            v = self._vals[i] = self._fn(i)
        return v

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self._vals)))


def _nullable(
    n_t: int, n_symbols: int, lhs: list[int], rhs: list[tuple[int, ...]], init: frozenset[int]
) -> list[bool]:
    """Nullable symbols: a worklist over the rules that can be nullable at all (those without
    a non-nullable terminal), so the cost is linear and usually tiny."""
    nullable = [False] * n_symbols
    for t in init:
        nullable[t] = True
    if not init and min(map(len, rhs), default=1):  # no ε rule, no nullable terminal
        return nullable
    if init:
        cand = [r for r, b in enumerate(rhs) if all(s >= n_t or s in init for s in b)]
    else:  # min() in C: every symbol is a nonterminal
        cand = [r for r, b in enumerate(rhs) if not b or min(b) >= n_t]
    count: dict[int, int] = {}
    users: dict[int, list[int]] = {}
    todo: list[int] = []
    for r in cand:
        k = 0
        for s in rhs[r]:
            if s >= n_t:
                k += 1
                users.setdefault(s, []).append(r)
        count[r] = k
        if k == 0 and not nullable[lhs[r]]:
            nullable[lhs[r]] = True
            todo.append(lhs[r])
    while todo:
        a = todo.pop()
        for r in users.get(a, ()):
            count[r] -= 1
            if count[r] == 0 and not nullable[lhs[r]]:
                nullable[lhs[r]] = True
                todo.append(lhs[r])
    return nullable


@dataclass(slots=True)
class _Encoded:
    terminals: list[Terminal]
    nonterminals: list[str]
    lhs: list[int]
    rhs: list[tuple[int, ...]]
    dropped: tuple[str, ...]
    rules_of: list[tuple[int, ...]] | None  # None: not known yet


def _rules_of(lhs: list[int], n_symbols: int) -> list[tuple[int, ...]]:
    """Per symbol id, the ids of the rules with that left side."""
    out: list[list[int]] = [[] for _ in range(n_symbols)]
    for r, a in enumerate(lhs):
        out[a].append(r)
    return list(map(tuple, out))


def _encode(grammar: Grammar) -> _Encoded:
    """The useful rules of ``grammar`` (productive and reachable from the start) as ints,
    numbered as the module docstring says, with identical alternatives merged, and the
    names of the nonterminals dropped (the grammar layer's ``simplify`` reports these as
    errors; the parser only needs them gone).

    Every rule is encoded once with provisional ids (terminals in definition order, then
    ``$start``, then the rule names in first-definition order). Productivity is a sweep
    over the rules repeated while it changes (front ends define rules children first, so
    two or three sweeps settle it; a worklist, linear in the grammar, takes over after
    ``_SWEEPS``); reachability is a worklist. When nothing is dropped (the usual case)
    the provisional ids are the final ones and no second pass is made.
    """
    rules = grammar.rules
    tdefs = grammar.terminals
    tid: dict[str, int] = {n: i for i, n in enumerate(tdefs)}
    n_td = len(tid)
    ids = grammar.trimmed_ids
    trimmed: bool
    if ids is not None and START not in ids.nid:
        # the front end encoded the grammar as these tables number it, and pruned it
        # (``Grammar.mark_trimmed``): its ids are the provisional ids, and the final ones
        nt_names = [START, *ids.names]
        nid = ids.nid  # without $start (n_td), which nothing below looks up here
        if grammar.start not in nid:
            raise GrammarError(f"start rule {grammar.start!r} is not defined")
        n_ps = n_ids = n_td + len(nt_names)
        prhs, plhs = ids.rhs, ids.lhs
        trimmed = True
    else:
        nt_names = [START, *dict.fromkeys(map(_LHS, rules))]
        nid = {n: n_td + k for k, n in enumerate(nt_names)}
        if grammar.start not in nid:
            raise GrammarError(f"start rule {grammar.start!r} is not defined")
        n_ps = n_td + len(nt_names)  # undefined terminals get ids from n_ps on
        try:
            tcls = T
            prhs = [
                tuple([tid[s.name] if s.__class__ is tcls else nid[s.name] for s in r.rhs])
                for r in rules
            ]
        except KeyError:  # an undefined name
            prhs = _encode_slow(rules, tid, nid)
        n_ids = max(n_ps, len(tid) + len(nid))
        plhs = list(map(nid.__getitem__, map(_LHS, rules)))
        trimmed = n_ids == n_ps and grammar.trimmed
    n_rules = len(rules)

    by_lhs: list[list[int]]
    kept: Sequence[int]
    dropped: tuple[str, ...]
    if trimmed:
        # every name defined, and the front end pruned the grammar (``mark_trimmed``):
        # every rule is productive and reachable, every terminal used
        for name in grammar.ignore:
            if name not in tdefs:
                raise GrammarError(f"terminal {name!r} is used but not defined")
        start_id = nid[grammar.start]
        by_lhs = [[] for _ in range(n_ids)]
        for r, a in enumerate(plhs, 1):
            by_lhs[a].append(r)
        kept = range(n_rules)
        dropped = ()
        terminals = list(tdefs.values())
    else:
        # productive: terminals (defined or not) are; sweep the rules until nothing changes
        productive = bytearray(n_ids)
        productive[:n_td] = b"\x01" * n_td
        productive[n_ps:] = b"\x01" * (n_ids - n_ps)
        is_prod = productive.__getitem__
        rest: Sequence[int] = range(n_rules)
        for _ in range(_SWEEPS):
            left = []
            for r in rest:
                if all(map(is_prod, prhs[r])):
                    productive[plhs[r]] = 1
                else:
                    left.append(r)
            if len(left) == len(rest):
                break
            rest = left
        else:
            _close_productive(rest, plhs, prhs, productive, n_td, n_ps)
        start_id = nid[grammar.start]
        if not productive[start_id]:
            raise GrammarError(f"start rule {grammar.start!r} derives no finite text")
        good = [True] * n_rules
        for r in rest:
            if not all(map(is_prod, prhs[r])):
                good[r] = False
        # reachable from the start through productive rules (a worklist; each rule is read once
        # and its whole right side added in C); terminals are collected on the way
        # (by_lhs holds rule index + 1: the final id when nothing is dropped, $start -> start
        # being rule 0)
        by_lhs = [[] for _ in range(n_ids)]
        if len(rest) == 0:
            for r, a in enumerate(plhs, 1):
                by_lhs[a].append(r)
        else:
            for r, a in enumerate(plhs, 1):
                if good[r - 1]:
                    by_lhs[a].append(r)
        reach = {start_id}
        expanded = bytearray(n_ids)
        todo = [start_id]
        while todo:
            a = todo.pop()
            if expanded[a]:
                continue
            expanded[a] = 1
            for r in by_lhs[a]:
                right = prhs[r - 1]
                n0 = len(reach)
                reach.update(right)
                if len(reach) != n0:
                    todo += right
        kept = [r for r in range(n_rules) if good[r] and plhs[r] in reach]
        dropped = tuple(n for n in nt_names[1:] if nid[n] not in reach)

        # terminals: every one the kept rules use, then %ignore ones, in definition order
        for name in grammar.ignore:
            if name not in tdefs:
                raise GrammarError(f"terminal {name!r} is used but not defined")
        for s in reach:
            if s >= n_ps:
                name = next(n for n, i in tid.items() if i == s)
                raise GrammarError(f"terminal {name!r} is used but not defined")
        ign = {tid[n] for n in grammar.ignore}
        terminals = [t for i, t in enumerate(tdefs.values()) if i in reach or i in ign]
    every = len(kept) == n_rules
    names = nt_names if every else [START, *dict.fromkeys(nt_names[plhs[r] - n_td] for r in kept)]
    n_t = len(terminals)
    rules_of: list[tuple[int, ...]] | None = None
    if n_t == n_td and names == nt_names:  # provisional ids are final
        lhs = [n_td, *plhs] if every else [n_td, *(plhs[r] for r in kept)]
        rhs = [(start_id,), *prhs] if every else [(start_id,), *(prhs[r] for r in kept)]
    else:
        tr = [-1] * n_ps
        for i, t in enumerate(terminals):
            tr[tid[t.name]] = i
        for k, n in enumerate(names):
            tr[nid[n]] = n_t + k
        lhs = [n_t, *(tr[plhs[r]] for r in kept)]
        rhs = [(tr[start_id],), *(tuple(map(tr.__getitem__, prhs[r])) for r in kept)]
    # identical alternatives add nothing
    pairs = dict.fromkeys(zip(lhs, rhs, strict=True))
    if len(pairs) != len(lhs):
        lhs = [a for a, _ in pairs]
        rhs = [b for _, b in pairs]
    elif every and rules_of is None and n_t == n_td and names == nt_names:
        by_lhs[n_td] = [0]
        del by_lhs[n_ps:]
        rules_of = list(map(tuple, by_lhs))
    return _Encoded(terminals, names, lhs, rhs, dropped, rules_of)


_SWEEPS = 6  # sweeps before the worklist takes over
_LHS = operator.attrgetter("lhs")


def _encode_slow(
    rules: list[Rule], tid: dict[str, int], nid: dict[str, int]
) -> list[tuple[int, ...]]:
    """Right sides symbol by symbol: an undefined rule name raises (in rule order, as the
    grammar's checks do), an undefined terminal gets an id above every other one (from
    ``len(tid) + len(nid)`` on; an error only if a kept rule uses it)."""
    n_ps = len(tid) + len(nid)
    prhs = []
    extra: dict[str, int] = {}
    for r in rules:
        ids = []
        for s in r.rhs:
            if isinstance(s, T):
                i = tid.get(s.name)
                if i is None:
                    i = extra.setdefault(s.name, n_ps + len(extra))
                    tid[s.name] = i
                ids.append(i)
            else:
                i = nid.get(s.name)
                if i is None:
                    raise GrammarError(f"rule {s.name!r} is used in {r.lhs!r} but not defined")
                ids.append(i)
        prhs.append(tuple(ids))
    return prhs


def _close_productive(
    rest: Iterable[int],
    plhs: list[int],
    prhs: list[tuple[int, ...]],
    productive: bytearray,
    n_td: int,
    n_ps: int,
) -> None:
    """Finish the productive set over the rules ``rest`` with a worklist (linear)."""
    count: dict[int, int] = {}
    users: dict[int, list[int]] = {}
    todo: list[int] = []
    for r in rest:
        k = 0
        for s in prhs[r]:
            if n_td <= s < n_ps and not productive[s]:
                k += 1
                users.setdefault(s, []).append(r)
        count[r] = k
        if k == 0 and not productive[plhs[r]]:
            productive[plhs[r]] = 1
            todo.append(plhs[r])
    while todo:
        for r in users.get(todo.pop(), ()):
            count[r] -= 1
            if count[r] == 0 and not productive[plhs[r]]:
                productive[plhs[r]] = 1
                todo.append(plhs[r])
