"""Earley recognizer over lexemes, with rows pushed and popped as text is consumed.

The parser holds a stack of rows (Earley sets); row ``i`` is the state after ``i``
lexemes. ``push(terminals)`` scans one lexeme (that matched any of ``terminals``) and
builds the next row; ``pop(n)`` drops rows, which is how the mask engine walks back up a
token trie. A row is split as in Aycock and Horspool (2002):

* the *kernel*: items ``origin << pos_bits | p`` with ``origin`` before the row, made by
  scanning and completing (a tuple of ints; no per-item objects);
* the *prediction*: every item the row predicts (origin = the row), which depends only on
  the set of nonterminals the kernel waits on, so it is shared through a cache in
  ``ParserTables`` (``Prediction``) rather than rebuilt per row.

Nullable symbols are skipped at prediction and at scan/complete time (the item ``A -> α .
B β`` with ``B`` nullable also yields ``A -> α B . β``), so items completing in the row
that predicted them never need to run. Right recursion stays linear with Leo's
optimization (Leo, "A general context-free parsing algorithm running in linear time on
every LR(k) grammar", 1991): when row ``j`` holds exactly one item waiting on ``A`` and
advancing it completes its rule, the chain of such completions is followed once and its
topmost item memoized in row ``j``; completing ``A`` back to ``j`` then adds only that
item. Left recursion needs nothing special.

Cost per ``push``: linear in the items of the new row (constant for LR(k) grammars, as
with Leo), plus the completions it triggers. ``pop`` is a slice deletion. A row keeps the
last row built from it, so pushing the same lexeme again after a pop reuses that row
instead of recomputing it (llguidance does the same: a trie walk often pops and pushes
the same lexeme again). Rows hold tuples and int-only dicts, which the cyclic garbage
collector stops tracking, so long inputs do not make every collection slower.
"""

from __future__ import annotations

from collections.abc import Iterable

from tether.errors import LimitError
from tether.parser.tables import ParserTables, Prediction

_EMPTY: dict[int, tuple[int, ...]] = {}  # shared by rows with nothing to scan or wait on


class Row:
    """One Earley set. Immutable once built (apart from its memo caches).

    Attributes:
        index: position in the row stack (= lexemes consumed).
        kernel: the kernel items (ints).
        pred: the predicted part.
        kscan: terminal -> kernel items advanced past it.
        kwait: nonterminal -> kernel items advanced past it.
        accepting: the text so far is a sentence.
        leo: nonterminal -> topmost Leo item completing back to this row, or -1 (none);
            None until first needed.
    """

    __slots__ = (
        "index",
        "kernel",
        "pred",
        "kscan",
        "kwait",
        "accepting",
        "leo",
        "_child_key",
        "_child",
        "_allowed",
        "_key",
    )

    def __init__(
        self,
        index: int,
        kernel: tuple[int, ...],
        pred: Prediction,
        kscan: dict[int, tuple[int, ...]],
        kwait: dict[int, tuple[int, ...]],
        accepting: bool,
    ) -> None:
        self.index = index
        self.kernel = kernel
        self.pred = pred
        self.kscan = kscan
        self.kwait = kwait
        self.accepting = accepting
        self.leo: dict[int, int] | None = None
        self._child_key: object = None  # the last lexeme scanned from this row, and the row
        self._child: Row | None = None  # it gave (a one-entry cache: pushes repeat after pops)
        self._allowed: frozenset[int] | None = None
        self._key = -1

    def allowed(self) -> frozenset[int]:
        a = self._allowed
        if a is None:
            a = self._allowed = (
                self.pred.terminals.union(self.kscan) if self.kscan else self.pred.terminals
            )
        return a


