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

A terminal whose language needs set operations the regex syntax cannot spell (Lark
``A & B`` / ``~A``, KBNF ``except!``) carries ``expr`` instead of ``regex``: a tree of
tuples over regex strings, ``("and", a, b, ...)``, ``("not", a)``,
``("except", a, max_reps)`` (strings not containing a match of ``a``),
``("concat", ...)``, ``("or", ...)``, ``("repeat", a, lo, hi)``.
``Terminal.to_node()`` builds the regex-layer node for any terminal.

Lexemes are otherwise matched greedily (longest match), as Lark's and llguidance's
lexers do. Lark grammars keep that meaning; the GBNF and KBNF front ends and
``Grammar.sequence``/``union`` choose their terminals so that greedy lexing accepts
exactly the plain context-free language (``tether.grammar.lower``), and record the
choices in ``Grammar.lowering``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from tether.errors import GrammarError
from tether.limits import deadline

if TYPE_CHECKING:
    from tether.regex import Node as RegexNode

Flavor = Literal["python", "ecma"]


# The frozen dataclasses below write their ``__init__`` out (``init=False``): the one
# ``dataclass`` generates sets each field through ``object.__setattr__`` (and calls
# ``__post_init__``), several times slower than the slots' own setters, and a grammar
# makes thousands of rules, symbols and terminals. Same fields, defaults and keywords.


@dataclass(frozen=True, slots=True, init=False)
class Terminal:
    """A lexeme class: a regex (or literal) over the bytes of the output.

    Exactly one of ``regex``, ``literal`` and ``expr`` is set. ``literal`` is matched
    byte for byte (up to case when ``ignore_case``).
    """

    name: str
    regex: str | None = None
    literal: str | None = None
    flavor: Flavor = "python"
    ignore_case: bool = False
    lazy: bool = False
    stop: str | None = None
    max_len: int | None = None
    expr: tuple | None = None  # type: ignore[type-arg]
    # The regex-layer node of ``regex`` / ``expr`` (with ``ignore_case`` applied, without
    # ``max_len``), built by the terminal's maker: the JSON Schema compiler from parts, the
    # GBNF/Lark/KBNF lowering from the front-end AST (``terminal_nodes.py``),
    # ``from_regex`` from its one parse. ``to_node`` returns it instead of parsing the
    # text. It must denote the text's language; where the maker spells the parser's tree
    # it is the very node the parse builds (nodes are interned: the tests check identity).
    # A maker may hand a ``LazyNode`` instead (built by ``to_node`` on first use; its
    # ``nullable`` is known up front). The text stays the terminal's spelling for
    # printing, GBNF and keys.
    node: Any = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        name: str,
        regex: str | None = None,
        literal: str | None = None,
        flavor: Flavor = "python",
        ignore_case: bool = False,
        lazy: bool = False,
        stop: str | None = None,
        max_len: int | None = None,
        expr: tuple | None = None,  # type: ignore[type-arg]
        node: Any = None,
    ) -> None:
        if (regex is not None) + (literal is not None) + (expr is not None) != 1:
            raise GrammarError(f"terminal {name!r} needs exactly one of regex=, literal=, expr=")
        s = _TERMINAL_SETTERS
        s[0](self, name)
        s[1](self, regex)
        s[2](self, literal)
        s[3](self, flavor)
        s[4](self, ignore_case)
        s[5](self, lazy)
        s[6](self, stop)
        s[7](self, max_len)
        s[8](self, expr)
        s[9](self, node)

    @property
    def pattern(self) -> str:
        """The terminal as a regex in tether's (Python) syntax.

        Raises:
            GrammarError (a ValueError): for an ``expr`` terminal (use ``to_node``).
        """
        if self.literal is not None:
            from tether.grammar.regexgen import escape_literal

            r = escape_literal(self.literal)
            return f"(?i:{r})" if self.ignore_case else r
        if self.regex is None:
            raise GrammarError(f"terminal {self.name!r} is a set operation; use to_node()")
        return self.regex

    def to_node(self) -> Any:
        """The regex-layer node (``tether.regex``) of this terminal's language.

        Applies ``ignore_case`` and ``max_len``; ``lazy`` and ``stop`` are lexer options
        and are not part of the node.

        Cost: nodes are cached by content (not by name), and so is every regex string
        parsed on the way: a grammar (or the JSON Schema compiler) that spells the same
        regex in many terminals parses it once. Regex nodes are interned by the regex
        layer, so the cached node is the very node a fresh parse would build.

        Raises:
            RegexError: if a regex in the terminal cannot be parsed.
        """
        node = self.node
        if node is not None and self.max_len is None:
            return node.get() if node.__class__ is LazyNode else node
        return _terminal_node(
            self.regex, self.literal, self.flavor, self.ignore_case, self.max_len, self.expr
        )


