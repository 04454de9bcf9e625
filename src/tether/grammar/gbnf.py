"""GBNF, llama.cpp's grammar format: read the text, lower it, simplify.

1. ``parse_gbnf`` reads ``name ::= alternatives`` rules (a rule ends at a newline outside
   parentheses; ``|`` and ``::=`` may be followed by a newline), string literals with
   ``\\x`` ``\\u`` ``\\U`` ``\\t`` ``\\n`` ``\\r`` escapes, character classes (``[^...]``,
   ranges, escapes), ``.`` (any character), groups, ``* + ? {m} {m,} {m,n}`` and
   ``#`` comments, into the shared AST.
2. ``lower(..., mode="char")`` turns it into the IR keeping llama.cpp's character-level
   language (see ``tether.grammar.lower`` for the terminal policy).
3. ``simplify`` validates and cleans up. The start rule is ``root``.

``strict=True`` also rejects what llama.cpp rejects but tether can handle: ``_`` in rule
names, ``{,n}``, left recursion, and xgrammar's ``Regex("...")`` (one ECMAScript regex
terminal, matched greedily like any regex terminal).
"""

from __future__ import annotations

from tether.errors import GrammarError
from tether.grammar import bounds
from tether.grammar.analysis import Facts
from tether.grammar.ast import (
    MAX_CP,
    Cls,
    Lit,
    Node,
    Ref,
    Rep,
    alt,
    complement,
    normalize,
    refs,
    seq,
)
from tether.grammar.ir import Grammar
from tether.grammar.lower import lower
from tether.grammar.simplify import did_you_mean, simplify

_DIGITS = frozenset("0123456789")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^"}


