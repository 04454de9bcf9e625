"""Lazy byte DFA over a set of terminals (the lexer automaton of seed 004, derivre).

1. A state is a tuple of ``(terminal id, derivative)`` pairs, terminals in increasing
   order, with ``∅`` derivatives dropped; states are interned to small ints.
2. ``table`` is a dense ``int32[capacity, 256]``: next state, ``DEAD`` (no terminal can
   continue) or ``UNKNOWN`` (row not computed yet). A numba kernel reads it and returns to
   Python on ``UNKNOWN``; ``fill_row`` computes one row with one derivative per byte
   equivalence class (``ast.byte_classes``), not per byte (see the README for the fast
   paths: one-terminal rows and small states derive through caches on the nodes).
3. The table grows by doubling (the array object is replaced: re-read ``.table``);
   creating more than ``max_states`` states (``Limits.max_dfa_states`` by default)
   raises ``RegexLimitError``; each new state checks the compile deadline
   (``tether.limits.check_deadline``).

Derivatives of expressions with intersection/complement can be empty without being the
``∅`` node; such terminals are dropped from a state by an emptiness check, so ``live``
never names a terminal that can no longer match.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import RegexLimitError
from ..limits import Limits, check_deadline, current
from .ast import (
    EMPTY,
    EPSILON,
    F_BOOLEAN,
    F_COUNTED,
    K_BYTES,
    K_CONCAT,
    Node,
    byte_classes,
    classes_of,
    derivative,
    first_bytes,
    firsts_child,
    node_classes,
)
from .horizon import Horizon
from .language import is_empty
from .show import to_string

DEAD = -1
UNKNOWN = -2

State = tuple[tuple[int, Node], ...]

DEFAULT_MAX_STATES = Limits().max_dfa_states  # 1 KiB of table per state: 50 MiB at 50k


class LexerDfa:
    """Lazily built DFA recognising, in parallel, one regex per terminal.

    Args:
        nodes: the terminals' regexes; terminal ``i`` is ``nodes[i]``.
        max_states: limit on the number of states (RegexLimitError beyond it); None
            (the default): ``tether.limits.current().max_dfa_states`` when constructed.

    Cost: constructing is O(#terminals); each new row costs one derivative per byte class
    per live terminal (cached on the nodes, so shared sub-expressions are derived once).
    """

    def __init__(self, nodes: Sequence[Node], *, max_states: int | None = None) -> None:
        # a tuple or a list is copied; another sequence (the parser's lazily built
        # lexeme nodes) is read as it is, when a state first needs a terminal's node
        self.nodes: Sequence[Node] = tuple(nodes) if isinstance(nodes, list | tuple) else nodes
        self.max_states = current().max_dfa_states if max_states is None else max_states
        self._ids: dict[State, int] = {}
        self._states: list[State] = []
        self._accepting: list[tuple[int, ...]] = []
        self._live: list[tuple[int, ...]] = []
        self._start_cache: dict[frozenset[int] | None, int] = {}
        self._empty_memo: dict[Node, bool] = {}
        self._ones: dict[int, tuple[int]] = {}  # terminal -> (terminal,), shared by states
        self._pending: dict[int, list[Any]] = {}  # state -> _plan
        self._horizon: Horizon | None = None  # horizon_state's rewrites and memos
        # per state: it holds a long counted repeat (one horizon_state may relax)
        self.counted: list[bool] = []
        self._horizon_of: dict[int, int] = {}
        cap = self._cap = 16
        self.table: NDArray[np.int32] = np.full((cap, 256), UNKNOWN, dtype=np.int32)
        self.accepts: NDArray[np.int8] = np.zeros(cap, dtype=np.int8)

    # -- states ----------------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return len(self._states)

    def _state_id(self, state: State) -> int:
        sid = self._ids.get(state)
        if sid is not None:
            return sid
        return self._new_state(state)

    def _new_state(self, state: State) -> int:
        """Intern ``state`` (not interned yet) as the next state id."""
        sid = len(self._states)
        check_deadline("building a lexer DFA")
        if sid >= self.max_states:
            live = ", ".join(f"#{t} {to_string(self.nodes[t], 60)}" for t, _ in state[:3])
            more = f" and {len(state) - 3} more" if len(state) > 3 else ""
            raise RegexLimitError(
                f"lexer DFA needs more than {self.max_states} states "
                f"({len(self.nodes)} terminals; growing on {live}{more}); "
                "simplify the regexes (large counted repeats multiply states) or raise "
                "tether.limits.Limits(max_dfa_states=...)"
            )
        if sid >= self._cap:
            self._grow()
        self._ids[state] = sid
        self._states.append(state)
        if len(state) == 1:
            t, n = state[0]
            one = self._ones.get(t)
            if one is None:
                one = self._ones[t] = (t,)
            self._live.append(one)
            self.counted.append(n.flags & F_COUNTED != 0)
            if n.nullable:
                self._accepting.append(one)
                self.accepts[sid] = 1
            else:
                self._accepting.append(())
            return sid
        acc = tuple([t for t, n in state if n.nullable])
        self._accepting.append(acc)
        self._live.append(tuple([t for t, _ in state]))
        self.counted.append(any(n.flags & F_COUNTED for _, n in state))
        if not state:
            self.table[sid] = DEAD
        if acc:
            self.accepts[sid] = 1
        return sid

    def _grow(self) -> None:
        """Double the table (a new array: readers re-read ``.table``)."""
        old = self._cap
        cap = self._cap = old * 2
        table = np.empty((cap, 256), dtype=np.int32)
        table[:old] = self.table
        table[old:] = UNKNOWN
        accepts = np.zeros(cap, dtype=np.int8)
        accepts[:old] = self.accepts
        self.table, self.accepts = table, accepts

    def _prune(self, pairs: Iterable[tuple[int, Node]]) -> State:
        out = []
        for t, n in pairs:
            if n is EMPTY:
                continue
            if n.flags & F_BOOLEAN and self._is_empty(n):
                continue
            out.append((t, n))
        return tuple(out)

    def _is_empty(self, n: Node) -> bool:
        r = self._empty_memo.get(n)
        if r is None:
            key = (n, self.max_states)
            r = _EMPTY_MEMO.get(key)
            if r is None:
                r = is_empty(n, limit=self.max_states, known=self._empty_memo) is True
                if len(_EMPTY_MEMO) < 1_000_000:
                    _EMPTY_MEMO[key] = r
            self._empty_memo[n] = r
        return r

    def start(self, allowed: Iterable[int] | None = None) -> int:
        """State recognising the terminals in ``allowed`` (all when None); cached.

        With no live terminal the result is a state whose row is all ``DEAD``.
        """
        key = None if allowed is None else frozenset(allowed)
        sid = self._start_cache.get(key)
        if sid is None:
            n = len(self.nodes)
            ids = range(n) if key is None else sorted(key)
            for t in ids:
                if not 0 <= t < n:
                    raise IndexError(f"terminal id {t} out of range 0..{n - 1}")
            sid = self._state_id(self._prune((t, self.nodes[t]) for t in ids))
            self._start_cache[key] = sid
        return sid

    def horizon_state(self, state: int, horizon: int) -> int:
        """A state that no byte string of at most ``horizon`` bytes tells apart from
        ``state`` (the same strings keep the lexeme alive, the same terminals accept after
        each), its large counted repeats unbounded (``regex.horizon``): every position of
        a long ``maxLength`` string far from its bound gets the same one. ``state`` itself
        when it has none. Cached; ``horizon`` must be the same at every call."""
        got = self._horizon_of.get(state)
        if got is None:
            pairs = self._states[state]
            got = state
            if self.counted[state]:
                h = self._horizon
                if h is None:
                    h = self._horizon = Horizon(horizon)
                elif h.horizon != horizon:
                    raise ValueError(f"horizon {horizon} after {h.horizon}")
                formed = tuple([(t, h.form(n)) for t, n in pairs])
                if any(a[1] is not b[1] for a, b in zip(formed, pairs, strict=True)):
                    got = self._state_id(formed)
                    self._horizon_of.setdefault(got, got)
            self._horizon_of[state] = got
        return got

    def state_of(self, pairs: Iterable[tuple[int, Node]]) -> int:
        """State id for explicit ``(terminal, node)`` pairs (terminals in increasing order)."""
        return self._state_id(self._prune(sorted(pairs, key=lambda p: p[0])))

    # -- rows ------------------------------------------------------------------------------
    def fill_row(self, state: int) -> None:
        """Compute the table row of ``state`` (no-op if already filled).

        Raises:
            RegexLimitError: if a new state would exceed ``max_states``.
        """
        self.fill_classes(state, None)

    def byte_classes(self, state: int) -> list[int]:
        """The byte classes of ``state`` (256-bit masks partitioning 0..255): bytes of
        one class lead to the same next state."""
        return byte_classes(n for _, n in self._states[state])

    def fill_classes(self, state: int, need: int | None = None, *, extra: int = 0) -> None:
        """Compute the transitions of ``state`` for every byte class of the state that
        meets ``need`` (a 256-bit int of bytes; None: the whole row), each class written
        at once. Entries of the other classes stay ``UNKNOWN``, except that in a state of
        at most ``extra`` live terminals other classes are filled too, as long as their
        derivatives (live terminals each) add up to at most ``extra`` (cheap classes
        filled ahead save later calls).

        Cost: the state's classes once (cached by mask set; for a one-terminal state on
        the node), then per class one derivative for each live terminal whose first
        bytes meet the class (boolean nodes always), cached on the nodes; a row filled
        completely in one call is written with one or a few numpy stores.

        Raises:
            RegexLimitError: if a new state would exceed ``max_states``.
        """
        plan = self._pending.get(state)
        if plan is None:
            pairs = self._states[state]
            if not pairs:
                return  # the dead state: its row is all DEAD from creation
            if len(pairs) == 1 and self._fill_single(state, pairs[0], need, extra):
                return
            plan = self._pending[state] = self._plan(state)
        pairs, groups, pending, whole, rows = plan
        if not pending:
            return
        keep = []
        done: list[tuple[int, int]] = []  # (class, target)
        npairs = len(pairs)
        ids = self._ids
        for cls in pending:
            if need is not None and not cls & need:
                if npairs > extra:  # an unneeded class: only in a state with few terminals
                    keep.append(cls)
                    continue
                extra -= npairs
            b = (cls & -cls).bit_length() - 1  # lowest byte of the class
            if rows is not None:  # a small state: each node derives by its own class
                cands = [(t, n, reps[index[b]]) for t, n, index, reps in rows]
            else:  # a large state: the pairs whose first bytes meet the class
                idx: list[int] = []
                parts = 0
                for fb, ix in groups:
                    if fb & cls:
                        idx.extend(ix)
                        parts += 1
                if parts > 1:
                    idx.sort()
                cands = [(*pairs[i], b) for i in idx]
            nxt = self._live_derivatives(cands)
            if nxt:
                key = tuple(nxt)
                target = ids.get(key)
                if target is None:
                    target = self._new_state(key)
            else:
                target = DEAD
            done.append((cls, target))
        table = self.table  # re-read: _state_id may have replaced it
        if whole is not None and not keep:
            _writer(whole)(table, state, [tg for _, tg in done])
        else:
            row = table[state]
            for cls, target in done:
                if cls & (cls - 1) == 0:
                    row[cls.bit_length() - 1] = target  # one byte
                    continue
                runs = _RUNS.get(cls)
                if runs is None:
                    runs = _class_runs(cls)
                if runs:
                    for lo, hi in runs:
                        row[lo:hi] = target
                else:
                    row[class_mask(cls)] = target
        if keep:
            plan[2] = keep
            plan[3] = None
        else:
            self._pending[state] = _FILLED  # row complete: drop the plan

    def _live_derivatives(self, cands: list[tuple[int, Node, int]]) -> list[tuple[int, Node]]:
        """The live derivatives ``(terminal, node by byte)`` of ``(terminal, node, byte)``
        candidates (cached on the nodes; boolean ones pruned by emptiness)."""
        empty_memo = self._empty_memo
        nxt = []
        for t, n, rb in cands:
            d = n._deriv.get(rb)
            if d is None:
                d = derivative(n, rb)
            if d is EMPTY:
                continue
            if d.flags & F_BOOLEAN:
                e = empty_memo.get(d)
                if e is None:
                    e = self._is_empty(d)
                if e:
                    continue
            nxt.append((t, d))
        return nxt

    def _fill_single(self, state: int, pair: tuple[int, Node], need: int | None, extra: int) -> bool:
        """``fill_classes`` of a fresh one-terminal state when it fills the whole row
        (False, nothing done, otherwise): the classes, their lowest bytes and the row
        writer are cached on the node (``_prepare``), so this is one derivative lookup
        and one state lookup per class, then one or a few numpy stores."""
        t, n = pair
        write = n._write
        if write is None:
            write = _prepare(n)
        if need is not None and len(n._reps) > extra:
            unneeded = 0  # the general path fills min(unneeded, extra) unneeded classes
            for c in n._classes or ():  # set by _prepare
                if not c & need:
                    unneeded += 1
            if unneeded > extra:
                return False
        ids = self._ids
        deriv = n._deriv
        empty_memo = self._empty_memo
        targets = []
        for b in n._reps:
            d = deriv.get(b)
            if d is None:
                d = derivative(n, b)
            if d is EMPTY:
                targets.append(DEAD)
                continue
            if d.flags & F_BOOLEAN:
                e = empty_memo.get(d)
                if e is None:
                    e = self._is_empty(d)
                if e:
                    targets.append(DEAD)
                    continue
            key = ((t, d),)
            sid = ids.get(key)
            if sid is None:
                sid = self._new_state(key)
            targets.append(sid)
        write(self.table, state, targets)
        self._pending[state] = _FILLED
        return True

    def row_filled(self, state: int) -> bool:
        """Every byte class of ``state``'s row is known."""
        return self._pending.get(state) is _FILLED

    def fill_chain(self, state: int, limit: int) -> int:
        """Fill the row of ``state`` when it is one terminal whose regex goes on by one
        byte (a literal's next byte: ``b·rest``), then of the state that byte leads to
        while it is one too, up to ``limit`` rows; returns the rows filled (0: ``state``
        is not such a state or its row is known). Each row is that byte to the state of
        ``rest`` (DEAD when ``rest`` is an empty boolean language) and DEAD elsewhere,
        as ``fill_classes`` would fill it; the rows are written with two numpy stores
        for the whole chain (a key or an enum value: one new state per byte)."""
        rows: list[int] = []
        cols: list[int] = []
        targets: list[int] = []
        states, ids, pending = self._states, self._ids, self._pending
        while len(rows) < limit and state >= 0:
            pairs = states[state]
            if len(pairs) != 1 or pending.get(state) is _FILLED:
                break
            t, n = pairs[0]
            if n.kind == K_CONCAT:
                head, rest = n.args
            else:
                head, rest = n, EPSILON
            if head.kind != K_BYTES:
                break
            m = head.args[0]
            if m & (m - 1):
                break  # several bytes: fill_classes' classes
            if rest.flags & F_BOOLEAN and self._is_empty(rest):
                target = DEAD
            else:
                key = ((t, rest),)
                got = ids.get(key)
                target = self._new_state(key) if got is None else got
            pending[state] = _FILLED
            rows.append(state)
            cols.append(m.bit_length() - 1)
            targets.append(target)
            state = target
        if rows:
            table = self.table
            table[rows] = DEAD
            table[rows, cols] = targets
        return len(rows)

    def _plan(self, state: int) -> list[Any]:
        """``[pairs, groups, classes, whole, rows]``: the state's pairs; for a large
        state its pair indices grouped by first bytes (candidates of a class: the groups
        meeting it), for a small one (``_SMALL`` pairs at most) ``rows``, each pair with
        its node's byte → class index and classes' lowest bytes; its byte classes not filled yet; and the tuple of all
        its classes while none is filled (None after a partial fill)."""
        pairs = self._states[state]
        if not pairs:
            return [pairs, None, [], None, None]
        if len(pairs) <= _SMALL:
            rows = []
            parts = []
            for t, n in pairs:
                index = _node_index(n)
                rows.append((t, n, index, n._reps))
                parts.append(id(n._classes))
            # the state's classes: the common refinement of its nodes' classes, cached by
            # the identities of their class tuples (classes_of returns one tuple object
            # per mask set, so nodes with equal firsts share it)
            key = tuple(parts)
            hit = _JOINS.get(key)
            if hit is None:
                classes = classes_of([n for _, n in pairs])
                if len(_JOINS) < 200_000:  # the value keeps the keyed tuples alive
                    _JOINS[key] = (classes, [n._classes for _, n in pairs])
            else:
                classes = hit[0]
            return [pairs, None, list(classes), classes, rows]
        classes = classes_of([n for _, n in pairs])
        groups: dict[int, list[int]] = {}
        for i, (_, n) in enumerate(pairs):
            fb = n._first_bytes
            g = groups.get(first_bytes(n) if fb < 0 else fb)
            if g is None:
                groups[n._first_bytes] = [i]
            else:
                g.append(i)
        return [pairs, list(groups.items()), list(classes), classes, None]

    def step(self, state: int, byte: int) -> int:
        """Next state after ``byte`` (``DEAD`` if no terminal survives); fills lazily."""
        v = int(self.table[state, byte])
        if v == UNKNOWN:
            self.fill_row(state)
            v = int(self.table[state, byte])
        return v

    def run(self, state: int, data: bytes) -> int:
        """State after ``data`` from ``state`` (``DEAD`` as soon as nothing is live)."""
        for b in data:
            state = self.step(state, b)
            if state < 0:
                return DEAD
        return state

    def run_inside(self, state: int, data: bytes) -> int:
        """The state after ``data`` from ``state`` when every byte keeps a terminal alive,
        else ``DEAD``; the states between are not made (a move along one token inside a
        lexeme needs only where it ends: each state between would be a new row, and each
        row's first class a derivative of every live terminal).

        Follows filled entries of the table, then derives the pairs byte by byte, by the
        byte itself (a new node's byte classes are not computed for one byte: the
        derivative is the same node, cached under that byte); the pairs left are exactly
        those of the state the table would reach.

        Raises:
            RegexLimitError: if the state reached would exceed ``max_states``.
        """
        table = self.table
        s = state
        i = 0
        n_data = len(data)
        while i < n_data:  # filled entries first
            v = table.item(s, data[i])
            if v < 0:
                if v == DEAD:
                    return DEAD
                break
            s = v
            i += 1
        if i == n_data:
            return s
        pairs = self._states[s]
        for b in data[i:]:
            nxt = self._live_derivatives([(t, n, b) for t, n in pairs])
            if not nxt:
                return DEAD
            pairs = tuple(nxt)
        sid = self._ids.get(pairs)
        if sid is None:
            sid = self._new_state(pairs)
        return sid

    def pairs(self, state: int) -> State:
        """The ``(terminal, remaining regex)`` pairs of ``state``, terminals increasing."""
        return self._states[state]

    def accepting(self, state: int) -> tuple[int, ...]:
        """Terminals whose regex matches the text read so far."""
        return self._accepting[state]

    def live(self, state: int) -> tuple[int, ...]:
        """Terminals that can still match after more bytes (or already match)."""
        return self._live[state]

    def can_continue(self, state: int, terminal: int | None = None) -> bool:
        """Whether some byte keeps ``terminal`` (any terminal when None) alive."""
        self.fill_row(state)
        row = self.table[state]
        targets = set(int(x) for x in np.unique(row) if x >= 0)
        if terminal is None:
            return bool(targets)
        return any(terminal in self._live[s] for s in targets)

    def derivative_of(self, state: int, terminal: int) -> Node:
        """The remaining regex of ``terminal`` in ``state`` (``EMPTY`` if not live)."""
        for t, n in self._states[state]:
            if t == terminal:
                return n
        return EMPTY

    def fill_reachable(self, state: int | None = None, limit: int | None = None) -> int:
        """Fill every row reachable from ``state`` (default: all-terminal start); returns
        the number of states. Raises RegexLimitError past ``max_states``."""
        todo = [self.start() if state is None else state]
        seen = set(todo)
        while todo:
            s = todo.pop()
            self.fill_row(s)
            for x in np.unique(self.table[s]):
                x = int(x)
                if x >= 0 and x not in seen:
                    seen.add(x)
                    todo.append(x)
            if limit is not None and len(seen) > limit:
                break
        return len(seen)


