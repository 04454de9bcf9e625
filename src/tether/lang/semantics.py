"""Value, Final and Follow semantics of where-clause constraints (LMQL paper, §5, Tables 1–2).

Every sub-expression evaluates to a value with a *Final* annotation:

* ``fin`` — the value is fixed whatever tokens come next;
* ``var`` — it may still change in any direction;
* ``inc`` / ``dec`` — it can only grow / shrink (numbers, append-only strings, lists).

``evaluate(expr, state)`` computes both (``FV``). While a hole ``V`` is being decoded its
value so far is ``inc``; at end of sequence it is ``fin``. Holes decoded earlier and
Python variables are ``fin``: Python code does not run while a hole is decoded, so their
values cannot change during it. Holes not decoded yet are unknown (``None``, ``var``) and
every operator tolerates ``None``.

*Follow* (Table 2) is evaluation under the updated scope ``σ[v ← vt]``: ``follow(expr,
state, t)`` evaluates with the value extended by ``t`` (``inc``), or with the value as it
is and ``fin`` when ``t`` is end-of-sequence. A token is masked exactly when Follow gives
``fin(False)``. Soundness (Theorem 5.1) follows from the annotation rules: ``fin(False)``
is only produced when every continuation of the value keeps the result False.

Built-ins (any case): ``stops_at``, ``stops_before``, ``len``, ``words``, ``sentences``,
``characters``, ``TOKENS``, ``INT``, ``REGEX``, ``AFTER``; any other callable is a user
function, evaluated on the current values (``fin`` only when all arguments are ``fin``).
``AFTER(V, triggers)`` is a directive (always true here): the runtime lowers it into the
hole's output (free text until a trigger, then the hole's type).
"""

from __future__ import annotations

import ast
import builtins
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.errors import ConstraintError, limited
from tether.lang.prefix_regex import compile_prefix

Ann = Literal["fin", "var", "inc", "dec"]
FIN: Ann = "fin"
VAR: Ann = "var"
INC: Ann = "inc"
DEC: Ann = "dec"


@dataclass(frozen=True, slots=True)
class FV:
    """A value with its Final annotation."""

    value: Any
    ann: Ann

    @property
    def fin_false(self) -> bool:
        return self.ann == FIN and not _truthy(self.value)

    @property
    def fin_true(self) -> bool:
        return self.ann == FIN and _truthy(self.value)


UNKNOWN = FV(None, VAR)


def _truthy(v: Any) -> bool:
    return bool(v) if v is not None else False


@dataclass
class HoleState:
    """What the evaluator knows while hole ``var`` is decoded.

    Attributes:
        var: name of the hole being decoded.
        text: its value so far (decoded text).
        final: True once the hole is complete (end of sequence / stop).
        n_tokens: tokens generated so far for the hole.
        scope: Python variables and earlier holes (all ``fin``).
        future: names of holes not decoded yet (unknown).
        tokenize: text → token ids, for ``TOKENS`` of values other than the current one.
    """

    var: str
    text: str = ""
    final: bool = False
    n_tokens: int = 0
    scope: dict[str, Any] = field(default_factory=dict)
    future: frozenset[str] = frozenset()
    tokenize: Callable[[str], Sequence[int]] | None = None

    def extended(self, text: str, n_tokens: int, final: bool) -> HoleState:
        return HoleState(self.var, text, final, n_tokens, self.scope, self.future, self.tokenize)


class _TokenList(list[Any]):  # a list standing for the tokens of the current hole
    pass


_BUILTINS = {
    "stops_at", "stops_before", "len", "words", "sentences", "characters", "tokens", "int",
    "regex", "after",
}
_ALIASES = {"stop_at": "stops_at", "stop_before": "stops_before"}  # the paper's spellings
_INT_PREFIX = re.compile(r" ?[0-9]*")
_INT_FULL = re.compile(r" ?[0-9]+")
_INT_FULL_SIGNED = re.compile(r"\s*-?[0-9]+\s*")


def builtin_name(node: ast.expr) -> str | None:
    """The lower-cased LMQL built-in name ``node`` calls, if any."""
    if isinstance(node, ast.Name):
        n = node.id.lower()
        n = _ALIASES.get(n, n)
        return n if n in _BUILTINS else None
    return None