class EarleyParser:
    """An Earley recognizer over terminal ids (see the module docstring).

    Never raises on input: ``push`` returns False when no terminal of the lexeme fits.
    The one exception is a bound: a row past ``tables.max_items`` Earley items
    (``Limits.max_earley_items``) raises LimitError (an ambiguous grammar on a long
    input); the mask engine turns it into the matcher's error at decode time.
    """

    __slots__ = ("tables", "rows", "leo")

    def __init__(self, tables: ParserTables, *, leo: bool = True) -> None:
        self.tables = tables
        self.leo = leo
        t = tables
        first = Row(0, (), t.prediction(frozenset((t.start,))), _EMPTY, _EMPTY, t.nullable[t.start])
        self.rows: list[Row] = [first]

    # -- state -----------------------------------------------------------------------------

    @property
    def n_rows(self) -> int:
        """Rows on the stack (one more than the lexemes consumed)."""
        return len(self.rows)

    def allowed_terminals(self) -> frozenset[int]:
        """Terminals that may start the next lexeme (cached per row)."""
        return self.rows[-1].allowed()

    def is_accepting(self) -> bool:
        """The lexemes consumed so far form a sentence of the grammar."""
        return self.rows[-1].accepting

    def copy(self) -> EarleyParser:
        """An independent parser in the same state. Rows are shared (they are immutable);
        cost: one list copy of the row stack."""
        other = EarleyParser.__new__(EarleyParser)
        other.tables, other.leo, other.rows = self.tables, self.leo, list(self.rows)
        return other

    def snapshot(self) -> tuple[Row, ...]:
        """The row stack, for ``restore``; O(rows)."""
        return tuple(self.rows)

    def restore(self, snapshot: tuple[Row, ...]) -> None:
        self.rows = list(snapshot)

    def row_key(self) -> int:
        """A small int naming the current row's future: rows with equal keys (of parsers
        over the same tables) accept exactly the same continuations.

        A kernel item ``A -> α . β`` from row ``j`` depends on row ``j`` only through what
        completing ``A`` back to ``j`` yields. Where that completion is a Leo chain, it
        yields one item whose own completion depends on an older row; otherwise it depends
        on all of row ``j``. So a row's key is its prediction plus, per kernel item, its
        dotted position and that context (the Leo top's position and the key of the row its
        completion reaches). Right-recursive lists therefore reach a fixed key instead of
        one key per length. Costs the size of the kernel the first time per row.
        """
        row = self.rows[-1]
        if row._key >= 0:
            return row._key
        contexts = self._contexts(row)
        for _, _, dep in contexts:
            if dep._key < 0:
                break
        else:  # the rows it depends on have keys (the usual case): this one's alone
            content = (row.pred.key, row.accepting,
                       frozenset([(p, top, dep._key) for p, top, dep in contexts]))
            k = self.tables.row_keys.get(content)
            if k is None:
                k = self.tables.row_keys.setdefault(content, next(self.tables.row_key_ids))
            row._key = k
            return k
        # give keys to the rows this one depends on first (iteratively, oldest first)
        need: dict[int, Row] = {}
        todo = [row]
        while todo:
            r = todo.pop()
            if r._key >= 0 or r.index in need:
                continue
            need[r.index] = r
            for _, _, dep in self._contexts(r):
                if dep._key < 0 and dep.index not in need:
                    todo.append(dep)
        interned = self.tables.row_keys
        for i in sorted(need):
            r = need[i]
            content = (
                r.pred.key,
                r.accepting,
                frozenset((p, top, dep._key) for p, top, dep in self._contexts(r)),
            )
            k = interned.get(content)
            if k is None:  # (setdefault + a counter: threads sharing the tables agree)
                k = interned.setdefault(content, next(self.tables.row_key_ids))
            r._key = k
        return row._key

    def _contexts(self, row: Row) -> list[tuple[int, int, Row]]:
        """Per kernel item of ``row``: (dotted position, Leo top position or -1, the row
        whose content its completion depends on)."""
        t = self.tables
        pb, lhs, rows = t.pos_bits, t.lhs, self.rows
        pm = (1 << pb) - 1
        out = []
        leo = self.leo
        for it in row.kernel:
            p, j = it & pm, it >> pb
            if leo:
                memo = rows[j].leo  # _leo_top's memo read here first: no call on a hit
                top = memo.get(lhs[p], -2) if memo is not None else -2
                if top == -2:
                    top = self._leo_top(j, lhs[p])
            else:
                top = -1
            if top >= 0:
                out.append((p, top & pm, rows[top >> pb]))
            else:
                out.append((p, -1, rows[j]))
        return out

    # -- moves -----------------------------------------------------------------------------

    def push(self, terminal_ids: Iterable[int] | int) -> bool:
        """Scan one lexeme that matched every terminal in ``terminal_ids`` (an ambiguous
        lexeme matches several) and push the resulting row.

        Returns False, leaving the parser unchanged, if none of them can be scanned here.
        """
        row = self.rows[-1]
        if isinstance(terminal_ids, int):
            key: int | tuple[int, ...] = terminal_ids
        else:
            key = tuple(sorted(terminal_ids))
            if len(key) == 1:
                key = key[0]
        if key == row._child_key:
            child = row._child
        else:
            child = self._scan(row, (key,) if isinstance(key, int) else key)
            row._child_key, row._child = key, child
        if child is None:
            return False
        self.rows.append(child)
        return True

    def pop(self, n: int = 1) -> None:
        """Drop the last ``n`` rows (undo ``n`` pushes). The first row is never dropped.

        Raises:
            ValueError: ``n`` is negative or more than the pushes on the stack.
        """
        if n < 0 or n >= len(self.rows):
            raise ValueError(f"cannot pop {n} rows from a parser with {len(self.rows) - 1} pushed")
        if n:
            del self.rows[-n:]

    def truncate(self, n_rows: int) -> None:
        """Pop rows until ``n_rows`` remain."""
        self.pop(len(self.rows) - n_rows)

    # -- the algorithm ---------------------------------------------------------------------

    def _scan(self, row: Row, ts: tuple[int, ...]) -> Row | None:
        seeds: list[int] = []
        base = row.index << self.tables.pos_bits
        kscan, pscan = row.kscan, row.pred.scan
        for t in ts:
            k = kscan.get(t)
            if k:
                seeds += k
            q = pscan.get(t)
            if q:
                seeds += [base | p for p in q]
        if not seeds:
            return None
        return self._complete(seeds)

    def _complete(self, stack: list[int]) -> Row:
        """Close the kernel started by ``stack`` (scanned items) under completion."""
        t = self.tables
        sym, lhs, nullable = t.sym, t.lhs, t.nullable
        n_t, pb = t.n_terminals, t.pos_bits
        pm = (1 << pb) - 1
        rows, use_leo = self.rows, self.leo
        cap = t.max_items
        items: set[int] = set()
        kscan: dict[int, list[int]] = {}
        kwait: dict[int, list[int]] = {}
        while stack:
            it = stack.pop()
            if it in items:
                continue
            items.add(it)
            if len(items) > cap:
                raise LimitError("max_earley_items", len(items), cap, f"lexeme {len(rows)}",
                                 detail="items of one Earley row")
            p = it & pm
            s = sym[p]
            if s < 0:  # complete: A -> γ . from origin j (j is before this row)
                j = it >> pb
                a = lhs[p]
                rj = rows[j]
                if use_leo:
                    memo = rj.leo
                    top = memo.get(a, -2) if memo is not None else -2
                    if top == -2:
                        top = self._leo_top(j, a)
                    if top >= 0:
                        stack.append(top)
                        continue
                w = rj.kwait.get(a)
                if w:
                    stack += w
                q = rj.pred.wait.get(a)
                if q:
                    b = j << pb
                    stack += [b | x for x in q]
            elif s < n_t:
                lst = kscan.get(s)
                if lst is None:
                    kscan[s] = [it + 1]
                else:
                    lst.append(it + 1)
                if nullable[s]:  # a terminal that may be absent
                    stack.append(it + 1)
            else:
                lst = kwait.get(s)
                if lst is None:
                    kwait[s] = [it + 1]
                else:
                    lst.append(it + 1)
                if nullable[s]:
                    stack.append(it + 1)
        pred = t.prediction(frozenset(kwait)) if kwait else t.empty_prediction
        if len(items) + len(pred.positions) > cap:
            raise LimitError("max_earley_items", len(items) + len(pred.positions), cap,
                             f"lexeme {len(rows)}", detail="items of one Earley row")
        # tuples of ints (and dicts holding only those) are untracked by the cyclic GC, which
        # otherwise rescans every row of a long input again and again
        return Row(
            len(rows),
            tuple(items),
            pred,
            {k: tuple(v) for k, v in kscan.items()} if kscan else _EMPTY,
            {k: tuple(v) for k, v in kwait.items()} if kwait else _EMPTY,
            t.accept_pos in items,
        )

    def _leo_top(self, j: int, a: int) -> int:
        """The topmost item of the deterministic completion chain that completing ``a``
        back to row ``j`` starts, or -1 if that completion is not deterministic.

        The chain is followed iteratively and every link memoized, so each (row,
        nonterminal) pair is resolved once.
        """
        t = self.tables
        sym, lhs, pb = t.sym, t.lhs, t.pos_bits
        pm = (1 << pb) - 1
        rows = self.rows
        chain: list[tuple[dict[int, int], int]] = []  # links found, memoized at the end
        seen: set[tuple[int, int]] | None = None
        top = -1
        while True:
            rj = rows[j]
            memo = rj.leo
            if memo is None:
                memo = rj.leo = {}
            r = memo.get(a)
            if r is not None:
                if r >= 0:
                    top = r
                break
            kw = rj.kwait.get(a)
            pw = rj.pred.wait.get(a)
            if kw:
                w = kw[0] if len(kw) == 1 and not pw else -1
            else:
                w = (j << pb) | pw[0] if pw and len(pw) == 1 else -1
            if w < 0 or sym[w & pm] >= 0:  # not exactly one waiting item, or it goes on
                memo[a] = -1
                break
            if chain:
                if seen is None:
                    seen = {(j, a)}
                elif (j, a) in seen:  # a cycle of unit rules: no Leo items on it
                    top = -1
                    break
                else:
                    seen.add((j, a))
            chain.append((memo, a))
            top = w
            j, a = w >> pb, lhs[w & pm]
        for memo, a in chain:
            memo[a] = top
        return top

    # -- debugging -------------------------------------------------------------------------

    def describe_row(self, index: int = -1) -> list[str]:
        """The items of a row as text (kernel then predicted), for debugging and tests."""
        t = self.tables
        row = self.rows[index]
        pm = (1 << t.pos_bits) - 1
        out = [f"{t.describe(it & pm)}  @{it >> t.pos_bits}" for it in sorted(row.kernel)]
        out += [f"{t.describe(p)}  @{row.index}" for p in sorted(row.pred.positions)]
        return out
