"""A grammar terminal as one regex node of the regex layer, options applied.

* ``literal`` is matched byte for byte (``ignore_case`` folds it like a regex would);
* ``regex`` is parsed in its flavor;
* ``stop``: the value matches the regex and does not contain the stop text, then the stop
  text follows: ``(R ∩ ¬(Σ* stop Σ*)) stop``; the terminal is lazy, so the lexeme ends
  at the first occurrence of the stop text;
* ``max_len``: the value (the stop text excluded) is at most that many bytes:
  ``R ∩ Σ{0,max_len}``.

A lexeme is never empty: the node returned by ``lexeme_node`` excludes ε, and a terminal
whose regex matches ε is reported by ``matches_empty`` so that the parser treats it as a
nullable symbol (the terminal may be absent) instead.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from tether.errors import GrammarError, RegexError
from tether.grammar.ir import Terminal

if TYPE_CHECKING:
    from tether.regex.ast import Node


@lru_cache(maxsize=4096)
def terminal_node(terminal: Terminal) -> Node:
    """The regex node of ``terminal`` with its options (may match ε).

    Raises:
        GrammarError: the terminal's regex is invalid (the RegexError is the cause).
    """
    from tether import regex as rx

    try:
        node: Node = terminal.to_node()  # regex / literal / set operations, ignore_case, max_len
    except RegexError as exc:
        raise GrammarError(f"terminal {terminal.name!r}: {exc}") from exc
    anything = rx.star(rx.ANY_BYTE)
    if terminal.stop:
        stop = rx.literal(terminal.stop.encode("utf-8"))
        node = rx.concat(
            rx.intersect(node, rx.complement(rx.concat(anything, stop, anything))), stop
        )
    return node


def clear_node_caches() -> None:
    """Empty the memo of ``terminal_node`` (see ``tether.regex.interning``)."""
    terminal_node.cache_clear()


def matches_empty(terminal: Terminal) -> bool:
    """The terminal's language contains the empty string (read off a literal or a
    prebuilt node without building the terminal's node: ``node_is_cheap``)."""
    if terminal.stop:
        terminal_node(terminal)  # checked, as every other terminal is
        return False  # the lexeme ends with the (non-empty) stop text
    if terminal.literal is not None:
        return terminal.literal == ""
    if terminal.node is not None:
        return bool(terminal.node.nullable)  # a max_len keeps (or adds no) empty string
    return bool(terminal_node(terminal).nullable)


def node_is_cheap(terminal: Terminal) -> bool:
    """Building the terminal's node parses nothing and cannot fail (a literal, or a node
    its maker built), so it can wait until the lexer needs it."""
    if terminal.stop:
        return False
    return terminal.literal is not None or (terminal.node is not None and terminal.max_len is None)


def lexeme_node(terminal: Terminal) -> Node:
    """``terminal_node`` without the empty string (what one lexeme can be)."""
    from tether import regex as rx

    # a cheap terminal (a literal, a node its maker built: a schema's key or enum value,
    # built when a lexer state first holds it) is read through ``to_node``'s own memo, by
    # content: ``terminal_node``'s key hashes every field of the terminal (a set
    # operation's whole tree), which cost about as much as building a short literal
    node = terminal.to_node() if node_is_cheap(terminal) else terminal_node(terminal)
    if node.nullable:
        node = rx.intersect(node, rx.complement(rx.EPSILON))
    return node


def is_lazy(terminal: Terminal) -> bool:
    """The lexeme ends at the first point the terminal matches (``lazy`` or ``stop``)."""
    return terminal.lazy or bool(terminal.stop)
