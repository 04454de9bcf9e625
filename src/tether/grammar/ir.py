"""The one Grammar IR every front end lowers into and the parser reads.

A grammar is a start symbol, a set of *terminals* (each a regex or a literal, over
UTF-8 bytes) and *rules* ``lhs -> rhs`` where ``rhs`` is a sequence of symbols.
Alternatives are several rules with the same ``lhs``; an empty ``rhs`` is ε.
Groups, options and repetitions exist only in front-end syntax: front ends flatten
them into named rules (see ``simplify``), so the parser sees plain BNF.

Terminals use the regex layer's syntax (``tether.regex``), matched as a whole
(full-match semantics). Per-terminal options follow what users of Lark and
llguidance expect:

* ``lazy``: the lexeme ends at the first point the regex matches (no longest match);
* ``stop``: the lexeme is any text up to the first occurrence of ``stop``
  (the stop text is consumed but is not part of the value);
* ``max_len``: at most this many bytes.

Lexemes are otherwise matched greedily (longest match), as Lark's and llguidance's
lexers do; where that differs from the plain context-free reading of a grammar the
front end says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

Flavor = Literal["python", "ecma"]


@dataclass(frozen=True, slots=True)
class Terminal:
    """A lexeme class: a regex (or literal) over the bytes of the output.

    Exactly one of ``regex`` and ``literal`` is set. ``literal`` is matched byte for byte.
    """

    name: str
    regex: str | None = None
    literal: str | None = None
    flavor: Flavor = "python"
    ignore_case: bool = False
    lazy: bool = False
    stop: str | None = None
    max_len: int | None = None

    def __post_init__(self) -> None:
        if (self.regex is None) == (self.literal is None):
            raise ValueError(f"terminal {self.name!r} needs exactly one of regex= and literal=")

    @property
    def pattern(self) -> str:
        """The terminal as a regex in tether's (Python) syntax."""
        if self.literal is not None:
            import re

            return re.escape(self.literal)
        assert self.regex is not None
        return self.regex


@dataclass(frozen=True, slots=True)
class NT:
    """A reference to a nonterminal (rule name)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class T:
    """A reference to a terminal by name."""

    name: str

    def __repr__(self) -> str:
        return self.name.upper() if not self.name.isupper() else self.name


Symbol = NT | T


@dataclass(frozen=True, slots=True)
class Rule:
    """One alternative: ``lhs -> rhs`` (``rhs == ()`` is ε)."""

    lhs: str
    rhs: tuple[Symbol, ...]

    def __repr__(self) -> str:
        return f"{self.lhs} -> {' '.join(map(repr, self.rhs)) or 'ε'}"


@dataclass(slots=True)
class Grammar:
    """A context-free grammar over regex terminals.

    Attributes:
        start: name of the start nonterminal.
        rules: every alternative, in definition order.
        terminals: terminal name → Terminal.
        ignore: names of terminals that may appear between any two lexemes (Lark ``%ignore``).
        warnings: what a front end approximated or ignored (e.g. Lark priorities).
    """

    start: str
    rules: list[Rule] = field(default_factory=list)
    terminals: dict[str, Terminal] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add_rule(self, lhs: str, *rhs: Symbol) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))

    def add_terminal(self, terminal: Terminal) -> T:
        """Add ``terminal`` (or reuse an identical one of the same name); return its reference."""
        old = self.terminals.get(terminal.name)
        if old is not None and old != terminal:
            raise ValueError(f"terminal {terminal.name!r} defined twice differently")
        self.terminals[terminal.name] = terminal
        return T(terminal.name)

    def nonterminals(self) -> list[str]:
        """Every rule name, in first-definition order."""
        return list(dict.fromkeys(r.lhs for r in self.rules))

    def rules_for(self, name: str) -> Iterator[Rule]:
        return (r for r in self.rules if r.lhs == name)

    def symbols(self) -> Iterable[Symbol]:
        for r in self.rules:
            yield from r.rhs

    def __str__(self) -> str:
        lines = [f"start: {self.start}"]
        lines += [repr(r) for r in self.rules]
        lines += [
            f"{t.name}: {'/' + t.regex + '/' if t.regex is not None else repr(t.literal)}"
            for t in self.terminals.values()
        ]
        return "\n".join(lines)
