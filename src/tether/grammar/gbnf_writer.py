"""Write a `Grammar` as GBNF text (llama.cpp's grammar format), exactly or not at all.

GBNF is a character-level context-free grammar with no lexer. A tether grammar can be
written as GBNF without changing its language when its meaning is already
character-level:

* a grammar read from GBNF or KBNF, ``Grammar.from_choices``, and ``sequence``/``union``
  of those: the front-end AST recorded on the grammar (``compose.to_ast``) is written
  rule by rule (literals, code-point classes, groups, alternations, repetitions,
  references);
* a grammar whose whole output is one lexeme (``Grammar.from_regex``, or any grammar
  whose start rule is a choice of single terminals, ε allowed, and that has no other
  rule and no ignored terminal): greedy lexing of the whole text accepts exactly the
  union of those terminals' languages, so each terminal's regex is written as GBNF
  through ``regex_ast.regex_to_ast``.

Everything else is refused with a `GrammarError` naming what GBNF cannot say: grammars
whose terminals are lexed greedily between other lexemes (Lark grammars, JSON Schema
grammars: a character-level grammar could split a lexeme where the lexer would not),
opaque regexes (KBNF ``#"..."``) inside a larger grammar, set operations (``&``, ``~``,
``except!``), lazy/stop/max_len terminals, regex features without a GBNF spelling
(anchors, look-around, back-references, ECMAScript-flavor patterns) and the empty
character class.

The text reads back with `Grammar.from_gbnf` (strict llama.cpp syntax: rule names of
letters, digits and ``-``; the start rule is ``root``).
"""

from __future__ import annotations

import re

from tether.errors import GrammarError, LimitError
from tether.grammar.ast import MAX_CP, Alt, Cls, Lit, Node, Ref, Rep, Rx, Seq, SetOp, Term
from tether.grammar.ir import NT, Grammar, Terminal
from tether.limits import current

_NAME_BAD = re.compile(r"[^A-Za-z0-9-]+")


def _char(cp: int, in_class: bool) -> str:
    c = chr(cp)
    if c == "\\" or c == '"' and not in_class or in_class and c in "]-^[":
        return "\\" + c
    if c == "\n":
        return "\\n"
    if c == "\r":
        return "\\r"
    if c == "\t":
        return "\\t"
    if 0x20 <= cp < 0x7F:
        return c
    if cp <= 0xFF:
        return f"\\x{cp:02X}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04X}"
    return f"\\U{cp:08X}"


def _literal(text: str) -> str:
    return '"' + "".join(_char(ord(c), False) for c in text) + '"'


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    if not ranges:
        raise GrammarError("the grammar holds an empty character class, which GBNF cannot write")
    if ranges == ((0, MAX_CP),):
        return "."  # any code point
    parts = []
    for lo, hi in ranges:
        parts.append(_char(lo, True) if lo == hi else f"{_char(lo, True)}-{_char(hi, True)}")
    return "[" + "".join(parts) + "]"


def _case_folded(text: str) -> Node:
    """A case-insensitive literal as a sequence of classes (each character and its cases)."""
    from tether.grammar.ast import seq
    from tether.regex.charset import casefold_set, normalize

    return seq([Cls(normalize(casefold_set(((ord(c), ord(c)),)))) for c in text])


class _Writer:
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.limit = current().max_nesting

    def expr(self, node: Node, depth: int = 0) -> str:
        """GBNF for ``node``; alternations come back unparenthesized (the caller wraps)."""
        if depth > self.limit:
            raise LimitError("max_nesting", depth, self.limit, "writing the grammar as GBNF")
        if isinstance(node, Lit):
            if node.ignore_case:
                return self.expr(_case_folded(node.text), depth + 1)
            return _literal(node.text)
        if isinstance(node, Cls):
            return _class(node.ranges)
        if isinstance(node, Ref):
            name = self.names.get(node.name)
            if name is None:
                raise GrammarError(f"the grammar refers to an undefined rule {node.name!r}")
            return name
        if isinstance(node, Seq):
            if not node.items:
                return '""'
            return " ".join(f"({self.expr(it, depth + 1)})" if isinstance(it, Alt) else self.expr(it, depth + 1)
                            for it in node.items)
        if isinstance(node, Alt):
            if not node.items:
                raise GrammarError("the grammar holds an empty alternation, which GBNF cannot write")
            return " | ".join(self.expr(it, depth + 1) for it in node.items)
        if isinstance(node, Rep):
            inner = self.atom(node.item, depth + 1)
            lo, hi = node.lo, node.hi
            if (lo, hi) == (0, None):
                return inner + "*"
            if (lo, hi) == (1, None):
                return inner + "+"
            if (lo, hi) == (0, 1):
                return inner + "?"
            if hi is None:
                return f"{inner}{{{lo},}}"
            return f"{inner}{{{lo}}}" if lo == hi else f"{inner}{{{lo},{hi}}}"
        if isinstance(node, Rx):
            raise GrammarError(f"the regex /{node.pattern[:60]}/ is a terminal lexed greedily inside a larger "
                               "grammar; GBNF has no lexer, so it cannot be written exactly")
        if isinstance(node, SetOp):
            raise GrammarError(f"the grammar uses a set operation ({node.op}), which GBNF cannot write")
        if isinstance(node, Term):
            raise GrammarError(f"the grammar holds a terminal lexed greedily ({_describe(node.terminal)}); "
                               "GBNF has no lexer, so it cannot be written exactly")
        raise GrammarError(f"cannot write {type(node).__name__} as GBNF")

    def atom(self, node: Node, depth: int) -> str:
        text = self.expr(node, depth)
        simple = isinstance(node, Ref | Cls) or isinstance(node, Lit) and not node.ignore_case
        return text if simple else f"({text})"