def words(s: str) -> list[str]:
    """Whitespace-separated words (split on spaces and newlines, empty parts dropped)."""
    return s.split()


def sentences(s: str) -> list[str]:
    """Sentences: text split after '.', '!' or '?' (kept), empty parts dropped."""
    return [p for p in re.split(r"(?<=[.!?])\s+", s) if p.strip()]


def _mono(a: Ann) -> Ann:
    return a if a in (FIN, INC, DEC) else VAR


def evaluate(node: ast.expr, st: HoleState) -> FV:  # noqa: C901 - one table, one function
    """Value + Final annotation of ``node`` under ``st`` (Table 1). Never raises on
    user errors: an exception in user code gives ``var(None)``."""
    if isinstance(node, ast.Constant):
        return FV(node.value, FIN)
    if isinstance(node, ast.Name):
        if node.id == st.var:
            return FV(st.text, FIN if st.final else INC)
        if node.id in st.future:
            return UNKNOWN
        if node.id in st.scope:
            return FV(st.scope[node.id], FIN)
        if hasattr(builtins, node.id):
            return FV(getattr(builtins, node.id), FIN)
        return UNKNOWN
    if isinstance(node, ast.BoolOp):
        vals = [evaluate(v, st) for v in node.values]
        if isinstance(node.op, ast.And):
            if any(v.fin_false for v in vals):
                return FV(False, FIN)
            if all(v.fin_true for v in vals):
                return FV(True, FIN)
            return FV(all(_truthy(v.value) for v in vals), VAR)
        if any(v.fin_true for v in vals):
            return FV(True, FIN)
        if all(v.fin_false for v in vals):
            return FV(False, FIN)
        return FV(any(_truthy(v.value) for v in vals), VAR)
    if isinstance(node, ast.UnaryOp):
        x = evaluate(node.operand, st)
        if x.value is None:
            return UNKNOWN
        try:
            if isinstance(node.op, ast.Not):
                return FV(not x.value, FIN if x.ann == FIN else VAR)
            if isinstance(node.op, ast.USub):
                flip = {INC: DEC, DEC: INC}
                return FV(-x.value, flip.get(x.ann, x.ann))
        except Exception:  # -"text", a value whose truth raises: not known statically
            return UNKNOWN
        return _generic(node, st)
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, st)
        out: list[FV] = []
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = evaluate(right_node, st)
            out.append(_compare(op, left, right))
            left = right
        if len(out) == 1:
            return out[0]
        if any(v.fin_false for v in out):
            return FV(False, FIN)
        if all(v.ann == FIN for v in out):
            return FV(all(v.value for v in out), FIN)
        return FV(all(_truthy(v.value) for v in out), VAR)
    if isinstance(node, ast.Call):
        return _call(node, st)
    if isinstance(node, ast.BinOp):
        a, b = evaluate(node.left, st), evaluate(node.right, st)
        if a.value is None or b.value is None:
            return UNKNOWN
        if _too_large(node.op, a.value, b.value):
            return UNKNOWN  # left to run time (a user's program may compute it; a check does not)
        try:
            v = _BINOPS[type(node.op)](a.value, b.value)
        except Exception:
            return UNKNOWN
        if a.ann == FIN and b.ann == FIN:
            return FV(v, FIN)
        if isinstance(node.op, ast.Add):
            if isinstance(v, str | list | tuple):  # append-only: fin + inc is inc
                return FV(v, INC if a.ann == FIN and b.ann == INC else VAR)
            if {a.ann, b.ann} <= {FIN, INC}:
                return FV(v, INC)
            if {a.ann, b.ann} <= {FIN, DEC}:
                return FV(v, DEC)
        return FV(v, VAR)
    if isinstance(node, ast.Attribute):
        x = evaluate(node.value, st)
        if x.value is None:
            return UNKNOWN
        try:
            return FV(getattr(x.value, node.attr), FIN if x.ann == FIN else VAR)
        except Exception:
            return UNKNOWN
    if isinstance(node, ast.Subscript):
        x, i = evaluate(node.value, st), evaluate(node.slice, st)
        if x.value is None or i.value is None:
            return UNKNOWN
        try:
            v = x.value[i.value]
        except Exception:
            return UNKNOWN
        return FV(v, FIN if x.ann == FIN and i.ann == FIN else VAR)
    if isinstance(node, ast.Slice):
        parts = [evaluate(p, st) if p is not None else FV(None, FIN) for p in (node.lower, node.upper, node.step)]
        return FV(slice(*(p.value for p in parts)), FIN if all(p.ann == FIN for p in parts) else VAR)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [evaluate(e, st) for e in node.elts]
        vals = [i.value for i in items]
        ctor = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        try:
            v = ctor(vals)
        except TypeError:
            return UNKNOWN
        return FV(v, FIN if all(i.ann == FIN for i in items) else VAR)
    return _generic(node, st)


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


