"""``minimum``/``maximum`` (exclusive too, draft-04 flags included) and ``multipleOf``:
the number lexeme.

Bounds are intersected exactly (``Decimal``) and become a digit-by-digit range regex
(``numbers.py``); ``multipleOf`` an integer is a regex where the multiples over the
range can be enumerated, else digit-by-digit remainder rules (``multiples_rules``, up
to ``MAX_MODULUS``); ``multipleOf`` 10^-k limits the fraction digits. With
``bounded_numbers``, digits the schema leaves unbounded are bounded (``NumberBounds``).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

from tether.errors import SchemaError, limited
from tether.grammar.ir import NT, T
from tether.grammar.json_schema import numbers as num
from tether.grammar.json_schema.context import NUMBER_KW, Context, Member, ptr

MAX_MODULUS = 1000  # largest multipleOf read digit by digit

# (integer?, lower bound, upper bound, fraction digits): the shape a number lexeme was
# made from; a bound is (value, strict)
NumberShape = tuple[bool, "tuple[Decimal, bool] | None", "tuple[Decimal, bool] | None", int]


def compile_number(c: Context, flat: list[Member], *, integer: bool) -> str | tuple[Any, ...] | None:
    """The number lexeme (a regex, an expr, ``("mod", m)``, or None if empty); with
    ``bounded_numbers``, digits the schema leaves unbounded are bounded."""
    rx, shape = number_exact(c, flat, integer=integer)
    if c.number_bounds is None or shape is None or rx is None:
        return rx
    if isinstance(rx, tuple) and rx[0] == "mod":
        return rx  # multiples read digit by digit: unbounded (see docs/json_schema.md)
    is_int, lo, hi, frac = shape
    if is_int and lo is not None and hi is not None:
        return rx  # finitely many integers already
    idig = fdig = 0
    for b in (lo, hi):
        if b is not None:
            i, f = num.digits_of(b[0])
            idig, fdig = max(idig, i), max(fdig, f + 1)  # one more: a value between
    cap = c.number_bounds.regex(integer=is_int, integer_digits=idig, fraction_digits=max(fdig, frac))
    if isinstance(rx, tuple) and rx[0] == "and":
        return (*rx, cap)
    return ("and", rx, cap)


def number_exact(c: Context, flat: list[Member], *, integer: bool) -> tuple[str | tuple[Any, ...] | None, NumberShape | None]:
    """The number lexeme the keywords allow exactly, and the bounds it was made from
    (``(integer?, lower, upper, fraction digits)``; None when no value is allowed)."""
    lo: tuple[Decimal, bool] | None = None  # (bound, strict)
    hi: tuple[Decimal, bool] | None = None
    mults: list[tuple[Fraction, str]] = []

    def tighten_lo(b: Decimal, strict: bool) -> None:
        nonlocal lo
        if lo is None or b > lo[0] or (b == lo[0] and strict):
            lo = (b, strict)

    def tighten_hi(b: Decimal, strict: bool) -> None:
        nonlocal hi
        if hi is None or b < hi[0] or (b == hi[0] and strict):
            hi = (b, strict)

    for s, p in flat:
        for kw in NUMBER_KW:
            if kw not in s:
                continue
            v = s[kw]
            q = ptr(p, kw)
            if isinstance(v, bool) and kw.startswith("exclusive"):
                continue  # draft-04 flag, read with minimum/maximum
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise SchemaError(f"'{kw}' must be a number, got {limited(v)}", q)
            if isinstance(v, float) and not math.isfinite(v):
                if v != v or (kw in ("minimum", "exclusiveMinimum") and v > 0) or (
                    kw in ("maximum", "exclusiveMaximum") and v < 0
                ):
                    raise SchemaError(f"'{kw}' is {v!r}: no JSON number is in range", q)
                continue  # an infinite bound on the open side bounds nothing
            if isinstance(v, int) and abs(v) >= 10**400 or isinstance(v, float) and abs(v) >= 1e300 and kw == "multipleOf":
                raise SchemaError(f"'{kw}' with {len(str(abs(int(v))))} digits is too large", q)
            d = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
            if kw == "minimum":
                tighten_lo(d, s.get("exclusiveMinimum") is True)
            elif kw == "maximum":
                tighten_hi(d, s.get("exclusiveMaximum") is True)
            elif kw == "exclusiveMinimum":
                tighten_lo(d, True)
            elif kw == "exclusiveMaximum":
                tighten_hi(d, True)
            else:
                if v <= 0:
                    raise SchemaError(f"'multipleOf' must be > 0, got {v}", q)
                mults.append((Fraction(str(d)), q))
    if lo is not None and hi is not None and (lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1]))):
        return None, None
    step: int | None = None
    if mults:
        frac_mults = [m for m, _ in mults if m.denominator != 1]
        int_mults = [int(m) for m, _ in mults if m.denominator == 1]
        if frac_mults:
            if integer or int_mults:
                # an integer n is a multiple of p/q iff p divides n
                step = math.lcm(*(int_mults + [m.numerator for m in frac_mults]))
                integer = True
            else:
                k = max(num.digits_of(Decimal(m.numerator) / Decimal(m.denominator))[1] for m in frac_mults)
                return fractional_multiple(c, frac_mults, mults[0][1], lo, hi), (False, lo, hi, k)
        else:
            step = math.lcm(*int_mults)
            integer = True  # multiples of an integer are integers
    shape: NumberShape = (integer, lo, hi, 0)
    if integer:
        ilo = None if lo is None else (math.floor(lo[0]) + 1 if lo[1] else math.ceil(lo[0]))
        ihi = None if hi is None else (math.ceil(hi[0]) - 1 if hi[1] else math.floor(hi[0]))
        if ilo is not None and ihi is not None and ilo > ihi:
            return None, shape
        if step is not None and step > 1:
            rx = num.multiples_regex(step, ilo, ihi)
            if rx is None and ilo is None and ihi is None and step <= MAX_MODULUS:
                return ("mod", step), shape  # digit-by-digit rules (see multiples_rules)
            if rx is None:
                c.unsupported("multipleOf", mults[0][1],
                              f"multiples of {step} over this range cannot be enumerated")
                rx = num.integer_range(ilo, ihi)
            return (None if rx == num.NEVER else rx), shape
        return num.integer_range(ilo, ihi), shape
    if lo is None and hi is None:
        return num.NUMBER, shape
    rx = num.decimal_range(
        lo[0] if lo else None, lo[1] if lo else False, hi[0] if hi else None, hi[1] if hi else False
    )
    return (None if rx == num.NEVER else rx), shape


def multiples_rules(c: Context, m: int) -> str:
    """Rules for canonical integers divisible by ``m``: the remainder automaton read
    digit by digit (one-digit lexemes; used only where no regex is small enough)."""
    key = ("mod", m)
    if key in c.memo:
        return c.memo[key]  # type: ignore[return-value]
    name = c.memo[key] = c.fresh(f"mult{m}")
    state = [c.fresh(f"mod{m}_r{r}") for r in range(m)]

    def digits_to(r: int, first: bool) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for d in range(1 if first else 0, 10):
            out.setdefault((r * 10 + d) % m, []).append(d)
        return out

    def cls(ds: list[int]) -> T:
        text = "".join(str(d) for d in ds)
        return c.term(("rx", f"[{text}]" if len(ds) > 1 else text), "digit")

    for r in range(m):
        if r == 0:
            c.rule(state[r])
        for target, ds in sorted(digits_to(r, False).items()):
            c.rule(state[r], cls(ds), NT(state[target]))
    nonzero = c.fresh(f"mult{m}_nz")
    for target, ds in sorted(digits_to(0, True).items()):
        c.rule(nonzero, cls(ds), NT(state[target]))
    c.rule(name, c.term(("lit", "0")))
    c.rule(name, NT(nonzero))
    c.rule(name, c.term(("lit", "-")), NT(nonzero))
    return name


def fractional_multiple(c: Context, mults: list[Fraction], pointer: str, lo, hi) -> str | tuple[Any, ...] | None:  # type: ignore[no-untyped-def]
    m = mults[0]
    if any(x != m for x in mults) or m.numerator != 1 or 10 ** (len(str(m.denominator)) - 1) != m.denominator:
        c.unsupported("multipleOf", pointer, f"multipleOf {m} (only integers and 10^-k)")
        return num.NUMBER
    k = len(str(m.denominator)) - 1
    digits = f"-?(?:0|[1-9][0-9]*)(?:\\.[0-9]{{1,{k}}})?"
    if lo is None and hi is None:
        return digits
    rx = num.decimal_range(
        lo[0] if lo else None, lo[1] if lo else False, hi[0] if hi else None, hi[1] if hi else False
    )
    if rx == num.NEVER:
        return None
    return ("and", rx, digits)