class LazyNode:
    """A terminal's regex node (``Terminal.node``) that ``build`` makes on first use.

    A maker that can build a node without parsing (from parts whose nodes it holds), and
    that knows whether it matches the empty string, hands this instead of the node: the
    parser tables read ``nullable`` and the lexer builds the node when a state first holds
    the terminal, so a terminal the lexer never reaches (a schema's first mask needs
    few) costs no regex work. ``build`` must not fail. Pickled as the node it builds.
    """

    __slots__ = ("_build", "_node", "nullable")

    def __init__(self, build: Callable[[], RegexNode], nullable: bool) -> None:
        self._build: Callable[[], RegexNode] | None = build
        self._node: RegexNode | None = None
        self.nullable = nullable

    def get(self) -> RegexNode:
        """The node (built now if it was not). Two threads may both build it (the same
        interned node); the builder is read once, as another thread may clear it after
        setting the node."""
        node = self._node
        if node is None:
            build = self._build
            if build is None:  # another thread built it: its node was set first
                node = self._node
                assert node is not None
                return node
            node = self._node = build()
            self._build = None
        return node

    def __reduce__(self) -> tuple[Any, ...]:
        return (_same, (self.get(),))


def _same(node: Any) -> Any:
    return node


def _setters(cls: type, *names: str) -> tuple[Any, ...]:
    """The slot setters of ``cls``'s fields ``names`` (they bypass the frozen check)."""
    return tuple(cls.__dict__[n].__set__ for n in names)


_TERMINAL_SETTERS = _setters(Terminal, "name", "regex", "literal", "flavor", "ignore_case", "lazy", "stop",
                             "max_len", "expr", "node")


def clear_node_caches() -> None:
    """Empty the memos of terminal regex nodes (the regex layer's trim calls it, see
    ``tether.regex.interning``)."""
    _parse.cache_clear()
    _terminal_node.cache_clear()


@lru_cache(maxsize=8192)
def _parse(pattern: str, flavor: Flavor, ignore_case: bool) -> Any:
    from tether import regex as rx

    return rx.parse(pattern, flavor=flavor, ignore_case=ignore_case)


@lru_cache(maxsize=8192)
def _terminal_node(
    regex: str | None,
    literal: str | None,
    flavor: Flavor,
    ignore_case: bool,
    max_len: int | None,
    expr: tuple | None,  # type: ignore[type-arg]
) -> Any:
    """``Terminal.to_node`` by content (errors are not cached: they raise every time)."""
    from tether import regex as rx

    def leaf(text: str) -> Any:
        return _parse(text, flavor, ignore_case)

    if literal is not None and not ignore_case:
        node = rx.literal(literal.encode("utf-8"))
    elif expr is not None:
        node = expr_node(expr, leaf)
    else:
        if literal is not None:
            from tether.grammar.regexgen import escape_literal

            node = leaf(f"(?i:{escape_literal(literal)})")
        else:
            assert regex is not None  # exactly one of regex, literal, expr (__init__)
            node = leaf(regex)
    if max_len is not None:
        node = rx.intersect(node, rx.repeat(rx.ANY_BYTE, 0, max_len))
    return node