# the largest constant the static check computes (sequence items, or bits of an integer):
# ``[x] * 10**10`` or ``9 ** 9 ** 9`` in a constraint would exhaust memory or time
_MAX_COMPUTED = 1 << 20


def _too_large(op: ast.operator, a: Any, b: Any) -> bool:
    """Whether ``a op b`` could be larger than ``_MAX_COMPUTED``: a sequence repeated, a
    power, or ``%`` formatting of a text (its widths are unbounded)."""
    if isinstance(op, ast.Mult):
        for seq, n in ((a, b), (b, a)):
            if isinstance(n, int) and hasattr(seq, "__len__"):
                try:
                    return len(seq) * n > _MAX_COMPUTED
                except Exception:  # noqa: BLE001 -- a len() that raises: not computed
                    return True
        return False
    if isinstance(op, ast.Pow):
        if isinstance(a, int) and isinstance(b, int) and b > 0:
            return max(a.bit_length(), 1) * b > _MAX_COMPUTED
        return False
    return isinstance(op, ast.Mod) and isinstance(a, str | bytes)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _generic(node: ast.expr, st: HoleState) -> FV:
    """Any other Python expression: evaluated as Python; ``fin`` iff it reads no hole
    that may still change."""
    names = _names(node)
    if names & st.future:
        return UNKNOWN
    env = dict(st.scope)
    env[st.var] = st.text
    try:
        v = eval(compile(ast.Expression(node), "<where>", "eval"), {"__builtins__": builtins}, env)  # noqa: S307
    except Exception:
        return UNKNOWN
    return FV(v, FIN if (st.var not in names or st.final) else VAR)


def _compare(op: ast.cmpop, x: FV, y: FV) -> FV:
    if isinstance(op, ast.In | ast.NotIn):
        r = _contains(x, y)
        if isinstance(op, ast.NotIn):
            return FV(None if r.value is None else not r.value, FIN if r.ann == FIN else VAR)
        return r
    if isinstance(op, ast.Is | ast.IsNot):
        if x.value is None and x.ann != FIN or y.value is None and y.ann != FIN:
            return UNKNOWN
        v = (x.value is y.value) == isinstance(op, ast.Is)
        return FV(v, FIN if x.ann == FIN and y.ann == FIN else VAR)
    if x.value is None or y.value is None:
        return UNKNOWN
    if isinstance(op, ast.Eq | ast.NotEq):
        r = _equals(x, y)
        if isinstance(op, ast.NotEq):
            return FV(not r.value, FIN if r.ann == FIN else VAR)
        return r
    fn = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}[type(op)]
    try:
        v = bool(fn(x.value, y.value))
    except TypeError:
        return UNKNOWN
    if x.ann == FIN and y.ann == FIN:
        return FV(v, FIN)
    up, down = (FIN, INC), (FIN, DEC)
    if isinstance(op, ast.Lt | ast.LtE):  # x < y stays True if x shrinks / y grows
        if v and x.ann in down and y.ann in up:
            return FV(True, FIN)
        if not v and x.ann in up and y.ann in down:
            return FV(False, FIN)
    else:  # x > y
        if v and x.ann in up and y.ann in down:
            return FV(True, FIN)
        if not v and x.ann in down and y.ann in up:
            return FV(False, FIN)
    return FV(v, VAR)


