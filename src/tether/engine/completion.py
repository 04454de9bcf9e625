"""Lookahead from a matcher's state: allowed bytes, forced bytes and tokens, and the
shortest completion (for closing an output within a token budget).

All functions leave the matcher unchanged. Costs are in lexer-table steps; the parser
is only pushed where a lexeme ends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tether.engine.tables import DEAD, UNKNOWN
from tether.errors import ConstraintError

if TYPE_CHECKING:
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


def shortest_completion(m: Matcher, max_states: int = 20000) -> bytes:
    """A short byte string after which ``m`` is accepting.

    First at the lexeme level: finish the current lexeme by the shortest way, then a
    cheapest sequence of terminals to acceptance (Dijkstra over parser states, each
    terminal costing the length of its shortest example); the result is checked on a
    copy of ``m`` (greedy lexing could join two examples). If that fails, a breadth-first
    search over bytes (exactly shortest, but slow on large grammars).

    Raises:
        ConstraintError: no completion found (``max_states`` explored states).
    """
    if m._eos or m._accepting_now():
        return b""
    tail = _lexeme_level(m)
    if tail is not None:
        w = m.copy()
        if w.consume_bytes(tail) and w.is_accepting():
            return tail
    return _byte_bfs(m, max_states)


def _examples(cc: Any) -> dict[int, bytes | None]:
    ex = getattr(cc, "_examples", None)
    if ex is None:
        ex = cc._examples = {}
    return ex  # type: ignore[no-any-return]


def _example(cc: Any, t: int) -> bytes | None:
    ex = _examples(cc)
    if t not in ex:
        from tether.parser.terminals import lexeme_node
        from tether.regex import example

        ex[t] = example(lexeme_node(cc.tables.terminals[t]))
    return ex[t]


def _lexeme_level(m: Matcher, max_lex_states: int = 2000, max_parser_states: int = 3000
                  ) -> bytes | None:
    import heapq

    cc = m.cc
    st = cc.steps
    starts: list[tuple[bytes, Any]] = []
    if m._start:
        starts.append((b"", m._parser.copy()))
    else:  # shortest ways to end the current lexeme (inside the lexer DFA)
        seen = {m._ls}
        keys: set[Any] = set()
        q = deque([(m._ls, b"")])
        while q and len(seen) < max_lex_states and len(starts) < 8:
            ls, w = q.popleft()
            a = st.accid_of(ls)
            if a >= 0:  # the lexeme may end here: keep one way per parser outcome
                p = m._parser.copy()
                if st.push_lexeme(p, a) and p.row_key() not in keys:
                    keys.add(p.row_key())
                    starts.append((w, p))
            row = st.table[ls]
            if (row == UNKNOWN).any():
                st.fill_row(ls)
                row = st.table[ls]
            for b in _ORDER:
                s = int(row[b])
                if s >= 0 and s not in seen:
                    seen.add(s)
                    q.append((s, w + bytes([b])))
    heap: list[tuple[int, int, bytes, Any]] = []
    k = 0
    for w, p in starts:
        heap.append((len(w), k, w, p))
        k += 1
    heapq.heapify(heap)
    best: dict[Any, int] = {}
    ignore = st.ignore
    while heap and len(best) < max_parser_states:
        cost, _, w, p = heapq.heappop(heap)
        if p.is_accepting():
            return w
        key = p.row_key()
        if best.get(key, cost + 1) <= cost:
            continue
        best[key] = cost
        for t in sorted(p.allowed_terminals()):
            if t in ignore:
                continue
            ex = _example(cc, t)
            if ex is None:
                continue
            p2 = p.copy()
            if p2.push([t]):
                k += 1
                heapq.heappush(heap, (cost + len(ex), k, w + ex, p2))
    return None


def _const(x: Any) -> Callable[[], Any]:
    return lambda: x


def _byte_bfs(m: Matcher, max_states: int) -> bytes:
    cc = m.cc
    st = cc.steps
    start = (m._ls, m._node, m._start)
    # state -> (previous state, byte); parsers kept per state for lexeme boundaries
    prev: dict[tuple[int, int, bool], tuple[Any, int]] = {start: (None, -1)}
    parsers: dict[int, Any] = {m._node: m._parser.copy()}
    q = deque([start])
    while q:
        if len(prev) > max_states:
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
                p2 = parser.copy()
                for a, _, _ in pushes:
                    st.push_lexeme(p2, a)
                parsers[c] = p2
            fresh = bool(pushes) and pushes[-1][2] == 1
            nxt = (s, c, fresh)
            if nxt in prev:
                continue
            prev[nxt] = (cur, b)
            if not fresh:
                a = st.accid_of(s)
                if a >= 0:
                    st.transition(c, a, _const(parsers[c]))
            done = cc.is_accepting_at(s, c, fresh)
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
