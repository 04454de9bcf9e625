"""Lookahead from a matcher's state: allowed bytes, forced bytes and tokens, and the
shortest completion (for closing an output within a token budget).

All functions leave the matcher unchanged. Costs are in lexer-table steps; the parser
is only pushed where a lexeme ends.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.engine.tables import DEAD, UNKNOWN
from tether.errors import ConstraintError, LimitError
from tether.limits import current

if TYPE_CHECKING:
    from tether.engine.compiled import CompiledConstraint
    from tether.engine.matcher import Matcher

# BFS byte order: printable ASCII first (readable completions), then the rest
_ORDER = [*range(0x20, 0x7F), *range(0x20), 0x7F, *range(0x80, 0x100)]
_MAX_FORCED = 4096


def allowed_bytes_at(steps: Any, ls: int, node: int, parser: Any) -> list[int]:
    """Bytes that may follow state ``(ls, node)``; ``parser()`` gives a parser at ``node``."""
    row = steps.table[ls]
    if (row == UNKNOWN).any():
        steps.fill_row(ls)
        row = steps.table[ls]
    ok = row >= 0
    a = steps.accid_of(ls)
    if a >= 0 and not ok.all():
        c = steps.transition(node, a, parser)
        if c >= 0:
            s0 = int(steps.nstart[c])
            row2 = steps.table[s0]
            if (row2 == UNKNOWN).any():
                steps.fill_row(s0)
                row2 = steps.table[s0]
            ok |= row2 >= 0
    return np.flatnonzero(ok).tolist()


def forced_bytes(m: Matcher) -> bytes:
    """Bytes every continuation of ``m`` starts with (stops at a choice or at acceptance)."""
    if m._eos:
        return b""
    w = m.copy()
    out = bytearray()
    while len(out) < _MAX_FORCED and not w._accepting_now():
        bs = w.allowed_bytes()
        if len(bs) != 1 or not w._step(bs[0]):
            break
        out.append(bs[0])
    return bytes(out)


def forced_tokens(m: Matcher) -> list[int]:
    """Tokens for ``forced_bytes(m)``: the compiled constraint's ``tokenize`` if given, else
    greedy longest match over the vocabulary; a last token that some longer token extends
    is dropped (what follows may merge with it). Every token returned is consumable."""
    data = forced_bytes(m)
    if not data:
        return []
    cc = m.cc
    trie = cc.vindex.trie
    if cc.tokenize is not None:
        ids = list(cc.tokenize(data))
    else:
        greedy = _greedy_tokenize(trie, data)
        if greedy is None:
            return []
        ids = greedy
    if ids:
        last = cc.vocabulary.tokens[ids[-1]]
        node = trie.find(last)
        if node >= 0 and trie.end[node] > node + 1:
            ids.pop()
    w = m.copy()
    good = []
    for t in ids:
        if not w.consume(t):
            break
        good.append(t)
    return good


def _greedy_tokenize(trie: Any, data: bytes) -> list[int] | None:
    ids = []
    i = 0
    while i < len(data):
        node, best, best_len = 0, -1, 0
        j = i
        while j < len(data):
            child, stop, b = node + 1, int(trie.end[node]), data[j]
            while child < stop and trie.byte[child] != b:
                child = int(trie.end[child])
            if child >= stop:
                break
            node = child
            j += 1
            if trie.token[node] >= 0:
                best, best_len = int(trie.token[node]), j - i
        if best < 0:
            return None
        ids.append(best)
        i += best_len
    return ids


def shortest_completion(m: Matcher, max_states: int | None = None) -> bytes:
    """A shortest byte string after which ``m`` is accepting (b"" if it already is).

    1. Costs over the grammar, once per compiled constraint: each terminal costs the
       length of its shortest lexeme (BFS over that terminal's own lexer DFA, which drops
       empty intersection/complement derivatives), each nonterminal its cheapest
       derivation (Knuth's fixed point), each dotted position the rest of its rule.
    2. From the Earley row stack, the cheapest completion exactly: per row, a shortest
       path from each open item through its origin row down to the accepting item.
       Cached per parser node (equal nodes have equal futures).
    3. Inside a lexeme: per terminal still alive in it, the shortest end of that
       terminal (BFS from its derivative) plus the cheapest completion after scanning
       it. The cheapest of these is a lower bound of every completion.
    4. Candidates are checked cheapest first on a copy of ``m`` (greedy lexing may join
       two lexemes), so a candidate that checks is a shortest completion; if none does,
       a breadth-first search over bytes (exactly shortest, bounded by ``max_states``).

    Bounds (``tether.limits``): the byte search visits at most ``max_states`` states
    (default ``Limits.completion_states``), and a completion longer than
    ``Limits.completion_bytes`` is refused before any of it is built (its length is known
    from the grammar costs). Candidates are checked by the parser layer's recognizer
    resumed at the matcher's state, which holds one row per lexeme (checking through the
    matcher would intern a parser node per lexeme of a long completion).

    Raises:
        ConstraintError: no completion found (``max_states`` explored states).
        LimitError: ``completion_bytes``: every completion is longer than the limit.
    Cost: after warm-up (all terminal examples, grammar costs: milliseconds to a few
    hundred for large JSON Schemas), per call one derivative BFS per live terminal
    (cached) and a check; a new parser node costs one pass over the open rows.
    """
    if m._eos or m._accepting_now():
        return b""
    cap = current().completion_states
    max_states = cap if max_states is None else min(max_states, cap)
    comp = _completer(m.cc)
    key = (m._ls, m._node, m._start)
    hit = comp.verified.get(key)
    if hit is not None:
        return hit
    for tail in _candidates(m):
        if _completes(m, tail):
            if len(tail) <= 4096:  # (a long tail is cheap to find again, costly to keep)
                comp.verified[key] = tail
            return tail
    return _byte_bfs(m, max_states)


def _completes(m: Matcher, tail: bytes) -> bool:
    """``tail`` takes ``m`` to an accepting state (checked by the reference recognizer)."""
    from tether.parser.byte_parser import ByteParser

    cc = m.cc
    bp = ByteParser.resume(cc.tables, cc.lexer, m._parser.copy(), m._ls, not m._start)
    return bp.feed(tail) and bp.is_accepting()


def _completer(cc: CompiledConstraint) -> Completer:
    c = cc.completer
    if c is None:
        c = cc.completer = Completer(cc)
    return c


def _candidates(m: Matcher) -> Iterator[bytes]:
    """Completions of ``m`` by lexemes, cheapest first (not yet checked).

    At a lexeme start: the cheapest completion of the parser node. Inside a lexeme: per
    terminal still alive in it, the shortest rest of that terminal (BFS over its own DFA
    from its derivative) plus the cheapest completion of the parse after scanning it.
    The minimum over them is a lower bound of every completion, so a candidate that
    checks is a shortest completion."""
    cc = m.cc
    st = cc.steps
    comp = _completer(cc)
    node0 = m._node
    allowed = m._parser.allowed_terminals()
    found: list[tuple[int, int, bytes]] = []
    if m._start:
        tail = comp.from_node(node0, m._parser)
        if tail is not None:
            yield tail
        for t in sorted(allowed):  # other first lexemes, in case greedy lexing joins
            ex = comp.example(t)
            after = None if ex is None else comp.after_terminal(node0, t, m._parser)
            if after is not None and ex is not None and ex + after != tail:
                found.append((len(ex) + len(after), t, ex + after))
        found.sort()
        yield from dict.fromkeys(x for _, _, x in found)
        return
    import heapq

    dfa = st.dfa
    afters: list[tuple[int, int, bytes]] = []
    for t in dfa.live(m._ls):
        if t in allowed:
            after = comp.after_terminal(node0, t, m._parser)
        elif t in st.ignore:
            after = comp.from_node(node0, m._parser)
        else:
            continue
        if after is not None:
            afters.append((len(after), t, after))
    afters.sort()
    # the lexeme's end is searched only while it can still give the cheapest candidate
    done: set[bytes] = set()
    for i, (n, t, after) in enumerate(afters):
        while found and found[0][0] <= n:
            tail = heapq.heappop(found)[2]
            if tail not in done:
                done.add(tail)
                yield tail
        w = comp.finish(t, dfa.derivative_of(m._ls, t))
        if w is not None:
            heapq.heappush(found, (len(w) + n, i, w + after))
    while found:
        tail = heapq.heappop(found)[2]
        if tail not in done:
            done.add(tail)
            yield tail


_ORDER_ARR = np.array(_ORDER, np.intp)


def _targets(row: Any) -> list[tuple[int, int]]:
    """Distinct live next states of a DFA row, each with its first byte in ``_ORDER``."""
    r = row[_ORDER_ARR]
    vals, first = np.unique(r, return_index=True)
    out = [(int(v), _ORDER[int(i)]) for v, i in zip(vals, first, strict=True) if v >= 0]
    out.sort(key=lambda x: _ORDER_POS[x[1]])
    return out


_ORDER_POS = {b: i for i, b in enumerate(_ORDER)}
_INF = 1 << 60
_ROW_CACHE = 4096  # solved rows kept across calls
_PRIVATE_STATES = 20_000  # private example DFA: rebuilt past this many states


class Completer:
    """Per-constraint costs for completions (kept on the CompiledConstraint).

    * ``example(t)``: a shortest lexeme of terminal ``t`` (BFS over a private lexer DFA
      of that terminal alone, which drops empty intersection/complement derivatives);
    * ``cost[s]``: length of the cheapest text a symbol derives, ``best[A]`` the rule;
    * ``rest[p]``: cheapest text for the symbols after dotted position ``p``;
    * ``by_node``: completion bytes per parser node (equal nodes have equal futures).
    """

    def __init__(self, cc: CompiledConstraint, max_example_states: int = 20000) -> None:
        self.cc = cc
        self.t = cc.tables
        self._max_ex = max_example_states
        self._dfa: Any = None
        self._examples: dict[int, bytes | None] = {}
        self._finish: dict[int, bytes | None] = {}
        self._after: dict[tuple[int, int], bytes | None] = {}
        self.by_node: dict[int, bytes | None] = {}
        self.verified: dict[tuple[int, int, bool], bytes] = {}  # matcher state -> checked tail
        self._rows: OrderedDict[int, tuple[Any, dict[int, tuple[int, Any]]]] = OrderedDict()
        self._adj: dict[int, dict[int, list[tuple[int, int]]]] = {}
        self._costs()

    # ---- terminals ------------------------------------------------------------------------
    def _private_dfa(self) -> Any:
        if self._dfa is not None and self._dfa.n_states > _PRIVATE_STATES:
            self._dfa = None  # start afresh (examples are kept as bytes)
            self._finish.clear()
        if self._dfa is None:
            from tether.parser.terminals import lexeme_node
            from tether.regex import LexerDfa

            self._dfa = LexerDfa([lexeme_node(x) for x in self.t.terminals],
                                 max_states=4 * _PRIVATE_STATES)
        return self._dfa

    def example(self, t: int) -> bytes | None:
        """A shortest lexeme of terminal ``t`` (None: none found)."""
        if t not in self._examples:
            term = self.t.terminals[t]
            lit = term.literal
            if (lit and not term.ignore_case and not term.stop
                    and (term.max_len is None or term.max_len >= len(lit.encode("utf-8")))):
                self._examples[t] = lit.encode("utf-8")  # the only member
                return self._examples[t]
            try:
                dfa = self._private_dfa()
                self._examples[t] = self._shortest(dfa, dfa.start([t]))
            except Exception:  # noqa: BLE001 -- a limit in the regex layer: no example known
                self._examples[t] = None
        return self._examples[t]

    def finish(self, t: int, rest: Any) -> bytes | None:
        """Shortest bytes after which the regex ``rest`` (a derivative of terminal ``t``)
        matches (b"" if it already does)."""
        try:
            dfa = self._private_dfa()
            return self._shortest(dfa, dfa.state_of([(t, rest)]))
        except Exception:  # noqa: BLE001
            return None

    def _shortest(self, dfa: Any, s0: int) -> bytes | None:
        got = self._finish.get(s0, False)
        if got is not False:
            return got  # type: ignore[return-value]
        out: bytes | None = None
        if dfa.accepting(s0):
            out = b""
        else:
            # parent pointers, not a string per queued state (memory linear in states)
            parent: dict[int, tuple[int, int]] = {s0: (-1, -1)}
            q = deque([s0])
            end = -1
            while q and end < 0:
                s = q.popleft()
                dfa.fill_row(s)
                for s2, b in _targets(dfa.table[s]):
                    if s2 in parent:
                        continue
                    if dfa.accepting(s2):
                        parent[s2] = (s, b)
                        end = s2
                        break
                    if len(parent) >= self._max_ex:
                        q.clear()
                        break
                    parent[s2] = (s, b)
                    q.append(s2)
            if end >= 0:
                path = bytearray()
                while end != s0:
                    end, b = parent[end]
                    path.append(b)
                out = bytes(reversed(path))
        self._finish[s0] = out
        return out

    # ---- grammar costs --------------------------------------------------------------------
    def _costs(self) -> None:
        import heapq

        t = self.t
        n_t, n_s = t.n_terminals, t.n_symbols
        nullable = t.nullable
        cost = [_INF] * n_s
        for i in range(n_t):
            if nullable[i]:
                cost[i] = 0
            else:
                ex = self.example(i)
                cost[i] = _INF if ex is None else len(ex)
        uses: list[list[int]] = [[] for _ in range(n_s)]
        left = [0] * len(t.rule_lhs)
        acc = [0] * len(t.rule_lhs)
        heap: list[tuple[int, int, int]] = []
        for r, rhs in enumerate(t.rule_rhs):
            total = 0
            for s in rhs:
                if s >= n_t:
                    left[r] += 1
                    uses[s].append(r)
                else:
                    total += cost[s]
            acc[r] = total
            if left[r] == 0 and total < _INF:
                heap.append((total, r, t.rule_lhs[r]))
        heapq.heapify(heap)
        best = [-1] * n_s
        done = [False] * n_s
        while heap:
            c, r, a = heapq.heappop(heap)
            if done[a]:
                continue
            done[a], cost[a], best[a] = True, c, r
            for r2 in uses[a]:
                left[r2] -= 1
                acc[r2] += c
                if left[r2] == 0 and acc[r2] < _INF:
                    heapq.heappush(heap, (acc[r2], r2, t.rule_lhs[r2]))
        self.cost, self.best = cost, best
        sym = t.sym
        rest = [0] * len(sym)
        for p in range(len(sym) - 1, -1, -1):
            s = sym[p]
            rest[p] = 0 if s < 0 else min(_INF, cost[s] + rest[p + 1])
        self.rest = rest

    def expand(self, p: int, out: list[int]) -> None:
        """Append the terminals of the cheapest text for the symbols after position ``p``."""
        t = self.t
        sym, n_t, nullable = t.sym, t.n_terminals, t.nullable
        stack = [p]
        while stack:
            q = stack.pop()
            s = sym[q]
            if s < 0:
                continue
            stack.append(q + 1)
            if s < n_t:
                if not nullable[s]:
                    out.append(s)
            elif self.cost[s] > 0:
                stack.append(t.rule_pos[self.best[s]])

    # ---- parser states --------------------------------------------------------------------
    def from_node(self, node: int, parser: Any) -> bytes | None:
        """Cheapest completion bytes from ``parser`` (at ``node``), by terminal examples."""
        if node not in self.by_node:
            self.by_node[node] = self._bytes(self.complete_parse(parser))
        return self.by_node[node]

    def after_terminal(self, node: int, t: int, parser: Any) -> bytes | None:
        """Cheapest completion bytes from ``parser`` (at ``node``) once a lexeme of
        terminal ``t`` is scanned (the lexeme itself not included)."""
        key = (node, t)
        if key not in self._after:
            self._after[key] = self._bytes(self.complete_parse(parser, t))
        return self._after[key]

    def _bytes(self, terms: list[int] | None) -> bytes | None:
        if terms is None:
            return None
        parts = [self.example(x) for x in terms]
        if any(x is None for x in parts):
            return None
        return b"".join(parts)  # type: ignore[arg-type]

    def _pred_adj(self, pred: Any) -> dict[int, list[tuple[int, int]]]:
        """Per nonterminal B: the predicted items ``(Y, q)`` in B's rules waiting on Y
        (``q``: the position after Y)."""
        adj = self._adj.get(pred.key)
        if adj is None:
            lhs = self.t.lhs
            adj = {}
            for y, qs in pred.wait.items():
                for q in qs:
                    adj.setdefault(lhs[q], []).append((y, q))
            self._adj[pred.key] = adj
        return adj

    def complete_parse(self, parser: Any, first: int | None = None) -> list[int] | None:
        """Terminals of a cheapest completion of the Earley parse (None: none finite);
        with ``first``: of the parse after scanning a lexeme of that terminal."""
        t = self.t
        rows = parser.rows
        pb = t.pos_bits
        pm = (1 << pb) - 1
        lhs, rest = t.lhs, self.rest
        memo: dict[int, dict[int, tuple[int, Any]]] = {}

        def solve(j: int) -> dict[int, tuple[int, Any]]:
            # rows this one depends on (origins of its waiting kernel items) first
            stack = [j]
            while stack:
                r = stack[-1]
                if r in memo:
                    stack.pop()
                    continue
                hit = self._rows.get(id(rows[r]))
                if hit is not None and hit[0] is rows[r]:
                    memo[r] = hit[1]
                    stack.pop()
                    continue
                deps = {it >> pb for its in rows[r].kwait.values() for it in its} - memo.keys()
                if deps:
                    stack.extend(deps)
                    continue
                memo[r] = self._row_ctx(rows[r], r, memo, pb, pm)
                stack.pop()
            return memo[j]

        row = rows[-1]
        n = len(rows) - 1
        limit = current().completion_bytes
        best = _INF
        how: tuple[Any, ...] | None = None
        if first is not None:  # the items that scan it, advanced past it
            kernel: Any = row.kscan.get(first, ())
            for q in row.pred.scan.get(first, ()):
                c = solve(n).get(lhs[q])
                if c is not None and rest[q] + c[0] < best:
                    best, how = rest[q] + c[0], ("p", q, n)
        else:
            kernel = row.kernel
            if n == 0:
                best, how = rest[t.rule_pos[0]], ("s", t.rule_pos[0], 0)
        for it in kernel:
            p, o = it & pm, it >> pb
            if rest[p] >= best:
                continue
            c = solve(o).get(lhs[p])
            if c is not None and rest[p] + c[0] < best:
                best, how = rest[p] + c[0], ("k", it)
        if how is None or best >= _INF:
            return None
        if best > limit:  # every completion from here is longer: refuse before expanding
            raise LimitError("completion_bytes", best, limit, f"parser row {n}",
                             detail="the shortest completion is longer than the limit")
        out: list[int] = []
        while True:  # follow the choices down to the accepting item
            if how[0] == "s":
                self.expand(how[1], out)
                return out
            if how[0] == "k":
                it = how[1]
                p, o = it & pm, it >> pb
                self.expand(p, out)
                how = solve(o)[lhs[p]][1]
            elif how[0] == "p":
                q, j = how[1], how[2]
                self.expand(q, out)
                how = solve(j)[lhs[q]][1]
            else:  # accepted
                return out

    def _row_ctx(self, row: Any, j: int, memo: dict[int, dict[int, tuple[int, Any]]],
                 pb: int, pm: int) -> dict[int, tuple[int, Any]]:
        """``_solve_row`` cached per row object (a row's stack below it never changes, so
        its solution is a function of the object; the object is kept to pin its id)."""
        hit = self._rows.get(id(row))
        if hit is not None and hit[0] is row:
            return hit[1]
        dist = self._solve_row(row, j, memo, pb, pm)
        self._rows[id(row)] = (row, dist)
        if len(self._rows) > _ROW_CACHE:
            self._rows.popitem(last=False)
        return dist

    def _solve_row(self, row: Any, j: int, memo: dict[int, dict[int, tuple[int, Any]]],
                   pb: int, pm: int) -> dict[int, tuple[int, Any]]:
        """Per nonterminal ``A`` waited on in row ``j``: the cheapest cost to finish after
        completing ``A`` back to ``j``, and how (Dijkstra through the predicted items)."""
        import heapq

        lhs, rest = self.t.lhs, self.rest
        heap: list[tuple[int, int, int, Any]] = []
        k = 0
        if j == 0:
            heap.append((0, k, self.t.start, ("a",)))
        for y, its in row.kwait.items():
            for it in its:
                p, o = it & pm, it >> pb
                c = memo[o].get(lhs[p])
                if c is not None and rest[p] + c[0] < _INF:
                    k += 1
                    heap.append((rest[p] + c[0], k, y, ("k", it)))
        heapq.heapify(heap)
        adj = self._pred_adj(row.pred)
        dist: dict[int, tuple[int, Any]] = {}
        while heap:
            d, _, y, how = heapq.heappop(heap)
            if y in dist:
                continue
            dist[y] = (d, how)
            for y2, q in adj.get(y, ()):
                if y2 not in dist and rest[q] < _INF:
                    k += 1
                    heapq.heappush(heap, (d + rest[q], k, y2, ("p", q, j)))
        return dist


def _const(x: Any) -> Callable[[], Any]:
    return lambda: x


def _byte_bfs(m: Matcher, max_states: int) -> bytes:
    cc = m.cc
    st = cc.steps
    start = (m._ls, m._node, m._start)
    # state -> (previous state, byte); parsers kept per state for lexeme boundaries
    prev: dict[tuple[int, int, bool], tuple[Any, int]] = {start: (None, -1)}
    parsers: dict[int, Any] = {m._node: m._parser.copy()}
    rows_budget = max_states * 64  # parser rows copied for new nodes (memory)
    rows_copied = m._parser.n_rows
    q = deque([start])
    while q:
        if len(prev) > max_states or rows_copied > rows_budget:
            break
        ls, node, _ = cur = q.popleft()
        parser = parsers[node]

        def here(p: Any = parser) -> Any:
            return p

        for b in _ORDER:
            s, c, pushes = st.step_detail(ls, node, b, here)
            if s == DEAD:
                continue
            if c != node and c not in parsers:
                rows_copied += parser.n_rows
                p2 = parser.copy()
                for a, _, _ in pushes:
                    st.push_lexeme(p2, a)
                parsers[c] = p2
            fresh = bool(pushes) and pushes[-1][2] == 1
            nxt = (s, c, fresh)
            if nxt in prev:
                continue
            prev[nxt] = (cur, b)
            done = cc.is_accepting_at(s, c, fresh, _const(parsers[c]))
            if done:
                out = bytearray()
                k: Any = nxt
                while k != start:
                    k, bb = prev[k]
                    out.append(bb)
                return bytes(reversed(out))
            q.append(nxt)
    raise ConstraintError(
        f"no completion found within {max_states} states from output byte {m._out_len}"
    )