def _describe(t: object) -> str:
    return repr(getattr(t, "name", t))


def _rule_names(names: list[str], start: str) -> dict[str, str]:
    """GBNF names (letters, digits, ``-``) for tether rule names; ``start`` becomes ``root``."""
    out = {start: "root"}
    used = {"root"}
    for n in names:
        if n in out:
            continue
        base = _NAME_BAD.sub("-", n).strip("-") or "r"
        cand, i = base, 1
        while cand in used:
            i += 1
            cand = f"{base}-{i}"
        used.add(cand)
        out[n] = cand
    return out


def _terminal_node(t: Terminal) -> Node:
    """The character-level AST of a whole-output terminal (exact), or GrammarError."""
    from tether.grammar.regex_ast import regex_to_ast

    if t.lazy or t.stop is not None or t.max_len is not None:
        raise GrammarError(f"terminal {t.name!r} is lazy, has a stop text or a length bound: "
                           "GBNF cannot write those")
    if t.literal is not None:
        return Lit(t.literal, t.ignore_case)
    pattern = t.regex
    if t.expr is not None:
        # from_regex's nullable form: (pattern) ∩ non-empty, with ε beside it in the rule
        e = t.expr
        if not (len(e) == 3 and e[0] == "and" and isinstance(e[1], str) and e[2] == "[\\s\\S]+"):
            raise GrammarError(f"terminal {t.name!r} uses a set operation, which GBNF cannot write")
        pattern = e[1]
    assert pattern is not None
    node = regex_to_ast(pattern, flags="i" if t.ignore_case else "", flavor=t.flavor)
    if node is None:
        raise GrammarError(f"the regex {pattern[:80]!r} uses something GBNF cannot write (anchors, look-around, "
                           "back-references, a counted repetition above 64, or the ECMAScript flavor)")
    return node


def _whole_output_rules(g: Grammar) -> tuple[dict[str, Node], str] | None:
    """The start rule as one AST when the grammar's output is one lexeme, else None."""
    from tether.grammar.ast import EPS, alt

    if g.ignore or any(r.lhs != g.start for r in g.rules):
        return None
    items: list[Node] = []
    for r in g.rules:
        if not r.rhs:
            items.append(EPS)
        elif len(r.rhs) == 1 and not isinstance(r.rhs[0], NT):
            items.append(_terminal_node(g.terminals[r.rhs[0].name]))
        else:
            return None
    return {g.start: alt(items)}, g.start


def to_gbnf(g: Grammar) -> str:
    """``g`` as GBNF text with the same language (see the module docstring).

    Raises:
        GrammarError: ``g`` cannot be written exactly (names what GBNF cannot say).
        LimitError: the text would exceed ``Limits.max_text_chars``, or a node nests
            deeper than ``Limits.max_nesting``.
    """
    from tether.grammar.compose import to_ast

    rec = g.source_ast
    if isinstance(rec, tuple) and len(rec) == 3 and rec[2] == g.ir_signature():
        rules, start = to_ast(g)
        if g.ignore:
            raise GrammarError("the grammar ignores terminals between lexemes, which GBNF cannot write")
    else:
        whole = _whole_output_rules(g)
        if whole is None:
            raise GrammarError("only grammars read from GBNF or KBNF, choices and single regexes can be written as "
                               "GBNF: this grammar's terminals are lexed greedily (a Lark or JSON Schema grammar), "
                               "which a grammar without a lexer cannot say exactly")
        rules, start = whole
    if start not in rules:
        raise GrammarError(f"the grammar has no start rule {start!r}")
    names = _rule_names(list(rules), start)
    w = _Writer(names)
    lines = []
    maximum = current().max_text_chars
    size = 0
    for name in [start, *(n for n in rules if n != start)]:
        line = f"{names[name]} ::= {w.expr(rules[name])}"
        size += len(line) + 1
        if size > maximum:
            raise LimitError("max_text_chars", size, maximum, "the grammar written as GBNF")
        lines.append(line)
    return "\n".join(lines) + "\n"


__all__ = ["to_gbnf"]
