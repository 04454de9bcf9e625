"""The lexer: one lazy DFA over every terminal of a grammar (seed 004).

A lexer state is a ``LexerDfa`` state: the set of terminals still alive after the bytes
of the current lexeme. At a lexeme boundary the lexer starts from the state for exactly
the terminals the parser allows next, plus the ``%ignore`` terminals, so it never
considers a terminal the grammar cannot use there. Start states are cached per allowed
set (by the DFA).

Lexing is greedy, as in Lark's and llguidance's lexers: a lexeme goes on while the next
byte keeps some terminal alive, and ends (if some terminal accepts it) only when the next
byte would kill them all, or at the end of the text. A *lazy* terminal (``lazy`` or
``stop``) ends the lexeme as soon as it matches. ``ByteParser`` spells these rules out
byte by byte; the mask engine follows the same rules on the DFA table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, overload

from tether.grammar.ir import Terminal
from tether.parser.tables import ParserTables
from tether.parser.terminals import is_lazy, lexeme_node, node_is_cheap

if TYPE_CHECKING:
    from tether.regex.ast import Node

DEAD = -1


class Lexer:
    """The lexer of a grammar (see the module docstring).

    Attributes:
        tables: the parser tables the terminal ids refer to.
        dfa: the ``tether.regex.LexerDfa`` over every terminal (index = terminal id).
        lazy: ids of lazy terminals.
        ignore: ids of ``%ignore`` terminals (always allowed at a boundary).

    Raises (constructor):
        GrammarError: a terminal's regex is invalid.
    """

    def __init__(self, tables: ParserTables, *, max_states: int | None = None) -> None:
        from tether.regex import LexerDfa

        self.tables = tables
        nodes = LexemeNodes(tables.terminals)
        self.dfa = LexerDfa(nodes) if max_states is None else LexerDfa(nodes, max_states=max_states)
        self.lazy = frozenset(i for i, t in enumerate(tables.terminals) if is_lazy(t))
        self.ignore = frozenset(tables.ignore)
        self._starts: dict[frozenset[int], int] = {}
        self._ends_now: dict[int, bool] = {}

    def start_state(self, allowed: Iterable[int]) -> int:
        """The state at a lexeme boundary where the parser allows ``allowed`` (the
        ``%ignore`` terminals are added). Cached per set."""
        key = allowed if isinstance(allowed, frozenset) else frozenset(allowed)
        s = self._starts.get(key)
        if s is None:
            s = self._starts[key] = self.dfa.start(sorted(key | self.ignore))
        return s

    def step(self, state: int, byte: int) -> int:
        """The state after ``byte``, or ``DEAD`` (-1) if no terminal stays alive."""
        return int(self.dfa.step(state, byte))

    def accepting(self, state: int) -> tuple[int, ...]:
        """Terminals that match the current lexeme exactly."""
        return tuple(self.dfa.accepting(state))

    def ends_now(self, state: int) -> bool:
        """A lazy terminal matches the current lexeme, so the lexeme ends here."""
        r = self._ends_now.get(state)
        if r is None:
            r = self._ends_now[state] = bool(self.lazy) and any(
                t in self.lazy for t in self.dfa.accepting(state)
            )
        return r


class LexemeNodes(Sequence["Node"]):
    """The terminals' lexeme nodes (``lexeme_node``) for the lexer's DFA: a node that
    needs no parsing (a literal's, or one its terminal carries) is built when a state
    first holds its terminal; the others are built here, so an invalid regex is refused
    when the lexer is made. A schema's grammar has a terminal per key and enum value, and
    the first mask needs only those of the start: building every node up front was about
    a tenth of the engine's compile on the dev schemas of JSONSchemaBench."""

    def __init__(self, terminals: Sequence[Terminal]) -> None:
        self._terminals = terminals
        self._nodes: list[Node | None] = [
            None if node_is_cheap(t) else lexeme_node(t) for t in terminals]

    def __len__(self) -> int:
        return len(self._nodes)

    @overload
    def __getitem__(self, i: int) -> Node: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Node]: ...

    def __getitem__(self, i: int | slice) -> Node | Sequence[Node]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self._nodes)))]
        n = self._nodes[i]
        if n is None:
            n = self._nodes[i] = lexeme_node(self._terminals[i])
        return n
