"""Filling lexer-DFA transitions for the engine's slow path, one byte class at a time.

A trie walk needs only the transitions of the bytes that some token continues with —
for a state deep inside a lexeme usually one or two byte classes — so
``fill(state, need)`` asks the regex layer's ``LexerDfa.fill_classes`` for just the
classes of the state that meet ``need`` (a 256-bit int of bytes; None for all). Each
class is computed once (one derivative per terminal that can survive it) and written
into the row at once. Entries of the other classes stay UNKNOWN (-2), which the kernels
treat as a miss, so a partly filled row is always safe to read.

The engine's DFA belongs to its own ``Lexer`` instance and is only filled through here.
"""

from __future__ import annotations

from typing import Any

from tether.regex.ast import node_classes
from tether.regex.dfa import LexerDfa

DEAD = -1
UNKNOWN = -2
ALL = (1 << 256) - 1
# derivatives (candidate terminals over the state's other byte classes) also computed on a
# miss: each class filled ahead saves the walk a return to Python (a kernel restart)
EXTRA = 64
# new one-terminal states with a single live byte class (the next byte of a literal, a
# run of whitespace) filled right away, up to this many per miss: the walk that made such
# a state usually steps into it next (a token longer than one byte), and each of those
# steps would otherwise be a return to Python. Filling any new state ahead (whatever its
# classes) cost more in derivatives of states never reached than it saved.
CHAIN = 48
# new states of several terminals the byte of a miss leads to again, filled at once, up to
# this many per miss (a token of repeated bytes walks them next)
REPEAT = 32

def bytes_mask(bs: Any) -> int:
    """A 256-bit int with the bits of the bytes ``bs`` set."""
    m = 0
    for b in bs:
        m |= 1 << int(b)
    return m


class RowFiller:
    """Fills transitions of one LexerDfa by byte class (see the module docstring)."""

    def __init__(self, dfa: LexerDfa) -> None:
        self.dfa = dfa
        # rows ahead (extra classes, repeats, chains) are for the masks after the first:
        # the first mask of a constraint, which the time to the first token waits for,
        # fills only the entries its own walk reads; its owner turns this on after it
        self.ahead = False

    def fill(self, state: int, need: int | None = None, ahead: bool = True) -> None:
        """Compute the transitions of ``state`` for every byte class meeting ``need``,
        then, with ``ahead``, the other classes up to ``EXTRA`` derivatives and the rows
        of the new states that continue by one byte class only (up to ``CHAIN`` of them,
        breadth first; a literal's run of one-byte states at once: ``fill_chain``). A
        move along one token (``ahead=False``) needs neither: the states it crosses are
        mostly never walked (a text token taken whole by a mask inside a string with
        several live terminals: each byte a new state, each of its other classes a
        derivative of every terminal). Nor does a constraint's first mask (``ahead``
        attribute off until it is done): on the 300 dev schemas, first mask p50 about 340 ->
        270 µs, the second mask p50 about 25 µs dearer, the whole run unchanged."""
        dfa = self.dfa
        fill = dfa.fill_classes
        if not (ahead and self.ahead):
            fill(state, need)
            return
        n0 = dfa.n_states
        fill(state, need, extra=EXTRA)
        if need is not None and need & (need - 1) == 0:
            # the same byte again from each new state it leads to (a run of spaces
            # through the states of a gap shared by several terminals: `ws,ws` and `ws}`)
            b = need.bit_length() - 1
            s, todo = state, REPEAT
            while todo > 0 and dfa.n_states <= dfa.max_states // 2:
                s = int(dfa.table[s, b])
                if s < n0 or len(dfa.pairs(s)) < 2 or dfa.table[s, b] != UNKNOWN:
                    break  # not new; one terminal (the chain below); or known
                fill(s, need, extra=EXTRA)
                todo -= 1
        nxt, todo = n0, CHAIN
        while nxt < dfa.n_states and todo > 0 and dfa.n_states <= dfa.max_states // 2:
            pairs = dfa.pairs(nxt)
            if len(pairs) == 1 and not dfa.row_filled(nxt):
                done = dfa.fill_chain(nxt, todo)
                if done:
                    todo -= done
                elif len(node_classes(pairs[0][1])) <= 2:
                    fill(nxt, None)
                    todo -= 1
            nxt += 1