ALL_BYTES = (1 << 256) - 1
_FILLED: list[Any] = [(), None, [], None, None]  # the plan of a complete row
# (node, limit) -> the answer of ``LexerDfa._is_empty``, shared by all DFAs. A True is a
# decided emptiness; a False may stand for "undecided within the limit" (as per DFA)
_EMPTY_MEMO: dict[tuple[Node, int], bool] = {}
_CLASS_MASKS: dict[int, NDArray[np.bool_]] = {}


def class_mask(mask: int) -> NDArray[np.bool_]:
    """The 256-bit byte mask as a bool array (cached: classes recur across rows)."""
    a = _CLASS_MASKS.get(mask)
    if a is None:
        raw = np.frombuffer(mask.to_bytes(32, "little"), np.uint8)
        a = np.unpackbits(raw, bitorder="little").astype(np.bool_)
        if len(_CLASS_MASKS) < 100_000:
            _CLASS_MASKS[mask] = a
    return a


Writer = Callable[[NDArray[np.int32], int, list[int]], None]
_WRITERS: dict[tuple[int, ...], Writer] = {}


def _writer(classes: tuple[int, ...]) -> Writer:
    """A function ``(table, state, targets)`` storing ``targets[i]`` at the bytes of
    ``classes[i]`` in row ``state`` (cached per class tuple). The row is set to the
    target of the largest class, then the other classes are stored as byte ranges (one
    slice store per range: classes are mostly a few ranges); a row of many ranges is
    one gather through a byte → class index array instead."""
    w = _WRITERS.get(classes)
    if w is not None:
        return w
    k = len(classes)
    if k == 1:
        def w(table: NDArray[np.int32], state: int, targets: list[int]) -> None:
            table[state] = targets[0]
    else:
        sizes = [c.bit_count() for c in classes]
        big = max(range(k), key=sizes.__getitem__)
        runs = [(lo, hi, i) for i in range(k) if i != big for lo, hi in _runs(classes[i])]
        if len(runs) <= 12:
            singles = tuple((lo, i) for lo, hi, i in runs if hi == lo + 1)
            spans = tuple((lo, hi, i) for lo, hi, i in runs if hi > lo + 1)

            def w(table: NDArray[np.int32], state: int, targets: list[int]) -> None:
                row = table[state]
                row[:] = targets[big]
                for lo, hi, i in spans:
                    row[lo:hi] = targets[i]
                for b, i in singles:
                    row[b] = targets[i]
        else:
            index = np.zeros(256, np.intp)
            for i, c in enumerate(classes):
                index[class_mask(c)] = i

            def w(table: NDArray[np.int32], state: int, targets: list[int]) -> None:
                table[state] = np.array(targets, dtype=np.int32)[index]
    if len(_WRITERS) < 100_000:
        _WRITERS[classes] = w
    return w


