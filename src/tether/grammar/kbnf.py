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

Lowering uses the greedy-safe ``char`` policy of GBNF (``tether.grammar.lower``):
literals, groups and repetitions become terminals only where greedy lexing keeps the
language. ``except!`` of literals becomes exact character-level rules (the states of the
"no excluded string yet" automaton); ``except!`` of a regex and ``#ex`` become
set-operation terminals (``Terminal.expr``, built by the regex layer's complement and
intersection). Regex terminals (``#"..."``) are lexed greedily, like Lark's: KBNF's
byte-level Earley parser would also try their shorter matches, which a lexer cannot.
"""

from __future__ import annotations

import re

from tether.errors import GrammarError, LimitError
from tether.grammar import bounds
from tether.grammar.ast import Gen, Node, Ref, Rep, Rx, SetOp, alt, refs, seq
from tether.grammar.gbnf import ast_reachable
from tether.grammar.ir import Grammar
from tether.grammar.lark.regex_checks import check_regex
from tether.grammar.lower import Lowering
from tether.grammar.simplify import did_you_mean, simplify
from tether.limits import current

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
        self.nesting = bounds.Depth(text, source)
        self.rules: dict[str, Node] = {}
        self.positions: dict[str, int] = {}
        self.order: list[str] = []
        self._more: dict[str, list[Node]] = {}  # further definitions of a rule

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
                self._more.setdefault(name, [self.rules[name]]).append(body)
            else:
                self.rules[name] = body
                self.positions[name] = pos
                self.order.append(name)
        for name, bodies in self._more.items():  # several definitions are alternatives
            self.rules[name] = alt(bodies)

    def alternation(self) -> Node:
        return bounds.run(self._alternation())  # type: ignore[no-any-return]

    def _alternation(self) -> Gen:
        start = self.peek()[2]
        alts = [(yield self._sequence())]
        while self.peek()[1] == "|":
            self.next()
            alts.append((yield self._sequence()))
        return alt(alts, start)

    def _sequence(self) -> Gen:
        start = self.peek()[2]
        items: list[Node] = []
        while self.peek()[1] not in ("|", ")", "]", "}", ";", ",", "") or self.peek()[0] in ("string", "regex"):
            if self.peek()[0] == "eof":
                break
            items.append((yield self._postfix()))
        return seq(items, start)

    def _postfix(self) -> Gen:
        node: Node = yield self._atom()
        while self.peek()[1] in ("?", "*", "+") and self.peek()[0] == "op":
            _, op, pos = self.next()
            lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[op]
            node = Rep(node, lo, hi, pos=pos)
        return node

    def _atom(self) -> Gen:
        from tether.grammar.ast import Lit

        k, v, pos = self.next()
        if k == "op" and v in ("(", "[", "{") or k == "except":
            self.nesting.enter(pos)
            node: Node = yield self._group(k, v, pos)
            self.nesting.leave()
            return node
        if k == "string":
            return Lit(bounds.unescape(v[1:-1], self.text, pos + 1, self.source, _ESC), pos=pos)
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
        raise self.error(f"expected an expression, got {v or 'end of grammar'!r}", pos)

    def _group(self, k: str, v: str, pos: int) -> Gen:
        if k == "except":
            self.expect("(", "'(' after except!")
            inner = yield self._alternation()
            n = None
            if self.peek()[1] == ",":
                self.next()
                t = self.next()
                if t[0] != "number":
                    raise self.error("expected a number after ',' in except!", t[2])
                n = bounds.count(t[1], self.text, t[2], self.source)
            self.expect(")", "')' to close except!(")
            return SetOp("except", (inner,), max_reps=n, pos=pos)
        if v == "(":
            grouped: Node = yield self._alternation()
            self.expect(")", "')' to close the group")
            return grouped
        if v == "[":
            inner = yield self._alternation()
            self.expect("]", "']' to close the option")
            return Rep(inner, 0, 1, pos=pos)
        if v == "{":
            inner = yield self._alternation()
            self.expect("}", "'}' to close the repetition")
            return Rep(inner, 0, None, pos=pos)
        raise self.error(f"expected an expression, got {v or 'end of grammar'!r}", pos)


def from_kbnf(text: str, *, start: str | None = None, source: str = "") -> Grammar:
    """Build a Grammar from KBNF-style EBNF ``text`` (see the module docstring).

    Raises:
        GrammarError: syntax errors, undefined rules, non-regular ``except!`` operands,
            rules that never finish.
        LimitError: past the active `tether.limits.Limits` (text, rules, nesting, counts).
    """
    bounds.check_text(text, source)
    p = _Parser(text, source)
    p.parse()
    bounds.check_rules(p.rules, text, source, p.positions)
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
    rules = _lower_literal_excepts(p.rules)
    lw = Lowering(rules, start, mode="char", text=text, source=source)
    from tether.grammar.compose import attach_ast

    g = lw.run(p.order + [n for n in rules if n not in p.rules])
    g = simplify(g, text=text, source=source, positions=p.positions,
                 warn_unreachable=set(p.rules) - ast_reachable(p.rules, start))
    return attach_ast(g, rules, start)


def _literals(node: Node, rules: dict[str, Node]) -> list[str] | None:
    """The strings of ``node`` if it is a literal or an alternation of literals."""
    from tether.grammar.ast import Alt, Lit

    out: list[str] = []
    stack, seen = [node], 0
    while stack:
        n = stack.pop()
        seen += 1
        if seen > 100_000:  # a reference cycle or a huge operand: not a literal list
            return None
        if isinstance(n, Ref):
            stack.append(rules[n.name])
        elif isinstance(n, Lit) and n.text and not n.ignore_case:
            out.append(n.text)
        elif isinstance(n, Alt):
            stack.extend(reversed(n.items))
        else:
            return None
    return out


def _lower_literal_excepts(rules: dict[str, Node]) -> dict[str, Node]:
    """Replace ``except!(literals)`` by right-linear rules over single characters.

    Each rule is a state of the automaton of "no pattern occurs" (the partial matches in
    progress), so the text up to the excluded string is recognized exactly, character by
    character, with no lexing choice (a greedy terminal would swallow the start of the
    string that follows it). ``except!`` of a regex stays a set-operation terminal.
    """
    from tether.grammar.ast import EPS, Alt, Cls, Seq, complement, normalize

    out = dict(rules)
    made: dict[tuple[tuple[str, ...], int | None], str] = {}

    def build(pats: list[str], limit: int | None) -> str | None:
        key = (tuple(sorted(set(pats))), limit)
        if key in made:
            return made[key]
        if sum(map(len, key[0])) > 2000:  # too many states to spell as rules: a set operation
            return None
        chars = sorted({c for p in pats for c in p})
        prefixes = {p[:i] for p in pats for i in range(1, len(p))}

        def step(st: frozenset[str], c: str) -> frozenset[str] | None:
            nxt = {q + c for q in (*st, "")}
            if any(x.endswith(p) for x in nxt for p in pats):
                return None  # an excluded string would occur
            return frozenset(x for x in nxt if x in prefixes)

        states: dict[frozenset[str], int] = {frozenset(): 0}
        rows: dict[int, dict[str, frozenset[str] | None]] = {}
        todo = [frozenset[str]()]
        while todo:
            st = todo.pop()
            rows[states[st]] = row = {c: step(st, c) for c in chars}
            for ns in row.values():
                if ns is not None and ns not in states:
                    states[ns] = len(states)
                    todo.append(ns)
        n_states = len(states)
        if limit is not None and n_states * (limit + 1) > 5000:
            return None
        base = f"except{len(made) + 1}"
        other = Cls(complement(normalize([(ord(c), ord(c)) for c in chars])))
        layers = [None] if limit is None else list(range(limit, -1, -1))

        def name(i: int, k: int | None) -> str:
            return f"{base}_s{i}" if k is None else f"{base}_s{i}_n{k}"

        for k in layers:
            nk = None if k is None else k - 1
            for i in states.values():
                alts: list[Node] = [EPS]
                if k is None or k > 0:
                    by_target: dict[int, list[str]] = {}
                    for c, ns in rows[i].items():
                        if ns is not None:
                            by_target.setdefault(states[ns], []).append(c)
                    by_target.setdefault(0, [])
                    for tgt, cs in sorted(by_target.items()):
                        rs = normalize([(ord(c), ord(c)) for c in cs])
                        if tgt == 0:
                            rs = normalize(list(rs) + list(other.ranges))
                        if rs:
                            alts.append(Seq((Cls(rs), Ref(name(tgt, nk)))))
                out[name(i, k)] = Alt(tuple(alts)) if len(alts) > 1 else alts[0]
        made[key] = name(0, layers[0])
        return made[key]

    def rewrite(n: Node) -> Node:
        if isinstance(n, Rx) and not n.lazy:  # a simple regex joins the lowering analysis
            from tether.grammar.regex_ast import regex_to_ast

            got = regex_to_ast(n.pattern, flags=n.flags, flavor=n.flavor)
            return got if got is not None else n
        if isinstance(n, SetOp) and n.op == "except":
            pats = _literals(n.args[0], rules)
            if pats:
                r = build(pats, n.max_reps)
                if r is not None:
                    return Ref(r, pos=n.pos)
            return n
        if isinstance(n, Seq | Alt):
            return type(n)(tuple(rewrite(i) for i in n.items), pos=n.pos)
        if isinstance(n, Rep):
            return Rep(rewrite(n.item), n.lo, n.hi, pos=n.pos)
        return n

    for k, v in rules.items():
        out[k] = rewrite(v)
    return out


def _check_regular_operands(p: _Parser, text: str, source: str) -> None:
    """Every rule used inside ``except!``/``#ex`` must be non-recursive (so it is regular).

    A rule is regular when no rule it reaches is on a cycle: exactly the rules
    ``bounds.inlined_sizes`` can order children first (computed once, without recursion)."""
    acyclic = bounds.inlined_sizes(p.rules)

    def regular(name: str, path: tuple[str, ...]) -> bool:
        return name in acyclic

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
            # the operand is spelled as one regex with its rules inlined: bound that
            lim = current()
            depth, size = bounds.node_size(n, {k: v[1] for k, v in acyclic.items()})
            depth += max((acyclic[r.name][0] for r in refs(n)), default=0)
            if depth > lim.max_nesting:
                raise LimitError("max_nesting", depth, lim.max_nesting, bounds.place(text, n.pos, source),
                                 detail="except! operand with its rules inlined")
            if size > lim.max_expanded:
                raise LimitError("max_expanded", size, lim.max_expanded, bounds.place(text, n.pos, source),
                                 detail="except! operand with its rules inlined")
            continue
        if hasattr(n, "items"):
            stack.extend(n.items)
        elif isinstance(n, Rep):
            stack.append(n.item)
