"""KBNF-style EBNF (seed 002) → Grammar IR.

Syntax: ``name ::= expression ;`` with ``|`` alternation, juxtaposition for sequence,
``'...'`` / ``"..."`` literals (``\\n \\t \\r \\\\ \\' \\" \\xNN \\uNNNN`` escapes),
``#"regex"`` regex terminals, ``#e"regex"`` (ends at the first match: a lazy terminal),
``#ex"regex"`` (any text that does not match: the complement), groups ``( )``,
options ``[ ]`` or ``?``, repetitions ``{ }`` or ``*``, ``+``, comments ``(* ... *)``,
and ``except!(X)`` / ``except!(X, n)``: any text that does not contain a match of ``X``
(at most ``n`` characters). ``X`` must be regular (a literal, a regex, or a rule that only
uses those, without recursion); otherwise GrammarError. Several definitions of one rule
are alternatives (seed 002 groups them). The start rule is ``start`` if defined, else the
first rule.

Lowering uses the ``lexeme`` policy: each literal and regex is one terminal, matched
greedily; ``except!``, ``#ex`` become set-operation terminals (``Terminal.expr``) built by
the regex layer's complement and intersection.
"""

from __future__ import annotations

import re

from tether.errors import GrammarError
from tether.grammar.ast import Node, Ref, Rep, Rx, SetOp, alt, refs, seq
from tether.grammar.gbnf import ast_reachable
from tether.grammar.ir import Grammar
from tether.grammar.lark import check_regex
from tether.grammar.lower import Lowering
from tether.grammar.simplify import did_you_mean, simplify

_TOKEN = re.compile(
    r"""
 (?P<ws>\s+)
|(?P<comment>\(\*(?:.|\n)*?\*\))
|(?P<regex>\#(?:ex|e)?(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'))
|(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
|(?P<except>except!)
|(?P<name>[A-Za-z_][A-Za-z0-9_]*)
|(?P<number>[0-9]+)
|(?P<op>::=|[|()\[\]{}?*+;,])
""",
    re.VERBOSE,
)

_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


def _unescape(s: str, text: str, pos: int, source: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = s[i + 1] if i + 1 < len(s) else ""
        if e in ("x", "u", "U"):
            n = {"x": 2, "u": 4, "U": 8}[e]
            d = s[i + 2 : i + 2 + n]
            if len(d) != n or any(ch not in "0123456789abcdefABCDEF" for ch in d):
                raise GrammarError(f"invalid escape '\\{e}{d}'", text, pos + i, source)
            out.append(chr(int(d, 16)))
            i += 2 + n
        elif e in _ESC:
            out.append(_ESC[e])
            i += 2
        else:
            raise GrammarError(f"unknown escape '\\{e}'", text, pos + i, source)
    return "".join(out)


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.toks: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if text.startswith("(*", pos) and (m is None or m.lastgroup != "comment"):
                raise GrammarError("unterminated comment: missing '*)'", text, pos, source)
            if m is None:
                c = text[pos]
                what = "unterminated comment" if text.startswith("(*", pos) else (
                    "unterminated string" if c in "'\"#" else f"unexpected character {c!r}")
                raise GrammarError(what, text, pos, source)
            if m.lastgroup not in ("ws", "comment"):
                self.toks.append((m.lastgroup or "", m.group(), pos))
            pos = m.end()
        self.toks.append(("eof", "", len(text)))
        self.i = 0
        self.rules: dict[str, Node] = {}
        self.positions: dict[str, int] = {}
        self.order: list[str] = []

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i]

    def next(self) -> tuple[str, str, int]:
        t = self.toks[self.i]
        if t[0] != "eof":
            self.i += 1
        return t

    def error(self, msg: str, pos: int) -> GrammarError:
        return GrammarError(msg, self.text, pos, self.source)

    def expect(self, v: str, what: str) -> None:
        t = self.next()
        if t[1] != v or t[0] != "op":
            raise self.error(f"expected {what}, got {t[1] or 'end of grammar'!r}", t[2])

    def parse(self) -> None:
        while self.peek()[0] != "eof":
            k, name, pos = self.next()
            if k != "name":
                raise self.error(f"expected a rule name, got {name!r}", pos)
            self.expect("::=", f"'::=' after '{name}'")
            body = self.alternation()
            self.expect(";", f"';' to end the rule '{name}'")
            if name in self.rules:
                self.rules[name] = alt([self.rules[name], body])
            else:
                self.rules[name] = body
                self.positions[name] = pos
                self.order.append(name)

    def alternation(self) -> Node:
        start = self.peek()[2]
        alts = [self.sequence()]
        while self.peek()[1] == "|":
            self.next()
            alts.append(self.sequence())
        return alt(alts, start)

    def sequence(self) -> Node:
        start = self.peek()[2]
        items: list[Node] = []
        while self.peek()[1] not in ("|", ")", "]", "}", ";", ",", "") or self.peek()[0] in ("string", "regex"):
            if self.peek()[0] == "eof":
                break
            items.append(self.postfix())
        return seq(items, start)

    def postfix(self) -> Node:
        node = self.atom()
        while self.peek()[1] in ("?", "*", "+") and self.peek()[0] == "op":
            _, op, pos = self.next()
            lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[op]
            node = Rep(node, lo, hi, pos=pos)
        return node

    def atom(self) -> Node:
        from tether.grammar.ast import Lit

        k, v, pos = self.next()
        if k == "string":
            return Lit(_unescape(v[1:-1], self.text, pos + 1, self.source), pos=pos)
        if k == "regex":
            kind = v[1 : v.index(v[-1])]
            body = v[len(kind) + 2 : -1]
            pattern = body.replace('\\"', '"') if v[-1] == '"' else body.replace("\\'", "'")
            check_regex(pattern, "", self.text, pos + len(kind) + 1, self.source)
            if kind == "ex":
                return SetOp("not", (Rx(pattern, pos=pos),), pos=pos)
            return Rx(pattern, lazy=kind == "e", pos=pos)
        if k == "name":
            return Ref(v, pos=pos)
        if k == "except":
            self.expect("(", "'(' after except!")
            inner = self.alternation()
            n = None
            if self.peek()[1] == ",":
                self.next()
                t = self.next()
                if t[0] != "number":
                    raise self.error("expected a number after ',' in except!", t[2])
                n = int(t[1])
            self.expect(")", "')' to close except!(")
            return SetOp("except", (inner,), max_reps=n, pos=pos)
        if v == "(":
            inner = self.alternation()
            self.expect(")", "')' to close the group")
            return inner
        if v == "[":
            inner = self.alternation()
            self.expect("]", "']' to close the option")
            return Rep(inner, 0, 1, pos=pos)
        if v == "{":
            inner = self.alternation()
            self.expect("}", "'}' to close the repetition")
            return Rep(inner, 0, None, pos=pos)
        raise self.error(f"expected an expression, got {v or 'end of grammar'!r}", pos)