class _Reader:
    def __init__(self, text: str, source: str, strict: bool) -> None:
        self.text, self.source, self.strict = text, source, strict
        self.pos = 0
        self.depth = bounds.Depth(text, source)
        self.rules: dict[str, Node] = {}
        self.positions: dict[str, int] = {}

    def error(self, msg: str, pos: int | None = None) -> GrammarError:
        return GrammarError(msg, self.text, self.pos if pos is None else pos, self.source)

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def space(self, newline_ok: bool) -> None:
        t = self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c in " \t" or (newline_ok and c in "\r\n"):
                self.pos += 1
            elif c == "#":
                while self.pos < len(t) and t[self.pos] not in "\r\n":
                    self.pos += 1
            else:
                break

    def is_word(self, c: str) -> bool:
        return c != "" and (c.isascii() and c.isalnum() or c == "-" or (c == "_" and not self.strict))

    def name(self) -> str:
        start = self.pos
        while self.is_word(self.peek()):
            self.pos += 1
        if self.pos == start:
            raise self.error("expected a rule name")
        return self.text[start : self.pos]

    def char(self, closing: str) -> int:
        """One (possibly escaped) character inside a literal or class."""
        if self.pos >= len(self.text):
            raise self.error(f"unexpected end of grammar: missing closing '{closing}'")
        c = self.text[self.pos]
        if c != "\\":
            self.pos += 1
            return ord(c)
        start = self.pos
        e = self.peek(1)
        self.pos += 2
        if e in "xuU" and e:
            n = {"x": 2, "u": 4, "U": 8}[e]
            digits = self.text[self.pos : self.pos + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"expected {n} hex digits after '\\{e}'", start)
            self.pos += n
            return ord(bounds.code_point(digits, self.text, start, self.source))
        if e in _ESCAPES and e:
            return ord(_ESCAPES[e])
        raise self.error(f"unknown escape '\\{e}'", start)

    def literal(self) -> Node:
        start = self.pos
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(self.text) or self.text[self.pos] in "\r\n":
                raise self.error("unterminated string literal: missing closing '\"'", start)
            if self.text[self.pos] == '"':
                self.pos += 1
                break
            out.append(chr(self.char('"')))
        return Lit("".join(out), pos=start) if out else seq([])

    def char_class(self) -> Node:
        start = self.pos
        self.pos += 1
        neg = self.peek() == "^"
        if neg:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if self.pos >= len(self.text):
                raise self.error("unterminated character class: missing closing ']'", start)
            if self.text[self.pos] == "]":
                self.pos += 1
                break
            lo = self.char("]")
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                p = self.pos
                hi = self.char("]")
                if hi < lo:
                    raise self.error("character range is out of order", p)
            ranges.append((lo, hi))
        rs = normalize(ranges)
        if neg:
            return Cls(complement(rs), negated_view=rs, pos=start)
        if not rs:
            raise self.error("empty character class matches nothing", start)
        return Cls(rs, pos=start)

    def regex_call(self, start: int) -> Node:
        """xgrammar's ``Regex("pattern")``: one ECMAScript-flavor regex terminal."""
        from tether.grammar.ast import Rx
        from tether.grammar.lark.regex_checks import check_regex

        self.pos += 1
        self.space(True)
        if self.peek() != '"':
            raise self.error("expected a string after 'Regex('")
        lit_pos = self.pos
        lit = self.literal()
        pattern = lit.text if isinstance(lit, Lit) else ""
        self.space(True)
        if self.peek() != ")":
            raise self.error("Regex(...) options are not supported; expected ')'")
        self.pos += 1
        check_regex(pattern, "", self.text, lit_pos, self.source, flavor="ecma")
        return Rx(pattern, flavor="ecma", pos=start)

    def integer(self) -> int:
        start = self.pos
        while self.peek() in _DIGITS:
            self.pos += 1
        if start == self.pos:
            raise self.error("expected an integer")
        return bounds.count(self.text[start : self.pos], self.text, start, self.source)

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        start = self.pos
        while self.pos < len(self.text):
            c = self.peek()
            p = self.pos
            if c == '"':
                items.append(self.literal())
            elif c == "[":
                items.append(self.char_class())
            elif self.is_word(c):
                name = self.name()
                if name == "Regex" and self.peek() == "(" and not self.strict:
                    items.append(self.regex_call(p))
                else:
                    items.append(Ref(name, pos=p))
            elif c == "(":
                self.depth.enter(p)
                self.pos += 1
                self.space(True)
                inner = self.alternates(True)
                if self.peek() != ")":
                    raise self.error("expected ')' to close the group opened", p)
                self.pos += 1
                self.depth.leave()
                items.append(inner)
            elif c == ".":
                self.pos += 1
                items.append(Cls(((0, MAX_CP),), pos=p))
            elif c in "*+?{":
                if not items:
                    raise self.error(f"'{c}' has no preceding item to repeat")
                last = items.pop()
                self.pos += 1
                if c == "*":
                    lo, hi = 0, None
                elif c == "+":
                    lo, hi = 1, None
                elif c == "?":
                    lo, hi = 0, 1
                else:
                    self.space(nested)
                    if self.peek() == "," and not self.strict:
                        lo = 0
                    else:
                        lo = self.integer()
                    self.space(nested)
                    hi = lo
                    if self.peek() == ",":
                        self.pos += 1
                        self.space(nested)
                        hi = self.integer() if self.peek() in _DIGITS else None
                        self.space(nested)
                    if self.peek() != "}":
                        raise self.error("expected '}' to close the repetition")
                    self.pos += 1
                    if hi is not None and hi < lo:
                        raise self.error(f"repetition maximum {hi} is smaller than its minimum {lo}", p)
                items.append(Rep(last, lo, hi, pos=p))
            else:
                break
            self.space(nested)
        return seq(items, start)

    def alternates(self, nested: bool) -> Node:
        start = self.pos
        alts = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.space(True)
            alts.append(self.sequence(nested))
        return alt(alts, start)

    def grammar(self) -> None:
        self.space(True)
        while self.pos < len(self.text):
            start = self.pos
            name = self.name()
            self.space(False)
            if not self.text.startswith("::=", self.pos):
                raise self.error(f"expected '::=' after rule name '{name}'")
            self.pos += 3
            self.space(True)
            body = self.alternates(False)
            if self.pos < len(self.text) and self.peek() not in "\r\n":
                raise self.error(f"unexpected {self.peek()!r}: expected a newline or the end of the rule")
            if name in self.rules:
                line = self.text.count("\n", 0, self.positions[name]) + 1
                raise self.error(f"rule '{name}' is defined twice (first at line {line})", start)
            self.rules[name] = body
            self.positions[name] = start
            self.space(True)