def _equals(x: FV, y: FV) -> FV:
    v = x.value == y.value
    if x.ann == FIN and y.ann == FIN:
        return FV(v, FIN)
    # an append-only string equals a fixed one only while it is a prefix of it
    for a, b in ((x, y), (y, x)):
        if a.ann == INC and b.ann == FIN and isinstance(a.value, str) and isinstance(b.value, str):
            return FV(v, VAR) if b.value.startswith(a.value) else FV(False, FIN)
        if a.ann == INC and b.ann == FIN and isinstance(a.value, int | float) and isinstance(b.value, int | float):
            return FV(v, VAR) if a.value <= b.value else FV(False, FIN)
        if a.ann == DEC and b.ann == FIN and isinstance(a.value, int | float) and isinstance(b.value, int | float):
            return FV(v, VAR) if a.value >= b.value else FV(False, FIN)
    return FV(v, VAR)


def _contains(x: FV, y: FV) -> FV:
    """``x in y`` with Table 1's string and set rules."""
    if x.value is None or y.value is None:
        return UNKNOWN
    try:
        v = x.value in y.value
    except TypeError:
        return UNKNOWN
    if x.ann == FIN and y.ann == FIN:
        return FV(v, FIN)
    if isinstance(y.value, str) and isinstance(x.value, str):
        # substring of a growing string: once in, always in
        if v and x.ann == FIN and y.ann == INC:
            return FV(True, FIN)
        return FV(v, VAR)
    if isinstance(x.value, str) and y.ann == FIN and x.ann in (INC, FIN):
        # growing string in a fixed collection: dead once no element extends it
        if not any(isinstance(e, str) and e.startswith(x.value) for e in y.value):
            return FV(False, FIN)
        return FV(v, VAR)
    return FV(v, VAR)


def _call(node: ast.Call, st: HoleState) -> FV:
    name = builtin_name(node.func)
    args = node.args
    if name in ("stops_at", "stops_before") and args:
        tgt = args[0]
        if isinstance(tgt, ast.Name) and tgt.id == st.var and not st.final:
            return FV(False, VAR)  # a stopping phrase is a directive, not a requirement
        return FV(True, FIN)
    if name == "after":
        return FV(True, FIN)  # a directive: the hole's output carries it (runtime `_lower`)
    if name == "tokens" and len(args) == 1:
        a = args[0]
        if isinstance(a, ast.Name) and a.id == st.var:
            return FV(_TokenList([0] * st.n_tokens), FIN if st.final else INC)
        x = evaluate(a, st)
        if x.value is None:
            return UNKNOWN
        toks = list(st.tokenize(str(x.value))) if st.tokenize else list(str(x.value))
        return FV(toks, x.ann)
    if name == "len" and len(args) == 1:
        x = evaluate(args[0], st)
        if x.value is None:
            return UNKNOWN
        try:
            return FV(len(x.value), _mono(x.ann))
        except TypeError:
            return UNKNOWN
    if name in ("words", "sentences", "characters") and len(args) == 1:
        x = evaluate(args[0], st)
        if x.value is None:
            return UNKNOWN
        s = str(x.value)
        parts: list[str] = words(s) if name == "words" else sentences(s) if name == "sentences" else list(s)
        return FV(parts, _mono(x.ann))
    if name == "int" and len(args) == 1:
        x = evaluate(args[0], st)
        if x.value is None:
            return UNKNOWN
        s = str(x.value)
        if x.ann == FIN:
            full = _INT_FULL if isinstance(args[0], ast.Name) and args[0].id == st.var else _INT_FULL_SIGNED
            return FV(full.fullmatch(s) is not None, FIN)
        if _INT_PREFIX.fullmatch(s) is None:
            return FV(False, FIN)
        return FV(_INT_FULL.fullmatch(s) is not None, VAR)
    if name == "regex" and len(args) == 2:
        x, p = evaluate(args[0], st), evaluate(args[1], st)
        if x.value is None or p.value is None:
            return UNKNOWN
        rx = compile_prefix(str(p.value))
        s = str(x.value)
        if x.ann == FIN:
            return FV(rx.fullmatch(s), FIN)
        if not rx.viable(s):
            return FV(False, FIN)
        return FV(rx.fullmatch(s), VAR)
    # user function (or Python built-in): value semantics, fin iff all arguments fin
    f = evaluate(node.func, st)
    vals = [evaluate(a, st) for a in args]
    kws = {k.arg: evaluate(k.value, st) for k in node.keywords if k.arg}
    if f.value is None or any(v.value is None for v in vals) or any(v.value is None for v in kws.values()):
        return UNKNOWN
    try:
        v = f.value(*[a.value for a in vals], **{k: a.value for k, a in kws.items()})
    except Exception:
        return UNKNOWN
    all_fin = f.ann == FIN and all(a.ann == FIN for a in (*vals, *kws.values()))
    return FV(v, FIN if all_fin else VAR)