def from_kbnf(text: str, *, start: str | None = None, source: str = "") -> Grammar:
    """Build a Grammar from KBNF-style EBNF ``text`` (see the module docstring).

    Raises:
        GrammarError: syntax errors, undefined rules, non-regular ``except!`` operands,
            rules that never finish.
    """
    p = _Parser(text, source)
    p.parse()
    if not p.rules:
        raise GrammarError("the grammar has no rules")
    if start is None:
        start = "start" if "start" in p.rules else p.order[0]
    if start not in p.rules:
        raise GrammarError(f"the start rule '{start}' is not defined" + did_you_mean(start, set(p.rules)))
    for body in p.rules.values():
        for r in sorted(refs(body), key=lambda r: r.pos):
            if r.name not in p.rules:
                raise GrammarError(f"rule '{r.name}' is used but not defined" + did_you_mean(r.name, set(p.rules)),
                                   text, r.pos, source)
    _check_regular_operands(p, text, source)
    lw = Lowering(p.rules, start, mode="lexeme", text=text, source=source)
    g = lw.run(p.order)
    return simplify(g, text=text, source=source, positions=p.positions,
                    warn_unreachable=set(p.rules) - ast_reachable(p.rules, start))


def _check_regular_operands(p: _Parser, text: str, source: str) -> None:
    """Every rule used inside ``except!``/``#ex`` must be non-recursive (so it is regular)."""

    def regular(name: str, path: tuple[str, ...]) -> bool:
        if name in path:
            return False
        return all(regular(r.name, (*path, name)) for r in refs(p.rules[name]))

    stack: list[Node] = list(p.rules.values())
    while stack:
        n = stack.pop()
        if isinstance(n, SetOp):
            for r in refs(n):
                if not regular(r.name, ()):
                    raise GrammarError(
                        f"except! needs a regular operand, but rule '{r.name}' is recursive",
                        text, r.pos, source,
                    )
            continue
        if hasattr(n, "items"):
            stack.extend(n.items)  # type: ignore[attr-defined]
        elif isinstance(n, Rep):
            stack.append(n.item)
