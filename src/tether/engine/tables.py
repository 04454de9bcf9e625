"""The integer tables the mask kernel follows, filled lazily by Python.

One ``StepTables`` belongs to one compiled constraint and is shared by all its
matchers. It interns *parser nodes*: a node is one class of Earley parser states
with equal ``row_key()`` (equal keys ⇒ equal futures, the parser's contract), so a
node id stands for "what may follow" and is valid across steps and matchers.

Arrays (``int32``; ``DEAD = -1``, ``UNKNOWN = -2`` until computed):

* ``table[state, byte]``: the lexer DFA (owned by the regex layer's ``LexerDfa``,
  re-read after every fill because it may be reallocated);
* ``accid[state]``: id of the set of terminals the lexer state accepts, ``DEAD`` if
  it accepts none;
* ``trans[node, accid]``: the node after scanning a lexeme of that terminal set,
  ``DEAD`` if the parser rejects it;
* ``nstart[node]``: the lexer start state for the terminals the node allows;
* ``naccept[node]`` (``int8``): 1 if the parser accepts at that node.

Every miss costs one Python call (a DFA row, or one Earley push + pop); the arrays
only grow, so a filled entry is never recomputed.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tether.engine.rows import RowFiller
from tether.parser.lexer import Lexer
from tether.regex.dfa import LexerDfa

DEAD = -1
UNKNOWN = -2
_SHALLOW_ROWS = 64  # nodes with at most this many parser rows keep their parser
_CHECKPOINT = 512  # deeper ones keep it every this many rows (else rebuilt, see parser_at)
_RECENT = 32  # rebuilt parsers kept, most recent first
TOKEN_STEPS_LIMIT = 1 << 16  # entries of StepTables.token_steps (about 100 bytes each)
TOKEN_MOVES_LIMIT = 1 << 15  # entries of StepTables.token_moves (about 250 bytes each)

ParserFactory = Callable[[], Any]


def _grow(a: NDArray[Any], rows: int, fill: int) -> NDArray[Any]:
    """Return ``a`` with at least ``rows`` rows (doubling), new entries set to ``fill``."""
    if a.shape[0] >= rows:
        return a
    n = max(rows, 2 * a.shape[0], 8)
    b = np.full((n,) + a.shape[1:], fill, dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


class StepTables:
    """Lazily filled lexer/parser tables for one constraint (see module docstring).

    Args:
        lexer: the parser layer's ``Lexer`` (owns the ``LexerDfa`` over all terminals).
        lazy_terminals: ids of terminals that end at their first match.
    """

    def __init__(self, lexer: Lexer, *, ignore: frozenset[int] = frozenset(),
                 lazy_terminals: frozenset[int] = frozenset()) -> None:
        self.lexer = lexer
        self.dfa: LexerDfa = lexer.dfa
        self.rows = RowFiller(self.dfa)
        self.ignore = ignore
        self.lazy = lazy_terminals
        self.accid = np.full(64, UNKNOWN, np.int32)
        self.lazyf = np.full(64, UNKNOWN, np.int32)
        self.acc_sets: list[tuple[int, ...]] = []
        self._acc_ids: dict[tuple[int, ...], int] = {}
        self.trans = np.full((16, 8), UNKNOWN, np.int32)
        self.nstart = np.full(16, UNKNOWN, np.int32)
        self.naccept = np.zeros(16, np.int8)
        self.nodes: dict[Any, int] = {}
        self.node_allowed: list[frozenset[int]] = []
        # a parser per node (pushed only by transition, popped back at once; see
        # parser_at): kept for shallow nodes and every _CHECKPOINT rows; others are
        # rebuilt from their origin (parent node, lexeme)
        self._node_parser: list[Any] = []
        self._node_from: list[tuple[int, int]] = []
        self._recent: OrderedDict[int, Any] = OrderedDict()
        self._start_cache: dict[frozenset[int], int] = {}
        self._acc_upto = 0  # lexer states below this have accid / lazyf set
        # ``Matcher.consume``'s fast path. token_steps: ``ls * vocabulary size + token``
        # -> the lexer state reached when the token's bytes stay inside the lexeme begun
        # at ``ls`` (no lexeme ends: the node plays no part); token_moves: that key and a
        # node -> (lexer state, node, at lexeme start, the lexemes that changed the node)
        # for the other tokens. Only verified entries go in, and an entry is a pure
        # function of filled table entries (which never change), so readers need no
        # lock: one dict lookup is atomic. Each is emptied at its limit.
        self.token_steps: dict[int, int] = {}
        # lexer state -> every ASCII text byte leads back to it (``ascii_loop``)
        self.ascii_loops: dict[int, bool] = {}
        self.token_moves: dict[tuple[int, int], tuple[int, int, bool, tuple[int, ...]]] = {}

    # ---- lexer side -------------------------------------------------------------------
    @property
    def table(self) -> NDArray[np.int32]:
        return self.dfa.table

    def _ensure_accid(self, state: int) -> int:
        if self.accid.shape[0] <= state:
            self.sync(state + 1)
        a = int(self.accid[state])
        if a != UNKNOWN:
            return a
        a, lazy = self._accid_new(state)
        self.accid[state] = a
        self.lazyf[state] = lazy
        return a

    def _accid_new(self, state: int) -> tuple[int, int]:
        """``(accid, lazyf)`` of ``state`` (a new terminal set gets the next id)."""
        acc = self.dfa.accepting(state)  # terminals in increasing order
        if not acc:
            return DEAD, 0
        a = self._acc_ids.get(acc, -1)
        if a < 0:
            a = len(self.acc_sets)
            self._acc_ids[acc] = a
            self.acc_sets.append(acc)
            if self.trans.shape[1] <= a:
                t = np.full((self.trans.shape[0], 2 * self.trans.shape[1]), UNKNOWN, np.int32)
                t[:, : self.trans.shape[1]] = self.trans
                self.trans = t
        lazy = bool(self.lazy) and any(t in self.lazy for t in acc)
        return a, 1 if lazy else 0

    def accid_of(self, state: int) -> int:
        return self._ensure_accid(state)

    def is_lazy_accept(self, state: int) -> bool:
        """True if ``state`` accepts a lazy terminal (the lexeme ends right here)."""
        self._ensure_accid(state)
        return bool(self.lazyf[state] == 1)

    def fill_row(self, state: int, need: int | None = None) -> None:
        """Make the transitions of lexer state ``state`` known for the bytes in ``need``
        (a 256-bit int; None: the whole row)."""
        self.rows.fill(state, need)
        self._new_states()

    def lex_step(self, state: int, b: int, ahead: bool = True) -> int:
        """Lexer transition, filling its byte class if unknown (and, with ``ahead``, the
        cheap other classes and single-class successors a trie walk will likely need:
        ``RowFiller.fill``)."""
        s = int(self.dfa.table[state, b])
        if s == UNKNOWN:
            self.rows.fill(state, 1 << b, ahead)
            self._new_states()
            s = int(self.dfa.table[state, b])
        return s

    def run_inside(self, ls: int, data: bytes) -> int:
        """The lexer state after ``data`` from ``ls`` when the bytes stay inside the
        current lexeme (``LexerDfa.run_inside``: no state between is made), else DEAD (a
        lexeme would end on the way: the per-byte path decides). Grammars without lazy
        terminals only (a lazy lexeme ends at its first match). The state's ``accid`` and
        ``lazyf`` are known after."""
        s = int(self.dfa.run_inside(ls, data))
        self._new_states()
        return s

    def ascii_loop(self, ls: int) -> bool:
        """Every ASCII text byte (``0x20..0x7E`` but ``"`` and ``\\``) leads from ``ls`` back
        to ``ls``, which ends no lexeme at once (a string body's state): a token of those
        bytes leaves the state as it is. Decided once per state, from the entries known
        then (an unknown one: False), by the mask of a state whose slice depth is
        unbounded (its ASCII entries are filled by then); ``consume`` reads the kept
        answers only. Caller holds the lock (a row's first fill is several numpy stores)."""
        got = self.ascii_loops.get(ls)
        if got is None:
            self._ensure_accid(ls)
            got = self.ascii_loops[ls] = (bool((self.dfa.table[ls, _ASCII_TEXT] == ls).all())
                                          and int(self.lazyf[ls]) == 0)
        return got

    def horizon_state(self, ls: int, horizon: int) -> int:
        """``LexerDfa.horizon_state``: the state no string of at most ``horizon`` bytes
        tells apart from ``ls`` (its ``accid`` / ``lazyf`` known after)."""
        s = int(self.dfa.horizon_state(ls, horizon))
        self._new_states()
        return s

    def _new_states(self) -> None:
        """``accid`` / ``lazyf`` of the lexer states created since the last call (the
        kernels read them for every state they reach: an unknown one is a miss)."""
        n = self.dfa.n_states
        lo = self._acc_upto
        if lo < n:
            if self.accid.shape[0] < n:
                self.sync(n)
            known = self.accid[lo:n].tolist()
            accid, lazyf = [], []
            for st in range(lo, n):
                a = known[st - lo]
                if a == UNKNOWN:
                    a, z = self._accid_new(st)
                else:
                    z = int(self.lazyf[st])
                accid.append(a)
                lazyf.append(z)
            self.accid[lo:n] = accid  # one store each, after every id is known
            self.lazyf[lo:n] = lazyf
            self._acc_upto = n

    def start_state(self, allowed: frozenset[int]) -> int:
        s = self._start_cache.get(allowed)
        if s is None:
            s = int(self.lexer.start_state(allowed))
            self._start_cache[allowed] = s
        return s

    # ---- parser side ------------------------------------------------------------------
    def intern(self, parser: Any, origin: tuple[int, int] = (-1, -1)) -> int:
        """Node id of ``parser``'s current state (creating the node if new).

        ``origin = (node, accid)``: ``parser`` was a parser at ``node`` that scanned a
        lexeme of accepting set ``accid``. A new deep node then keeps no copy of the
        parser (its row stack: memory quadratic over a long sequence of new nodes), only
        its origin, and ``parser_at`` rebuilds it from the nearest kept ancestor. Its
        copy goes to the bounded recent ones instead, as the walk or the decode that made
        the node mostly steps on from it next (the 300 dev schemas' run about 4 % faster
        than replaying its lexeme there)."""
        key = parser.row_key()
        n = self.nodes.get(key)
        if n is not None:
            return n
        n = len(self.node_allowed)
        self.nodes[key] = n
        allowed = frozenset(parser.allowed_terminals())  # (a frozenset: the same object)
        if self.ignore:  # (a union is a new set, hashed again at each lookup below)
            allowed |= self.ignore
        self.node_allowed.append(allowed)
        rows = parser.n_rows
        keep = origin[0] < 0 or rows <= _SHALLOW_ROWS or rows % _CHECKPOINT == 0
        if keep:
            self._node_parser.append(parser.copy())
        else:
            self._node_parser.append(None)
            self._remember(n, parser.copy())
        self._node_from.append(origin)
        if self.trans.shape[0] <= n:
            self.trans = _grow(self.trans, n + 1, UNKNOWN)
            self.nstart = _grow(self.nstart, n + 1, UNKNOWN)
            self.naccept = _grow(self.naccept, n + 1, 0)
        self.nstart[n] = self.start_state(allowed)
        self.naccept[n] = 1 if parser.is_accepting() else 0
        return n

    def parser_at(self, node: int) -> Any:
        """A parser (a fresh copy, free to push) whose state is in class ``node``.

        Any parser of the class will do: equal row keys mean equal futures, so the node
        reached by pushing a lexeme on it is the same class of futures as from any other
        member. Cost: one list copy of the representative's row stack; for a node kept
        only by its origin, the pushes from the nearest kept ancestor (at most
        ``_CHECKPOINT`` when they are not recent)."""
        p = self._node_parser[node]
        if p is not None:
            return p.copy()
        hit = self._recent.get(node)
        if hit is not None:
            self._recent.move_to_end(node)
            return hit.copy()
        path: list[int] = []
        n = node
        while self._node_parser[n] is None and n not in self._recent:
            n, a = self._node_from[n]
            path.append(a)
        base = self._node_parser[n]
        base = (base if base is not None else self._recent[n]).copy()
        for a in reversed(path):
            if not self.push_lexeme(base, a):  # pragma: no cover - the tables said it scans
                raise AssertionError("a node's origin lexeme no longer scans")
        self._remember(node, base.copy())
        return base

    def _remember(self, node: int, parser: Any) -> None:
        """Keep ``parser`` (a copy no one else holds) as ``node``'s among the recent ones."""
        recent = self._recent
        recent[node] = parser
        if len(recent) > _RECENT:
            recent.popitem(last=False)

    def transition(self, node: int, a: int, parser: Callable[[], Any] | None = None) -> int:
        """``trans[node, a]``, computing it if unknown with ``parser()`` (a parser at
        ``node``; default: the node's kept parser, else ``parser_at(node)``).

        The parser is returned in the state it was given in (push, intern, pop).
        """
        c = int(self.trans[node, a])
        if c != UNKNOWN:
            return c
        if parser is not None:
            p = parser()
        else:  # the node's own parser when it keeps one: pushed and popped back below,
            # under the caller's lock like every fill (no copy of its row stack)
            p = self._node_parser[node]
            if p is None:
                p = self.parser_at(node)
        before = p.n_rows
        try:
            c = self.intern(p, (node, a)) if self.push_lexeme(p, a) else DEAD
        finally:
            p.truncate(before)
        self.trans[node, a] = c
        return c

    def push_lexeme(self, parser: Any, a: int) -> bool:
        """Scan a lexeme of accepting set ``a`` on ``parser``; False (unchanged) if rejected.

        As ``ByteParser``: the lexeme is scanned as those of its terminals the parser
        allows; if it allows none, the lexeme is an ``%ignore`` one and nothing is pushed.
        """
        acc = self.acc_sets[a]
        allowed = parser.allowed_terminals()
        scan = [t for t in acc if t in allowed]
        if scan:
            return bool(parser.push(scan))
        return any(t in self.ignore for t in acc)

    def step(self, ls: int, node: int, b: int, parser: Callable[[], Any] | None = None
             ) -> tuple[int, int]:
        """One byte from (lexer state, node): the next (state, node), or (DEAD, DEAD).

        Fills every table entry the kernels need for this step, so a kernel resumed on
        the same trie node will not miss again. ``parser()`` gives a parser at ``node``
        (only called when a parser transition is unknown).
        """
        s, c, _ = self.step_detail(ls, node, b, parser)
        return s, c

    def step_detail(self, ls: int, node: int, b: int, parser: Callable[[], Any] | None = None,
                    ahead: bool = True) -> tuple[int, int, list[tuple[int, int, int]]]:
        """As ``step``, plus the lexemes scanned on the way: ``[(accid, node after, kind)]``,
        kind 0 for a lexeme ended by ``b``, 1 for a lazy lexeme ended right after ``b``
        (the new state is then a lexeme start). ``ahead=False`` (a caller that follows
        one path: ``Matcher``'s moves) fills only the classes of ``b``."""
        pushes: list[tuple[int, int, int]] = []
        s = self.lex_step(ls, b, ahead)
        c = node
        if s < 0:
            a = self._ensure_accid(ls)
            if a < 0:
                return DEAD, DEAD, pushes
            c = self.transition(node, a, parser)
            if c < 0:
                return DEAD, DEAD, pushes
            pushes.append((a, c, 0))
            s = self.lex_step(int(self.nstart[c]), b, ahead)
            if s < 0:
                return DEAD, DEAD, pushes
        a = self._ensure_accid(s)
        if self.lazyf[s] == 1:
            if c == node:
                c2 = self.transition(c, a, parser)
            else:  # a parser at c: push the first lexeme on a parser at node
                c2 = self._transition_after(node, pushes[0][0], c, a, parser)
            if c2 < 0:
                return DEAD, DEAD, pushes
            pushes.append((a, c2, 1))
            s, c = int(self.nstart[c2]), c2
            self._ensure_accid(s)
        return s, c, pushes

    def _transition_after(self, node: int, a0: int, c: int, a: int,
                          parser: Callable[[], Any] | None) -> int:
        if int(self.trans[c, a]) != UNKNOWN:
            return int(self.trans[c, a])
        if parser is None:
            return self.transition(c, a)
        p = parser()
        before = p.n_rows
        try:
            self.push_lexeme(p, a0)
            return self.transition(c, a, lambda: p)
        finally:
            p.truncate(before)

    def sync(self, at_least: int = 0) -> None:
        """Grow the per-state arrays to the lexer table's capacity (before a kernel run)."""
        cap = max(self.dfa.table.shape[0], at_least)
        if self.accid.shape[0] < cap:
            self.accid = _grow(self.accid, cap, UNKNOWN)
            self.lazyf = _grow(self.lazyf, cap, UNKNOWN)


_ASCII_TEXT = np.asarray([b for b in range(0x20, 0x7F) if b not in (0x22, 0x5C)], np.intp)