_RUNS: dict[int, tuple[tuple[int, int], ...]] = {}


def _class_runs(cls: int) -> tuple[tuple[int, int], ...]:
    """The byte ranges of a class when there are at most 4 (slice stores beat a boolean
    mask store there), else ``()``; cached per class."""
    runs = _runs(cls)
    r = tuple(runs) if len(runs) <= 4 else ()
    if len(_RUNS) < 100_000:
        _RUNS[cls] = r
    return r


def _runs(mask: int) -> list[tuple[int, int]]:
    """The maximal byte ranges ``[lo, hi)`` of a 256-bit mask, increasing."""
    out = []
    while mask:
        lo = (mask & -mask).bit_length() - 1
        x = mask >> lo
        n = (~x & (x + 1)).bit_length() - 1  # trailing ones
        out.append((lo, lo + n))
        mask &= ~(((1 << n) - 1) << lo)
    return out


def _prepare(n: Node) -> Writer:
    """Cache on ``n`` its classes, the lowest byte of each and their row writer (those
    of its first child when it has the same first bytes: a literal's, a star's...)."""
    inner = firsts_child(n)
    if inner is not None:
        w = inner._write
        if w is None:
            w = _prepare(inner)
        n._classes, n._reps, n._write = inner._classes, inner._reps, w
        return w
    classes = node_classes(n)
    hit = _PREPARED.get(id(classes))
    if hit is None or hit[0] is not classes:  # (an id outlives its tuple only off the memo)
        hit = (classes, tuple([(c & -c).bit_length() - 1 for c in classes]), _writer(classes))
        if len(_PREPARED) < 100_000:
            _PREPARED[id(classes)] = hit
    _, n._reps, w = hit
    n._write = w
    return w