def follow(expr: ast.expr, st: HoleState, token_text: str | None, n_new: int = 1) -> FV:
    """Follow[expr](u, t): the constraint after the current hole's value is extended by
    ``token_text`` (``None`` = end of sequence)."""
    if token_text is None:
        return evaluate(expr, st.extended(st.text, st.n_tokens, True))
    return evaluate(expr, st.extended(st.text + token_text, st.n_tokens + n_new, False))


# ---------------------------------------------------------------------------------------
# static analysis of a hole's constraint: stop phrases, token budget, choices, regexes


def conjuncts(expr: ast.expr | None) -> list[ast.expr]:
    """Top-level ``and`` operands of ``expr`` (flattened)."""
    if expr is None:
        return []
    if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.And):
        return [c for v in expr.values for c in conjuncts(v)]
    return [expr]


def mentions(expr: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(expr))


@dataclass
class Plan:
    """What the decoder can use directly (exact forms) for one hole's constraint.

    Attributes:
        stops: (phrase, keep) pairs: ``keep`` is True for STOPS_AT (phrase kept in the value).
        max_tokens: budget from ``len(TOKENS(V)) < n`` / ``<= n`` (None: none).
        choices: the finite set of values from ``V in [...]`` / ``V == s`` / their ``or``.
        regex: a pattern the value must fully match (``REGEX``/typed holes/``INT``).
        max_chars: from ``len(V) < n`` / ``<= n``.
    """

    stops: list[tuple[str, bool]] = field(default_factory=list)
    max_tokens: int | None = None
    choices: list[str] | None = None
    regexes: list[str] = field(default_factory=list)
    max_chars: int | None = None
    is_int: bool = False


def plan(expr: ast.expr | None, st: HoleState) -> Plan:
    """Extract the exact parts of a hole's constraint (only top-level conjuncts are used,
    so every fact here is implied by the whole constraint)."""
    p = Plan()
    v = st.var
    # stop phrases anywhere in the constraint (``STOPS_AT(X, ".") or STOPS_AT(X, "!")``):
    # a phrase only ends the hole when the whole constraint holds on the cut value
    for node in ast.walk(expr) if expr is not None else ():
        if (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)):
            for c in node.values:
                for sub in ast.walk(c):
                    if (isinstance(sub, ast.Call) and builtin_name(sub.func) in ("stops_at", "stops_before")
                            and len(sub.args) == 2 and _is_var(sub.args[0], v)):
                        s = evaluate(sub.args[1], st)
                        stop = (s.value, builtin_name(sub.func) == "stops_at")
                        if isinstance(s.value, str) and s.value and stop not in p.stops:
                            p.stops.append(stop)
    for c in conjuncts(expr):
        if isinstance(c, ast.Call) and builtin_name(c.func) in ("stops_at", "stops_before"):
            if len(c.args) == 2 and isinstance(c.args[0], ast.Name) and c.args[0].id == v:
                s = evaluate(c.args[1], st)
                if isinstance(s.value, str) and s.value:
                    if (s.value, builtin_name(c.func) == "stops_at") not in p.stops:
                        p.stops.append((s.value, builtin_name(c.func) == "stops_at"))
            continue
        if isinstance(c, ast.Call) and builtin_name(c.func) == "int" and _is_var(c.args[0] if c.args else None, v):
            p.is_int = True
            p.regexes.append(r" ?[0-9]+")
            continue
        if isinstance(c, ast.Call) and builtin_name(c.func) == "regex" and len(c.args) == 2 and _is_var(c.args[0], v):
            pat = evaluate(c.args[1], st)
            if isinstance(pat.value, str):
                p.regexes.append(pat.value)
            continue
        if isinstance(c, ast.Compare) and len(c.ops) == 1:
            lhs, op, rhs = c.left, c.ops[0], c.comparators[0]
            if (isinstance(lhs, ast.Call) and builtin_name(lhs.func) == "len" and len(lhs.args) == 1
                    and isinstance(op, ast.Lt | ast.LtE | ast.Eq)):
                bound = evaluate(rhs, st)
                if isinstance(bound.value, int) and bound.ann == FIN:
                    lim = bound.value - (1 if isinstance(op, ast.Lt) else 0)
                    inner = lhs.args[0]
                    if isinstance(inner, ast.Call) and builtin_name(inner.func) == "tokens" and _is_var(inner.args[0] if inner.args else None, v):
                        p.max_tokens = lim if p.max_tokens is None else min(p.max_tokens, lim)
                    elif _is_var(inner, v):
                        p.max_chars = lim if p.max_chars is None else min(p.max_chars, lim)
                continue
        ch = _choices(c, st)
        if ch is not None:
            p.choices = ch if p.choices is None else [x for x in p.choices if x in ch]
    return p