def expr_node(expr: tuple | str, leaf: Callable[[str], Any]) -> Any:  # type: ignore[type-arg]
    """The regex-layer node of a ``Terminal.expr`` tree whose regex leaves ``leaf`` turns
    into nodes (``Terminal.to_node`` parses them; a maker that holds the leaves' nodes
    passes a lookup instead, and gets the node the parse would build).

    Raises:
        GrammarError: an unknown operation; what ``leaf`` raises (RegexError).
    """
    from tether import regex as rx

    def build(e: tuple | str) -> Any:  # type: ignore[type-arg]
        if isinstance(e, str):
            return leaf(e)
        op, args = e[0], e[1:]
        if op == "except":
            return set_operation("except", [build(args[0])], args[1])
        if op == "repeat":
            return rx.repeat(build(args[0]), args[1], args[2])
        return set_operation(op, [build(a) for a in args])

    return build(expr)


def set_operation(op: str, args: list[RegexNode], max_reps: int | None = None) -> RegexNode:
    """The node of a ``Terminal.expr`` operation over its operands' nodes: ``and``
    (intersection), ``not`` (complement within the texts), ``except`` (the texts with no
    substring in the operand, at most ``max_reps`` characters when given), ``concat``,
    ``or``.

    Raises:
        GrammarError: an unknown operation.
    """
    from tether import regex as rx

    anything = rx.star(rx.ANY_CHAR)  # the valid UTF-8 texts
    if op == "and":
        return rx.intersect(*args)
    if op == "not":
        return rx.intersect(anything, rx.complement(args[0]))
    if op == "except":
        node = rx.intersect(anything, rx.complement(rx.concat(anything, args[0], anything)))
        if max_reps is not None:
            node = rx.intersect(node, rx.repeat(rx.ANY_CHAR, 0, max_reps))
        return node
    if op == "concat":
        return rx.concat(*args)
    if op == "or":
        return rx.alt(*args)
    raise GrammarError(f"unknown terminal operation {op!r}")


@dataclass(frozen=True, slots=True, init=False)
class NT:
    """A reference to a nonterminal (rule name)."""

    name: str

    def __init__(self, name: str) -> None:
        _NT_NAME(self, name)

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, init=False)
class T:
    """A reference to a terminal by name."""

    name: str

    def __init__(self, name: str) -> None:
        _T_NAME(self, name)

    def __repr__(self) -> str:
        return self.name


Symbol = NT | T


@dataclass(frozen=True, slots=True, init=False)
class Rule:
    """One alternative: ``lhs -> rhs`` (``rhs == ()`` is ε)."""

    lhs: str
    rhs: tuple[Symbol, ...]

    def __init__(self, lhs: str, rhs: tuple[Symbol, ...]) -> None:
        _RULE_LHS(self, lhs)
        _RULE_RHS(self, rhs)

    def __repr__(self) -> str:
        return f"{self.lhs} -> {' '.join(map(repr, self.rhs)) or 'ε'}"


(_NT_NAME,) = _setters(NT, "name")
(_T_NAME,) = _setters(T, "name")
_RULE_LHS, _RULE_RHS = _setters(Rule, "lhs", "rhs")
_RULE_LHS_OF = operator.attrgetter("lhs")


@dataclass(frozen=True, slots=True)
class SymbolIds:
    """A grammar's rules over integer symbol ids, numbered as the parser tables number
    them: terminals ``0 .. T-1`` in definition order, ``T`` left for the start symbol the
    tables add, then the rule names in first-definition order (``names[k]`` is
    ``T + 1 + k``). ``symbol_ids`` computes them; a front end that needs them anyway (the
    JSON Schema compiler's prune) hands them to ``Grammar.mark_trimmed``, and the tables
    read them instead of encoding every right side again.

    Attributes:
        names: the rule names in first-definition order.
        nid: rule name -> id.
        lhs, rhs: per rule, the id of its left side and the ids of its right side.
    """

    names: list[str]
    nid: dict[str, int]
    lhs: list[int]
    rhs: list[tuple[int, ...]]