# id of a class tuple -> (the tuple, its lowest bytes, its writer): nodes of equal firsts
# share one class tuple (classes_of's memo), so this skips hashing the tuple's masks
_PREPARED: dict[int, tuple[tuple[int, ...], tuple[int, ...], Writer]] = {}


_SMALL = 16  # states of at most this many terminals derive through node rows
# ids of the class tuples of a small state's nodes -> (the state's classes, those tuples)
_JOINS: dict[tuple[int, ...], tuple[tuple[int, ...], list[Any]]] = {}
_INDEX: dict[tuple[int, ...], bytes] = {}


def _node_index(n: Node) -> bytes:
    """``n``'s byte → class number (its classes prepared first: ``_prepare``)."""
    if n._write is None:
        _prepare(n)
    index = n._index
    if index is None:
        index = n._index = _class_index(n._classes or ())  # set by _prepare
    return index


def _class_index(classes: tuple[int, ...]) -> bytes:
    """Byte → class number for a partition of the 256 bytes (cached per class tuple)."""
    r = _INDEX.get(classes)
    if r is None:
        a = np.zeros(256, np.uint8)
        for j, c in enumerate(classes):
            if c & (c - 1) == 0:
                a[c.bit_length() - 1] = j
            else:
                a[class_mask(c)] = j
        r = a.tobytes()
        if len(_INDEX) < 100_000:
            _INDEX[classes] = r
    return r