def _is_var(node: ast.AST | None, v: str) -> bool:
    return isinstance(node, ast.Name) and node.id == v


def _choices(c: ast.expr, st: HoleState) -> list[str] | None:
    if isinstance(c, ast.BoolOp) and isinstance(c.op, ast.Or):
        out: list[str] = []
        for x in c.values:
            sub = _choices(x, st)
            if sub is None:
                return None
            out += [s for s in sub if s not in out]
        return out
    if isinstance(c, ast.Compare) and len(c.ops) == 1:
        lhs, op, rhs = c.left, c.ops[0], c.comparators[0]
        if isinstance(op, ast.Eq):
            for a, b in ((lhs, rhs), (rhs, lhs)):
                if _is_var(a, st.var):
                    val = evaluate(b, st)
                    if val.ann == FIN and isinstance(val.value, str):
                        return [val.value]
        if isinstance(op, ast.In) and _is_var(lhs, st.var):
            val = evaluate(rhs, st)
            if val.ann == FIN and isinstance(val.value, list | tuple | set | frozenset | dict):
                items = list(val.value)
                if all(isinstance(i, str) for i in items):
                    return items
    return None


# ---------------------------------------------------------------------------------------
# checking constraints before decoding: an ill-typed constraint is an error, never dropped

_ARITY = {"stops_at": 2, "stops_before": 2, "len": 1, "tokens": 1, "words": 1, "sentences": 1,
          "characters": 1, "int": 1, "regex": 2, "after": 2}
_CONTAINERS = (str, list, tuple, set, frozenset, dict, range)


def constraint_place(node: ast.AST, filename: str = "") -> str:
    line = getattr(node, "lineno", 0)
    where = f" in {filename}" if filename else ""
    return f" at line {line}{where}" if line else where


def _fail(problem: str, c: ast.expr, filename: str) -> ConstraintError:
    try:
        src = ast.unparse(c)
    except (RecursionError, ValueError):
        src = "..."
    src = src if len(src) <= 100 else src[:97] + "..."
    return ConstraintError(f"{problem}, in the constraint `{src}`{constraint_place(c, filename)}")