def parse_gbnf(text: str, *, source: str = "", strict: bool = False) -> tuple[dict[str, Node], dict[str, int]]:
    """Read GBNF ``text`` into (rule name → AST, rule name → offset).

    Raises:
        GrammarError: on a syntax error (line:column and caret).
    """
    bounds.check_text(text, source)
    r = _Reader(text, source, strict)
    r.grammar()
    bounds.check_rules(r.rules, text, source, r.positions)
    return r.rules, r.positions


def _check_refs(rules: dict[str, Node], text: str, source: str) -> None:
    for body in rules.values():
        for ref in sorted(refs(body), key=lambda r: r.pos):
            if ref.name not in rules:
                raise GrammarError(
                    f"rule '{ref.name}' is used but not defined" + did_you_mean(ref.name, set(rules)),
                    text, ref.pos, source,
                )


def _check_left_recursion(rules: dict[str, Node], positions: dict[str, int], text: str, source: str) -> None:
    facts = Facts(rules, lambda r: rules[r.name])

    def leftmost(node: Node) -> list[str]:
        from tether.grammar.ast import Alt, Seq

        if isinstance(node, Ref):
            return [node.name]
        if isinstance(node, Seq):
            out: list[str] = []
            for it in node.items:
                out += leftmost(it)
                if not facts.nullable(it):
                    break
            return out
        if isinstance(node, Alt):
            return [n for it in node.items for n in leftmost(it)]
        if isinstance(node, Rep):
            return leftmost(node.item)
        return []

    graph = {n: leftmost(b) for n, b in rules.items()}
    for name in rules:
        stack, seen = list(graph[name]), set()
        while stack:
            m = stack.pop()
            if m == name:
                raise GrammarError(
                    f"rule '{name}' is left-recursive (llama.cpp rejects this; "
                    "use strict=False to allow it)", text, positions[name], source,
                )
            if m not in seen and m in graph:
                seen.add(m)
                stack.extend(graph[m])


def ast_reachable(rules: dict[str, Node], start: str) -> set[str]:
    """Rule names reachable from ``start`` in the front-end AST."""
    seen, stack = {start}, [start]
    while stack:
        for r in refs(rules[stack.pop()]):
            if r.name in rules and r.name not in seen:
                seen.add(r.name)
                stack.append(r.name)
    return seen


def from_gbnf(text: str, *, start: str = "root", source: str = "", strict: bool = False) -> Grammar:
    """Build a Grammar from GBNF ``text`` (see the module docstring).

    Raises:
        GrammarError: syntax errors, undefined or missing rules, rules that never finish,
            and (``strict``) what llama.cpp refuses.
    """
    rules, positions = parse_gbnf(text, source=source, strict=strict)
    if not rules:
        raise GrammarError("the grammar has no rules")
    if start not in rules:
        raise GrammarError(
            f"the grammar has no '{start}' rule (the start rule)" + did_you_mean(start, set(rules))
        )
    _check_refs(rules, text, source)
    if strict:
        _check_left_recursion(rules, positions, text, source)
    from tether.grammar.compose import attach_ast

    g = lower(rules, start, mode="char", text=text, source=source)
    g = simplify(
        g, text=text, source=source, positions=positions,
        warn_unreachable=set(rules) - ast_reachable(rules, start),
    )
    return attach_ast(g, rules, start)