def symbol_ids(g: Grammar) -> SymbolIds | None:
    """``g``'s rules as ``SymbolIds``; None where a symbol names no rule or terminal of
    its kind, or a rule name is also a terminal name."""
    tid = {n: i for i, n in enumerate(g.terminals)}
    names = list(dict.fromkeys(map(_RULE_LHS_OF, g.rules)))
    base = len(tid) + 1
    nid = {n: base + k for k, n in enumerate(names)}
    if not nid.keys().isdisjoint(tid):
        return None
    t = T
    try:
        rhs = [tuple([tid[s.name] if s.__class__ is t else nid[s.name] for s in r.rhs]) for r in g.rules]
    except KeyError:
        return None
    return SymbolIds(names, nid, list(map(nid.__getitem__, map(_RULE_LHS_OF, g.rules))), rhs)


@dataclass(slots=True)
class Grammar:
    """A context-free grammar over regex terminals.

    Attributes:
        start: name of the start nonterminal.
        rules: every alternative, in definition order.
        terminals: terminal name → Terminal.
        ignore: names of terminals that may appear between any two lexemes (Lark ``%ignore``).
        warnings: what a front end approximated or ignored (e.g. Lark priorities).
        lowering: the terminal choices a front end made (GBNF: which sub-expressions
            became one terminal and which were split; see ``tether.grammar.lower``).
    """

    start: str
    rules: list[Rule] = field(default_factory=list)
    terminals: dict[str, Terminal] = field(default_factory=dict)
    ignore: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lowering: list[str] = field(default_factory=list)
    # the front-end AST the grammar was lowered from, with the IR it produced, so that
    # composition can lower the combined grammar again (see compose.py); ignored by ==
    source_ast: object = field(default=None, repr=False, compare=False)
    # the ``ir_signature`` when ``mark_trimmed`` was last called (see ``trimmed``)
    _trimmed_at: tuple[object, ...] | None = field(default=None, init=False, repr=False, compare=False)
    # the ``SymbolIds`` given to ``mark_trimmed`` (valid while ``trimmed``)
    _ids: SymbolIds | None = field(default=None, init=False, repr=False, compare=False)

    def ir_signature(self) -> tuple[object, ...]:
        """A value that changes whenever rules, terminals, start or ignore change."""
        return (self.start, tuple(self.rules), tuple(self.terminals.items()), tuple(self.ignore))

    def mark_trimmed(self, ids: SymbolIds | None = None) -> None:
        """Record that every rule derives a finite text and is reachable from the start,
        and that every terminal is used (a front end that pruned its grammar says so:
        ``trimmed`` then spares the parser tables the same work); ``ids``: the grammar's
        ``symbol_ids`` as it stands, when the front end computed them
        (``trimmed_ids``)."""
        self._trimmed_at = self.ir_signature()
        self._ids = ids

    @property
    def trimmed_ids(self) -> SymbolIds | None:
        """The ``SymbolIds`` given to ``mark_trimmed``, while ``trimmed``; else None."""
        ids = self._ids
        return ids if ids is not None and self.trimmed else None

    @property
    def trimmed(self) -> bool:
        """Whether ``mark_trimmed`` was called and the grammar has not changed since
        (rules, terminals, start and ignore compared: each is immutable, so equal
        signatures are equal grammars)."""
        at = self._trimmed_at
        return at is not None and at == self.ir_signature()

    def add_rule(self, lhs: str, *rhs: Symbol) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))

    def add_terminal(self, terminal: Terminal) -> T:
        """Add ``terminal`` (or reuse an identical one of the same name); return its reference."""
        old = self.terminals.get(terminal.name)
        if old is not None and old != terminal:
            raise GrammarError(f"terminal {terminal.name!r} defined twice differently")
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

    # -- front ends and combinators -------------------------------------------------
    # They import this module, so it imports none of them: ``tether.grammar.front``
    # (imported with the package, before any use) registers them (``register_builder``).
    # Each runs under ``tether.limits.deadline()`` (``Limits.compile_seconds``) and raises
    # LimitError past the other active limits (text size, rules, nesting, counts).
    @classmethod
    def from_gbnf(cls, text: str, *, start: str = "root", source: str = "", strict: bool = False) -> Grammar:
        """Read llama.cpp's GBNF; see ``tether.grammar.gbnf``. Raises GrammarError."""
        with deadline("loading a grammar"):
            return _builder("from_gbnf")(text, start=start, source=source, strict=strict)

    @classmethod
    def from_lark(cls, text: str, *, start: str = "start", source: str = "") -> Grammar:
        """Read a Lark grammar; see ``tether.grammar.lark``. Raises GrammarError."""
        with deadline("loading a grammar"):
            return _builder("from_lark")(text, start=start, source=source)

    @classmethod
    def from_kbnf(cls, text: str, *, start: str | None = None, source: str = "") -> Grammar:
        """Read KBNF-style EBNF (``A ::= ...;``, ``except!``); see ``tether.grammar.kbnf``."""
        with deadline("loading a grammar"):
            return _builder("from_kbnf")(text, start=start, source=source)

    @classmethod
    def from_regex(cls, pattern: str, *, flavor: Flavor = "python", ignore_case: bool = False) -> Grammar:
        """One terminal matching ``pattern`` as a whole. Raises RegexError."""
        return _builder("from_regex")(pattern, flavor=flavor, ignore_case=ignore_case)

    @classmethod
    def from_choices(cls, choices: list[str]) -> Grammar:
        """Exactly the given strings. Raises GrammarError if ``choices`` is empty."""
        with deadline("loading a grammar"):
            return _builder("from_choices")(choices)

    @classmethod
    def from_json_schema(cls, schema: object, **options: object) -> Grammar:
        """A JSON Schema (dict, or JSON text); see ``tether.grammar.json_schema``."""
        return _builder("from_json_schema")(schema, **options)

    @classmethod
    def sequence(cls, *grammars: Grammar) -> Grammar:
        """The concatenation of the languages of ``grammars``."""
        with deadline("loading a grammar"):
            return _builder("sequence")(*grammars)

    @classmethod
    def union(cls, *grammars: Grammar) -> Grammar:
        """The union of the languages of ``grammars``."""
        with deadline("loading a grammar"):
            return _builder("union")(*grammars)

    def embed(self, other: Grammar, name: str) -> NT:
        """Add ``other`` to this grammar as the rule ``name`` (its rules renamed
        ``name__<rule>``); return the nonterminal to use in new rules."""
        nt: NT = _BUILDERS["embed"](self, other, name)
        return nt

    def simplified(self) -> Grammar:
        """``simplify(self)``: validated and cleaned up. Raises GrammarError."""
        return _builder("simplified")(self)

    def __str__(self) -> str:
        lines = [f"start: {self.start}"]
        lines += [repr(r) for r in self.rules]
        lines += [
            f"{t.name}: {'/' + t.regex + '/' if t.regex is not None else repr(t.literal) if t.literal is not None else t.expr}"
            for t in self.terminals.values()
        ]
        return "\n".join(lines)


_BUILDERS: dict[str, Callable[..., Any]] = {}


def register_builder(name: str, build: Callable[..., Any]) -> None:
    """Offer ``build`` as ``Grammar.<name>`` (``tether.grammar.front`` registers the front
    ends and combinators: they import the IR, so it cannot import them)."""
    _BUILDERS[name] = build


def _builder(name: str) -> Callable[..., Grammar]:
    # filled by tether/grammar/__init__.py, which Python runs before this module
    return _BUILDERS[name]
