"""The Lark reader: definitions (``rule: ...``, ``?rule``, ``!rule``, ``_rule``,
``TERMINAL: ...``, priorities ``.n``, llguidance attributes ``rule[stop="..."]``,
templates ``name{a, b}: ...``), alternatives (``|``, also on a new line), ``->``
aliases, groups, ``[optional]``, ``* + ?``, ``~ n``, ``~ n..m``, ``{n,m}``, ``"a".."z"``
ranges, llguidance's ``&`` / prefix ``~`` on terminals, and the directives
(``%import common``, ``%ignore``, ``%json``, ``%regex``, ``%lark``, ``%llguidance``),
into the shared AST. Expressions are generators driven by ``bounds.run``: nesting
costs heap, not interpreter stack.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from contextvars import ContextVar

from tether.errors import GrammarError, LimitError
from tether.grammar import bounds
from tether.grammar.ast import EPS, Alt, Cls, Gen, Lit, Node, Ref, Rep, Rx, Seq, SetOp, alt, seq
from tether.grammar.ir import Grammar
from tether.grammar.lark.lookahead import without_lookaheads
from tether.grammar.lark.regex_checks import check_regex, lookaround_offsets
from tether.grammar.lark.templates import Template, Usage
from tether.grammar.lark.tokens import Tok, tokenize, unescape
from tether.grammar.simplify import did_you_mean

_ATTRS = {"stop", "max_tokens", "lazy", "capture", "temperature", "suffix", "stop_capture"}
_INDENTER = {"_INDENT", "_DEDENT"}  # the terminals Lark's Indenter post-lexer declares
_LLG_OPTIONS = {"no_forcing", "allow_invalid_utf8", "allow_initial_skip", "ignore_once"}


class LarkReader:
    """Reads Lark text into rule and terminal ASTs, directives, attributes and template
    uses (expanded afterwards by ``templates.expand_templates``). ``read_nested`` builds
    the grammar of an embedded ``%lark { ... }`` block (None: refused)."""

    def __init__(self, text: str, source: str, read_nested: Callable[[str], Grammar] | None = None) -> None:
        self.text, self.source = text, source
        self.read_nested = read_nested
        self.toks = tokenize(text, source)
        self.i = 0
        self.depth = 0
        self.nesting = bounds.Depth(text, source)
        self.rules: dict[str, Node] = {}
        self.terms: dict[str, Node] = {}
        self.positions: dict[str, int] = {}
        self.attrs: dict[str, dict[str, object]] = {}
        self.ignore: list[Node] = []
        self.imports: dict[str, tuple[str, int]] = {}  # local name → (common name, pos)
        self.warnings: list[str] = []
        self.embedded: dict[str, Grammar] = {}
        self.templates: dict[str, Template] = {}
        self.in_terminal = False  # reading a terminal definition's body
        self.looks: list[tuple[int, str, str]] = []  # (offset, pattern, flags): regexes in terminals with look-around
        self.usages: dict[str, Usage] = {}  # placeholder name → a template use, resolved later

    # -- token helpers
    def peek(self, k: int = 0) -> Tok:
        j = self.i
        n = 0
        while True:
            t = self.toks[j]
            if t.kind == "nl" and self.depth > 0:
                j += 1
                continue
            if n == k:
                return t
            n += 1
            j += 1

    def next(self) -> Tok:
        while self.toks[self.i].kind == "nl" and self.depth > 0:
            self.i += 1
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, msg: str, pos: int) -> GrammarError:
        return GrammarError(msg, self.text, pos, self.source)

    def expect(self, value: str, what: str) -> Tok:
        t = self.next()
        if t.value != value or t.kind not in ("op",):
            shown = t.value if t.kind != "eof" else "end of grammar"
            shown = "newline" if t.kind == "nl" else shown
            raise self.error(f"expected {what}, got {shown!r}", t.pos)
        return t

    def skip_nl(self) -> None:
        while self.toks[self.i].kind == "nl":
            self.i += 1

    # -- grammar
    def parse(self) -> None:
        self.skip_nl()
        while self.peek().kind != "eof":
            t = self.peek()
            if t.kind == "directive":
                self.directive()
            elif t.kind == "name" or (t.kind == "op" and t.value in "?!"):
                self.definition()
            else:
                raise self.error(f"expected a rule or terminal definition, got {t.value!r}", t.pos)
            t = self.next()
            if t.kind not in ("nl", "eof"):
                raise self.error(f"unexpected {t.value!r}: expected the end of the definition", t.pos)
            self.skip_nl()

    def definition(self) -> None:
        t = self.next()
        start = t.pos
        if t.kind == "op":  # ?rule / !rule
            t = self.next()
            if t.kind != "name":
                raise self.error("expected a rule name", t.pos)
        name = t.value
        is_term = name.lstrip("_")[:1].isupper()
        p = self.peek()
        if p.value == "::":
            raise self.error(f"parametric rules ('{name}::...') are not supported", p.pos)
        params: tuple[str, ...] | None = None
        if p.value == "{":
            if is_term:
                raise self.error(f"terminal templates ('{name}{{...}}') are not supported: only rules "
                                 "take parameters", p.pos)
            params = self.template_params(name)
        attrs: dict[str, object] = {}
        if p.value == "[":
            attrs = self.attributes(name)
        if self.peek().value == ".":
            self.next()
            num = self.next()
            if num.kind != "number":
                raise self.error("expected a priority number after '.'", num.pos)
            msg = f"priority of '{name}' is ignored (tether's lexer has no priorities)"
            self.warnings.append(msg)
            warnings.warn(msg, stacklevel=4)
        self.expect(":", f"':' after '{name}'")
        self.in_terminal = is_term
        try:
            body = self.expansions()
        finally:
            self.in_terminal = False
        if params is not None:
            if name in self.templates or name in self.rules:
                raise self.error(f"duplicate rule '{name}'", start)
            self.templates[name] = Template(params, body, start)
            self.positions[name] = start
            return
        table = self.terms if is_term else self.rules
        if name in table or name in self.imports or name in self.templates:
            kind = "terminal" if is_term else "rule"
            raise self.error(f"duplicate {kind} '{name}'", start)
        table[name] = body
        self.positions[name] = start
        if attrs:
            self.attrs[name] = attrs

    def template_params(self, name: str) -> tuple[str, ...]:
        """``{a, b}`` after a rule name: the template's parameters (rule names)."""
        self.next()  # {
        self.depth += 1
        params: list[str] = []
        while True:
            t = self.next()
            if t.kind != "name" or t.value[:1].isupper() or t.value.lstrip("_")[:1].isupper():
                raise self.error(f"expected a parameter name (a rule name) in template '{name}'", t.pos)
            if t.value in params:
                raise self.error(f"duplicate parameter '{t.value}' in template '{name}'", t.pos)
            params.append(t.value)
            sep = self.next()
            if sep.value == "}":
                break
            if sep.value != ",":
                raise self.error(f"expected ',' or '}}' in the parameters of '{name}'", sep.pos)
        self.depth -= 1
        return tuple(params)

    def attributes(self, name: str) -> dict[str, object]:
        self.next()  # [
        out: dict[str, object] = {}
        while True:
            key = self.next()
            if key.kind != "name":
                raise self.error("expected an attribute name", key.pos)
            if key.value not in _ATTRS:
                raise self.error(f"Unknown attribute '{key.value}' on '{name}'", key.pos)
            val: object = True
            if self.peek().value == "=":
                self.next()
                v = self.next()
                if v.kind == "string":
                    val = unescape(v.value[1:-1] if not v.value.endswith("i") else v.value[1:-2], self.text, v.pos, self.source)
                elif v.kind == "number":
                    try:
                        val = int(v.value, 0) if len(v.value) <= 30 else None
                    except ValueError:
                        val = None
                    if val is None:
                        raise self.error(f"invalid number {v.value[:40]!r}", v.pos)
                    if self.peek().value == "." and self.peek(1).kind == "number":  # 1.5
                        self.next()
                        frac = self.next()
                        try:
                            val = float(f"{v.value}.{frac.value}")
                        except ValueError:
                            raise self.error(f"invalid number {v.value[:20]}.{frac.value[:20]}", v.pos) from None
                elif v.kind in ("regex", "name"):
                    val = (v.kind, v.value, v.pos)
                else:
                    raise self.error(f"Expected token: a value for '{key.value}'", v.pos)
            if key.value == "max_tokens" and not isinstance(val, int):
                raise self.error("Expected token: max_tokens= needs a number", key.pos)
            if key.value == "temperature" and not isinstance(val, int | float):
                raise self.error("Expected token: temperature= needs a number", key.pos)
            out[key.value] = val
            t = self.next()
            if t.value == "]":
                return out
            if t.value != ",":
                raise self.error("Expected token ',' or ']' in attributes", t.pos)

    def directive(self) -> None:
        t = self.next()
        d = t.value
        if d == "%ignore":
            self.in_terminal = True  # %ignore takes terminals: no rule templates there
            try:
                node = self.expansions()
            finally:
                self.in_terminal = False
            self.ignore.append(node)
        elif d == "%import":
            self.import_()
        elif d == "%llguidance":
            data = self.next().data
            if not isinstance(data, dict) or any(
                k not in _LLG_OPTIONS or not isinstance(v, bool) for k, v in data.items()
            ):
                raise self.error("failed to parse %llguidance declaration: expected "
                                 f"boolean options among {sorted(_LLG_OPTIONS)}", t.pos)
            self.warnings.append("%llguidance options are ignored")
        elif d == "%declare":
            self.declare(t)
        elif d in ("%override", "%extend"):
            raise self.error(f"{d} is not supported", t.pos)
        else:
            raise self.error(f"unknown directive {d}", t.pos)

    def declare(self, directive: Tok) -> None:
        """``%declare _INDENT _DEDENT``: the terminals Lark's ``Indenter`` post-lexer makes
        from the indentation. tether runs no post-lexer: they match the empty text, so
        indentation is not checked (a stated approximation, with a warning). Any other
        declared terminal is refused: only a post-lexer tether does not have makes it."""
        names: list[Tok] = []
        while self.peek().kind == "name":
            names.append(self.next())
        if not names:
            raise self.error("expected terminal names after %declare", self.peek().pos)
        for n in names:
            if n.value not in _INDENTER:
                raise self.error(f"%declare of '{n.value}' is not supported: a declared terminal comes from a "
                                 f"post-lexer, which tether does not run (only the Indenter's "
                                 f"{' and '.join(sorted(_INDENTER))} are accepted)", n.pos)
            if n.value in self.rules or n.value in self.terms:
                raise self.error(f"duplicate terminal '{n.value}' (declared)", n.pos)
            self.rules[n.value] = EPS
            self.positions[n.value] = n.pos
        msg = (f"%declare {' '.join(n.value for n in names)}: Lark's Indenter post-lexer makes these "
               "terminals; tether has none, so they match the empty text and indentation is not checked "
               "(a newline inside brackets is not ignored either)")
        self.warnings.append(msg)
        warnings.warn(msg, stacklevel=4)

    def import_(self) -> None:
        first = self.next()
        if first.value == ".":
            raise self.error("relative imports are not supported; only %import common.X", first.pos)
        if first.kind != "name" or first.value != "common":
            raise self.error(f"only %import common.X is supported, not '{first.value}'", first.pos)
        t = self.next()
        if t.value == ".":
            name = self.next()
            if name.kind != "name":
                raise self.error("expected a name after 'common.'", name.pos)
            local = name.value
            if self.peek().value == "->":
                self.next()
                local = self.next().value
            self._import_one(name.value, local, name.pos)
        elif t.value == "(":
            self.depth += 1
            while True:
                name = self.next()
                self._import_one(name.value, name.value, name.pos)
                sep = self.next()
                if sep.value == ")":
                    break
                if sep.value != ",":
                    raise self.error("expected ',' or ')' in the import list", sep.pos)
            self.depth -= 1
        else:
            raise self.error("expected '.' or '(' after %import common", t.pos)

    def _import_one(self, name: str, local: str, pos: int) -> None:
        common = common_terms()
        if name not in common:
            raise self.error(
                f"Unknown common terminal '{name}'" + did_you_mean(name, set(common)).replace("\n", " "), pos
            )
        if local in self.terms or local in self.rules:
            raise self.error(f"duplicate terminal '{local}' (imported)", pos)
        self.imports[local] = (name, pos)
        self.terms[local] = common[name]
        self.positions[local] = pos

    # -- expressions (generators driven by ``bounds.run``: nesting costs no stack)
    def expansions(self) -> Node:
        return bounds.run(self._expansions())  # type: ignore[no-any-return]

    def at_end(self) -> bool:
        t = self.peek()
        return t.kind in ("eof", "nl") or t.value in ("|", ")", "]", "->")

    def _expansions(self) -> Gen:
        start = self.peek().pos
        alts = [(yield self._alias())]
        while True:
            t = self.peek()
            if t.value == "|":
                self.next()
                alts.append((yield self._alias()))
                continue
            # a newline followed by '|' continues the definition
            j = self.i
            while self.toks[j].kind == "nl":
                j += 1
            if j > self.i and self.toks[j].value == "|":
                self.i = j + 1
                alts.append((yield self._alias()))
                continue
            break
        return alt(alts, start)

    def _alias(self) -> Gen:
        node: Node = yield self._conjunction()
        if self.peek().value == "->":
            self.next()
            n = self.next()
            if n.kind != "name":
                raise self.error("expected an alias name after '->'", n.pos)
        return node

    def _conjunction(self) -> Gen:
        start = self.peek().pos
        parts: list[Node] = [(yield self._sequence())]
        while self.peek().value == "&":
            self.next()
            parts.append((yield self._sequence()))
        if len(parts) == 1:
            return parts[0]
        return SetOp("and", tuple(parts), pos=start)

    def _sequence(self) -> Gen:
        start = self.peek().pos
        items: list[Node] = []
        while not self.at_end() and self.peek().value not in ("&",):
            items.append((yield self._postfix()))
        return seq(items, start)

    def _postfix(self) -> Gen:
        t = self.peek()
        if t.value == "~" and t.kind == "op":  # llguidance: negation of a terminal
            self.next()
            self.nesting.enter(t.pos)
            inner = yield self._postfix()
            self.nesting.leave()
            return SetOp("not", (inner,), pos=t.pos)
        node: Node = yield self._atom()
        hi: int | None
        while True:
            p = self.peek()
            if p.value in ("*", "+", "?") and p.kind == "op":
                self.next()
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[p.value]
                node = Rep(node, lo, hi, pos=p.pos)
            elif p.value == "~" and self.peek(1).kind == "number":
                self.next()
                lo = self._count(self.next())
                hi = lo
                if self.peek().value == "..":
                    self.next()
                    hi = self._count(self.next())
                self._check_range(lo, hi, p.pos)
                node = Rep(node, lo, hi, pos=p.pos)
            elif p.value == "{":
                nxt = self.peek(1)
                if nxt.kind != "number" and nxt.value != ",":
                    raise self.error("'{' here is neither a repetition {n,m} nor a template use "
                                     "(a template is used right after its name: name{arg, ...})", p.pos)
                self.next()
                lo = 0
                if self.peek().kind == "number":
                    lo = self._count(self.next())
                hi = lo
                if self.peek().value == ",":
                    self.next()
                    hi = self._count(self.next()) if self.peek().kind == "number" else None
                self.expect("}", "'}' to close the repetition")
                self._check_range(lo, hi, p.pos)
                node = Rep(node, lo, hi, pos=p.pos)
            else:
                return node

    def _count(self, t: Tok) -> int:
        if t.kind != "number":
            raise self.error("expected a number", t.pos)
        if t.value.startswith("-"):
            raise self.error(f"repetition count must be >= 0 (got {t.value[:40]})", t.pos)
        return bounds.count(t.value, self.text, t.pos, self.source)

    def _check_range(self, lo: int, hi: int | None, pos: int) -> None:
        if lo < 0:
            raise self.error(f"repetition range start must be >= 0 (got {lo})", pos)
        if hi is not None and hi < lo:
            raise self.error(f"repetition range end must be >= start (got {lo}..{hi})", pos)

    def _atom(self) -> Gen:
        t = self.next()
        if t.kind == "op" and t.value in ("(", "["):
            self.depth += 1
            self.nesting.enter(t.pos)
            inner = yield self._expansions()
            self.nesting.leave()
            self.depth -= 1
            close = ")" if t.value == "(" else "]"
            nt = self.next()
            if nt.value != close:
                raise self.error(f"expected '{close}' to close the '{t.value}' opened here", t.pos)
            return inner if t.value == "(" else Rep(inner, 0, 1, pos=t.pos)
        if t.kind == "string":
            lit = self.string(t)
            if self.peek().value == "..":
                self.next()
                t2 = self.next()
                if t2.kind != "string":
                    raise self.error("expected a string after '..'", t2.pos)
                end = self.string(t2)
                if len(lit.text) != 1:
                    raise self.error("range start must be a single character", t.pos)
                if len(end.text) != 1:
                    raise self.error("range end must be a single character", t2.pos)
                if ord(end.text) < ord(lit.text):
                    raise self.error("invalid range order: end is before start", t.pos)
                return Cls(((ord(lit.text), ord(end.text)),), pos=t.pos)
            return lit
        if t.kind == "regex":
            return self.regex(t)
        if t.kind == "name":
            if self.peek().value == "::":
                raise self.error(f"parametric rules ('{t.value}::...') are not supported", t.pos)
            if self.peek().value == "{" and self.peek(1).kind != "number" and self.peek(1).value not in (",", "}"):
                use: Node = yield self._template_use(t)
                return use
            return Ref(t.value, pos=t.pos)
        if t.kind == "directive" and t.value == "%json":
            data = self.next().data
            return self.json_schema(data, t.pos)
        if t.kind == "directive" and t.value == "%lark":
            lark_tok = self.next()
            return self.nested_lark(lark_tok.value, lark_tok.pos)
        if t.kind == "directive" and t.value == "%regex":
            return self.substring_regex(self.next().data, t.pos)
        if t.kind == "directive" and t.value == "%if":
            raise self.error("'%if' conditions (parametric rules) are not supported", t.pos)
        if t.value == "<[":
            raise self.error("token ranges <[...]> are not supported (tether constrains text, not token ids)", t.pos)
        if t.value == "<|":
            raise self.error("special tokens <|...|> are not supported in grammars", t.pos)
        if t.value == "@":
            raise self.error("@grammar references are not supported", t.pos)
        shown = "end of line" if t.kind in ("nl", "eof") else repr(t.value)
        raise self.error(f"expected an expression, got {shown}", t.pos)

    def _template_use(self, name: Tok) -> Gen:
        """``name{arg, ...}``: a placeholder reference, instantiated by `templates.expand_templates`."""
        if name.value[:1].isupper() or name.value.lstrip("_")[:1].isupper():
            raise self.error(f"terminal templates ('{name.value}{{...}}') are not supported: only rules "
                             "take parameters", name.pos)
        if self.in_terminal:
            raise self.error(f"rule template '{name.value}' used in a terminal or %ignore (templates make "
                             "rules, which terminals cannot use)", name.pos)
        open_ = self.next()  # {
        self.depth += 1
        self.nesting.enter(open_.pos)
        args: list[Node] = []
        while True:
            args.append((yield self._postfix()))
            sep = self.next()
            if sep.value == "}":
                break
            if sep.value != ",":
                raise self.error(f"expected ',' or '}}' in the arguments of template '{name.value}'", sep.pos)
        self.nesting.leave()
        self.depth -= 1
        key = f"{name.value}{{#{len(self.usages)}}}"  # braces: never a Lark name
        self.usages[key] = Usage(name.value, tuple(args), name.pos)
        return Ref(key, pos=name.pos)

    def string(self, t: Tok) -> Lit:
        v = t.value
        ic = v.endswith("i")
        body = v[1:-2] if ic else v[1:-1]
        return Lit(unescape(body, self.text, t.pos + 1, self.source), ignore_case=ic, pos=t.pos)

    def regex(self, t: Tok) -> Node:
        v = t.value
        end = v.rfind("/")
        pattern, flags = v[1:end], v[end + 1 :]
        for f in flags:
            if f == "l":
                raise self.error("the l-flag is not supported in regexes", t.pos + end + 1)
            if f not in "imsxu":
                raise self.error(f"unknown regex flag '{f}'", t.pos + end + 1)
        pattern = pattern.replace("\\/", "/")
        rewritten = without_lookaheads(pattern, flags)
        if rewritten is not None:  # a look-ahead inside a repetition, decided inside the regex
            pattern, flags = rewritten, ""
        check_regex(pattern, flags, self.text, t.pos, self.source, whole_terminal=not self.in_terminal,
                    anchors=True)
        if self.in_terminal and lookaround_offsets(pattern, anchors=True):
            self.looks.append((t.pos, pattern, flags))
        return Rx(pattern, "".join(sorted(set(flags) - {"u"})), pos=t.pos)

    def substring_regex(self, data: object, pos: int) -> Node:
        """llguidance's ``%regex {"substring_words"|"substring_chars"|"substring_chunks": ...}``:
        one lexeme matching any contiguous part of the text (whole words / any characters /
        whole chunks), including the empty one."""
        if not isinstance(data, dict):
            raise self.error("failed to parse %regex: expected a JSON object", pos)
        fields = {"substring_words", "substring_chars", "substring_chunks"}
        for k in data:
            if k not in fields:
                raise self.error(f"unknown field '{k}' in %regex (expected one of {sorted(fields)})", pos)
        if not data:
            raise self.error("no fields set on %regex", pos)
        if len(data) > 1:
            raise self.error("only one field can be set on %regex", pos)
        (key, value), = data.items()
        if key == "substring_chunks":
            if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
                raise self.error("failed to parse %regex: substring_chunks needs a list of strings", pos)
            firsts, rests = list(value), list(value)
        else:
            if not isinstance(value, str):
                raise self.error(f"failed to parse %regex: {key} needs a string", pos)
            if key == "substring_chars":
                firsts = rests = list(value)
            else:  # words: a part starts and ends at word boundaries
                parts = re.findall(r"\s+|\S+", value)
                idx = [i for i, w in enumerate(parts) if not w.isspace()]
                firsts = [parts[i] for i in idx]
                rests = firsts[:1] + ["".join(parts[idx[k - 1] + 1 : idx[k] + 1]) for k in range(1, len(idx))]
        from tether.grammar.regexgen import to_regex

        def tail(k: int) -> Node:  # (rests[k] (rests[k+1] ...)?)?
            node: Node = EPS
            for j in range(len(rests) - 1, k - 1, -1):
                node = Rep(seq([Lit(rests[j]), node]), 0, 1)
            return node

        node = alt([EPS] + [seq([Lit(firsts[i]), tail(i + 1)]) for i in range(len(firsts))])
        return Rx(to_regex(node, lambda r: EPS), pos=pos)

    def nested_lark(self, inner: str, pos: int) -> Node:
        """llguidance's ``%lark { grammar }``: a Lark grammar embedded as one rule."""
        if self.read_nested is None:
            raise self.error("%lark blocks are not allowed here", pos)
        level = _LARK_NESTING.get() + 1
        cap = min(self.nesting.maximum, _LARK_BLOCKS)
        if level > cap:
            raise LimitError("max_nesting", level, cap, bounds.place(self.text, pos, self.source),
                             detail=f"%lark blocks nest at most {_LARK_BLOCKS} deep")
        token = _LARK_NESTING.set(level)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = self.read_nested(inner)
        except GrammarError as exc:
            off = pos
            if exc.line:
                lines = inner.split("\n")
                off = pos + sum(len(x) + 1 for x in lines[: exc.line - 1]) + exc.column - 1
            raise self.error(f"in %lark grammar: {exc.reason}", off) from None
        finally:
            _LARK_NESTING.reset(token)
        name = f"__lark{len(self.embedded) + 1}"
        self.embedded[name] = g
        return Ref(name, pos=pos)

    def json_schema(self, data: object, pos: int) -> Node:
        try:
            from tether.grammar.json_schema import compile_json_schema

            g = compile_json_schema(data)
        except (GrammarError, LimitError):
            raise
        except Exception as exc:  # SchemaError, missing json_schema module, ...
            raise self.error(f"failed to compile JSON schema: {exc}", pos) from None
        name = f"__json{len(self.embedded) + 1}"
        self.embedded[name] = g
        return Ref(name, pos=pos)


_COMMON: dict[str, Node] | None = None
_LARK_BLOCKS = 8  # %lark inside %lark: each level is a whole front end on the stack
_LARK_NESTING: ContextVar[int] = ContextVar("tether_lark_nesting", default=0)


def common_terms() -> dict[str, Node]:
    """The bundled common terminals, each with its references inlined."""
    global _COMMON
    if _COMMON is None:
        from tether.grammar.lark.common import COMMON

        p = LarkReader(COMMON, "common.lark")
        p.parse()
        defs = p.terms

        def inline(n: Node) -> Node:
            if isinstance(n, Ref):
                return inline(defs[n.name])
            if isinstance(n, SetOp):
                return SetOp(n.op, tuple(inline(a) for a in n.args), n.max_reps)
            if isinstance(n, Rep):
                return Rep(inline(n.item), n.lo, n.hi)
            if isinstance(n, Seq):
                return Seq(tuple(inline(i) for i in n.items))
            if isinstance(n, Alt):
                return Alt(tuple(inline(i) for i in n.items))
            return n

        _COMMON = {k: inline(v) for k, v in defs.items()}
    return _COMMON