def check_constraint(expr: ast.expr, var: str | None, holes: frozenset[str], scope: dict[str, Any] | None,
                     filename: str = "") -> None:
    """Raise ConstraintError for an ill-typed or unknown part of a constraint.

    Without ``scope`` (when the query is loaded) only what the text alone decides is
    checked: the built-ins' arities, constant REGEX patterns, ``in`` over a constant that
    is no collection, impossible length bounds. With ``scope`` (before hole ``var`` is
    decoded) the arguments are evaluated too (patterns, stop phrases, bounds, the right
    side of ``in``). Never evaluates anything that reads a hole not yet decoded.
    """
    st = HoleState(var or "", "", False, 0, dict(scope or {}), holes - {var or ""} - (scope or {}).keys())

    def known(node: ast.expr) -> FV:
        """The value of ``node`` when it is fixed before decoding, else UNKNOWN."""
        if scope is None and not isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Set | ast.UnaryOp):
            return UNKNOWN
        if _names(node) & (holes | {var or ""}):
            return UNKNOWN
        v = evaluate(node, st)
        return v if v.ann == FIN else UNKNOWN

    top = {id(c) for c in conjuncts(expr)}
    for c in ast.walk(expr):
        if isinstance(c, ast.Call):
            name = builtin_name(c.func)
            if name is None:
                continue
            shown = c.func.id if isinstance(c.func, ast.Name) else name
            want = _ARITY[name]
            if len(c.args) != want or c.keywords:
                what = {"stops_at": "a hole and a phrase", "stops_before": "a hole and a phrase",
                        "regex": "a hole and a pattern", "after": "a hole and its trigger(s)"}.get(name, "one value")
                raise _fail(f"{shown}() takes {want} argument{'s' if want > 1 else ''} ({what}); "
                            f"got {len(c.args) + len(c.keywords)}", c, filename)
            if name == "after":
                if id(c) not in top:
                    raise _fail(f"{shown}() is a directive: write it as a conjunct of the constraint "
                                "(joined with `and`), not inside `or`, `not` or an expression", c, filename)
                if not (isinstance(c.args[0], ast.Name) and c.args[0].id in holes):
                    raise _fail(f"the first argument of {shown}() must be a hole of the query", c, filename)
                trig = known(c.args[1])
                if trig.value is not None and not _is_triggers(trig.value):
                    raise _fail(f"the triggers of {shown}() must be a non-empty string, a list of them or a dict "
                                f"{{trigger: type}}; got {limited(trig.value)}", c, filename)
            elif name in ("stops_at", "stops_before"):
                if not (isinstance(c.args[0], ast.Name) and c.args[0].id in holes):
                    raise _fail(f"the first argument of {shown}() must be a hole of the query", c, filename)
                phrase = known(c.args[1])
                if phrase.value is not None and (not isinstance(phrase.value, str) or not phrase.value):
                    raise _fail(f"the stop phrase of {shown}() must be a non-empty string; got "
                                f"{limited(phrase.value)}", c, filename)
            elif name == "regex":
                pat = known(c.args[1])
                if pat.value is not None:
                    if not isinstance(pat.value, str):
                        raise _fail(f"the pattern of {shown}() must be a string; got {limited(pat.value)}", c, filename)
                    try:
                        compile_prefix(pat.value)
                    except ConstraintError as exc:
                        raise _fail(str(exc), c, filename) from None
        elif isinstance(c, ast.Compare) and len(c.ops) == 1:
            op, lhs, rhs = c.ops[0], c.left, c.comparators[0]
            if isinstance(op, ast.In | ast.NotIn) and isinstance(lhs, ast.Name) and lhs.id in holes:
                coll = known(rhs)
                if coll.value is not None:
                    if not isinstance(coll.value, _CONTAINERS):
                        raise _fail(f"`{lhs.id} in ...` needs a string or a collection of strings on the right; "
                                    f"got {type(coll.value).__name__} {limited(coll.value)}", c, filename)
                    if not isinstance(coll.value, str) and not any(isinstance(x, str) for x in coll.value):
                        raise _fail(f"no element of {limited(coll.value)} is a string, so {lhs.id} can never be "
                                    "in it", c, filename)
            if (isinstance(lhs, ast.Call) and builtin_name(lhs.func) == "len"
                    and isinstance(op, ast.Lt | ast.LtE | ast.Gt | ast.GtE | ast.Eq)):
                bound = known(rhs)
                if bound.value is not None:
                    if isinstance(bound.value, bool) or not isinstance(bound.value, int | float):
                        raise _fail(f"a length is compared with {limited(bound.value)}, not a number", c, filename)
                    if (isinstance(op, ast.Lt) and bound.value <= 0) or (isinstance(op, ast.LtE | ast.Eq) and bound.value < 0):
                        sym = {ast.Lt: "<", ast.LtE: "<=", ast.Eq: "=="}[type(op)]
                        raise _fail(f"no value has a length {sym} {bound.value}", c, filename)


def _is_triggers(v: Any) -> bool:
    """``AFTER``'s second argument: a non-empty string, a non-empty list of them, or a
    non-empty dict from them (to each trigger's type)."""
    if isinstance(v, str):
        return bool(v)
    if isinstance(v, list | tuple | dict):
        return bool(v) and all(isinstance(t, str) and t for t in v)
    return False
