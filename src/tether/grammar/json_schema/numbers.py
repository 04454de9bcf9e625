"""Regexes for JSON numbers within exact bounds.

Integers are written canonically (``0``, ``-12``; no leading zeros, no ``-0``); a range
``lo..hi`` becomes digit-by-digit alternatives, linear in the number of digits of the bounds
(so ``2**63`` or ``-10**40`` cost a few hundred characters, never an enumeration).
Bounded decimals are written positionally (``-12.5``, ``0.001``; no exponent); the bound is
split into integer part and fraction, and the fraction compared digit by digit.

Unbounded numbers keep the full JSON syntax, exponent included (``INTEGER``, ``NUMBER``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from tether import regex as rx
from tether.grammar.json_schema.nodes import known

# the unbounded lexemes, recorded with their nodes built as the regex parser builds them
_DIGIT = rx.byte_range(0x30, 0x39)
_SIGN = rx.repeat(rx.literal("-"), 0, 1)
_NATURAL = rx.alt(rx.literal("0"), rx.concat(rx.byte_range(0x31, 0x39), rx.star(_DIGIT)))
_NUMBER_TAIL = rx.concat(
    rx.repeat(rx.concat(rx.literal("."), rx.plus(_DIGIT)), 0, 1),
    rx.repeat(rx.concat(rx.byte_set(0x45, 0x65), rx.repeat(rx.byte_set(0x2B, 0x2D), 0, 1), rx.plus(_DIGIT)), 0, 1),
)
INTEGER = known(r"-?(?:0|[1-9][0-9]*)", rx.concat(_SIGN, _NATURAL), fixed=True)
NUMBER = known(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?", rx.concat(_SIGN, _NATURAL, _NUMBER_TAIL),
               fixed=True)
NATURAL = r"(?:0|[1-9][0-9]*)"
_FRACTION = r"(?:\.[0-9]+)?"
NEVER = r"[^\x00-\U0010ffff]"


def _digits(lo: str, hi: str) -> str:
    return lo if lo == hi else f"[{lo}-{hi}]" if int(hi) > int(lo) + 1 else f"[{lo}{hi}]"


def _d(n: int) -> str:
    return "" if n == 0 else "[0-9]" if n == 1 else f"[0-9]{{{n}}}"


def _same_length(x: str, y: str) -> list[str]:
    """Alternatives for digit strings s with len(s) == len(x) == len(y), x <= s <= y."""
    if x == y:
        return [x]
    k = 0
    while x[k] == y[k]:
        k += 1
    prefix, x, y = x[:k], x[k:], y[k:]
    n = len(x) - 1
    if n == 0:
        return [prefix + _digits(x, y)]
    out = []
    lo_first, hi_first = int(x[0]), int(y[0])
    if x[1:] == "0" * n:
        start = lo_first
    else:
        out += [prefix + x[0] + a for a in _same_length(x[1:], "9" * n)]
        start = lo_first + 1
    if y[1:] == "9" * n:
        end = hi_first
    else:
        end = hi_first - 1
    if start <= end:
        out.append(prefix + _digits(str(start), str(end)) + _d(n))
    if y[1:] != "9" * n:
        out += [prefix + y[0] + a for a in _same_length("0" * n, y[1:])]
    return out


def natural_range(lo: int, hi: int | None) -> str:
    """Regex for canonical naturals n with lo <= n <= hi (hi None = unbounded); lo >= 0."""
    assert lo >= 0
    if hi is not None and hi < lo:
        return NEVER
    out: list[str] = []
    a = str(lo)
    top_len = len(str(hi)) if hi is not None else len(a)
    for length in range(len(a), top_len + 1):
        x = a if length == len(a) else "1" + "0" * (length - 1)
        y = str(hi) if hi is not None and length == top_len else "9" * length
        if length == 1 and x == "0" and y == "9":
            out.append("[0-9]")
            continue
        out += _same_length(x, y)
    if hi is None:
        out.append(f"[1-9][0-9]{{{len(a)},}}")
    return out[0] if len(out) == 1 else "(?:" + "|".join(out) + ")"


def integer_range(lo: int | None, hi: int | None) -> str:
    """Regex for canonical JSON integers in ``lo..hi`` (either side may be None)."""
    if lo is None and hi is None:
        return INTEGER
    if lo is not None and hi is not None and hi < lo:
        return NEVER
    parts = []
    # negatives: -m with m in [max(1, -hi), -lo]
    if lo is None or lo < 0:
        m_lo = 1 if hi is None or hi >= 0 else -hi
        m_hi = None if lo is None else -lo
        parts.append("-" + natural_range(m_lo, m_hi))
    if hi is None or hi >= 0:
        parts.append(natural_range(max(0, lo if lo is not None else 0), hi))
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


# --------------------------------------------------------------------------- decimals


def _frac_digits(f: Decimal) -> str:
    """Digits after the point of 0 <= f < 1, without trailing zeros ('' for 0)."""
    if f == 0:
        return ""
    s = format(f, "f")
    return s.split(".")[1].rstrip("0") if "." in s else ""


# A fraction language is (empty_ok, nonempty): whether the digit string may be empty
# (no fraction written) and a regex (or None) for the non-empty digit strings.
Frac = tuple[bool, "str | None"]


def _alts(*xs: str | None) -> str | None:
    parts = [x for x in xs if x is not None]
    return None if not parts else parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _then(first: str, rest: Frac) -> str | None:
    """``first`` followed by a (maybe empty) digit string from ``rest``; None if impossible."""
    empty_ok, tail = rest
    if tail is None:
        return first if empty_ok else None
    return first + (f"(?:{tail})?" if empty_ok else tail)


def _frac_ge(d: str, strict: bool) -> Frac:
    """Digit strings s with 0.s >= 0.d (> if strict)."""
    if not d:
        return (not strict, "[0-9]+" if not strict else "0*[1-9][0-9]*")
    c = int(d[0])
    up = _digits(str(c + 1), "9") + "[0-9]*" if c < 9 else None
    return (False, _alts(up, _then(d[0], _frac_ge(d[1:], strict))))


def _frac_le(d: str, strict: bool) -> Frac:
    """Digit strings s with 0.s <= 0.d (< if strict)."""
    if not d:
        return (not strict, "0+" if not strict else None)
    c = int(d[0])
    down = _digits("0", str(c - 1)) + "[0-9]*" if c > 0 else None
    return (True, _alts(down, _then(d[0], _frac_le(d[1:], strict))))


def _frac_between(d1: str, s1: bool, d2: str, s2: bool) -> Frac:
    """Digit strings s with 0.d1 <(=) 0.s <(=) 0.d2, where 0.d1 <= 0.d2."""
    if not d2:  # upper bound 0, so the lower bound is 0 too
        return (not (s1 or s2), "0+" if not (s1 or s2) else None)
    if (d1[:1] or "0") == d2[0]:
        return (not d1 and not s1, _then(d2[0], _frac_between(d1[1:], s1, d2[1:], s2)))
    a = int(d1[0]) if d1 else 0
    b = int(d2[0])
    low = _then(str(a), _frac_ge(d1[1:], s1) if d1 else (not s1, "[0-9]+" if not s1 else "0*[1-9][0-9]*"))
    mid = _digits(str(a + 1), str(b - 1)) + "[0-9]*" if b > a + 1 else None
    high = _then(str(b), _frac_le(d2[1:], s2))
    return (not d1 and not s1, _alts(low, mid, high))


def _int_with_frac(int_text: str, frac: Frac) -> str | None:
    """``int_text`` followed by an optional ``.digits`` from ``frac``."""
    empty_ok, tail = frac
    if tail is None:
        return int_text if empty_ok else None
    return f"{int_text}(?:\\.{tail})?" if empty_ok else f"{int_text}\\.{tail}"


def _nonneg_decimal(lo: Decimal, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> str:
    """Positional decimals x >= 0 with lo <(=) x <(=) hi; lo >= 0."""
    li = int(lo)
    ld = _frac_digits(lo - li)
    alts: list[str | None] = []
    if hi is not None:
        hi_i = int(hi)
        hd = _frac_digits(hi - hi_i)
        if hi_i == li:
            alts.append(_int_with_frac(str(li), _frac_between(ld, lo_strict, hd, hi_strict)))
        else:
            alts.append(_int_with_frac(str(li), _frac_ge(ld, lo_strict)))
            if hi_i - 1 >= li + 1:
                alts.append(natural_range(li + 1, hi_i - 1) + _FRACTION)
            alts.append(_int_with_frac(str(hi_i), _frac_le(hd, hi_strict)))
    else:
        alts.append(_int_with_frac(str(li), _frac_ge(ld, lo_strict)))
        alts.append(natural_range(li + 1, None) + _FRACTION)
    return _alts(*alts) or NEVER


def decimal_range(
    lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool
) -> str:
    """Regex for positional JSON decimals x in the interval (no exponent; no ``-0``).

    ``lo``/``hi`` None = unbounded; ``*_strict`` = exclusive bound. A '.' is always
    followed by at least one digit; a fraction of zeros is allowed (``1.0``, ``1.50``).
    """
    if lo is not None and hi is not None and (hi < lo or (hi == lo and (lo_strict or hi_strict))):
        return NEVER
    parts = []
    # negative side: x = -m, m > 0, with -hi <(=) m <(=) -lo
    if lo is None or lo < 0:
        m_lo, m_lo_strict = (Decimal(0), True) if hi is None or hi >= 0 else (-hi, hi_strict)
        m_hi, m_hi_strict = (None, False) if lo is None else (-lo, lo_strict)
        body = _nonneg_decimal(m_lo, m_lo_strict, m_hi, m_hi_strict)
        if body != NEVER:
            parts.append("-" + body)
    if hi is None or hi >= 0:
        n_lo, n_lo_strict = (Decimal(0), False) if lo is None or lo < 0 else (lo, lo_strict)
        body = _nonneg_decimal(n_lo, n_lo_strict, hi, hi_strict)
        if body != NEVER:
            parts.append(body)
    if not parts:
        return NEVER
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def multiples_regex(m: int, lo: int | None, hi: int | None, *, limit: int = 2000) -> str | None:
    """Canonical integers in ``lo..hi`` divisible by ``m`` (> 0), or None if too costly.

    Exact by enumeration when the range holds at most ``limit`` multiples, or by the last
    ``k`` digits when ``m`` divides ``10**k`` (m = 2**a * 5**b) and the range is unbounded
    on both sides.
    """
    if m == 1:
        return integer_range(lo, hi)
    if lo is not None and hi is not None:
        first = -(-lo // m) * m
        if first > hi:
            return NEVER
        count = (hi - first) // m + 1
        if count <= limit:
            return "(?:" + "|".join(str(v) for v in range(first, hi + 1, m)) + ")"
        return None
    if lo is not None or hi is not None:
        return None
    k = 0
    while 10**k % m:
        k += 1
        if k > 3:
            return None
    nonzero_small = [str(v) for v in range(m, 10**k, m)]
    tails = [str(v).zfill(k) for v in range(0, 10**k, m)]
    long = f"[1-9][0-9]*(?:{'|'.join(tails)})"
    return "(?:0|-?" + (_alts(*nonzero_small, long) or NEVER) + ")"


# --------------------------------------------------------------------------- digit bounds


@dataclass(frozen=True)
class NumberBounds:
    """Default bounds on the digits of numbers whose schema leaves them unbounded.

    JSON Schema puts no bound on the size of a number, so a grammar that follows it lets
    a model write digits forever. ``compile_json_schema(..., bounded_numbers=True)`` uses
    these defaults (``NumberBounds(...)`` chooses others): at most ``integer_digits``
    digits before the point (19: every int64), ``fraction_digits`` after it (17: every
    double round-trips) and ``exponent_digits`` in an exponent (3: up to e±999). A
    schema's own bounds always win: a ``maximum`` of 10**30 allows 31 digits, a
    ``multipleOf`` of 10**-20 allows 20 fraction digits.
    """

    integer_digits: int = 19
    fraction_digits: int = 17
    exponent_digits: int = 3

    def __post_init__(self) -> None:
        for name in ("integer_digits", "fraction_digits", "exponent_digits"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 10_000:
                raise ValueError(f"NumberBounds.{name} must be an integer from 1 to 10000, got {v!r}")

    def regex(self, *, integer: bool, integer_digits: int = 0, fraction_digits: int = 0) -> str:
        """Numbers of at most ``max(self.integer_digits, integer_digits)`` integer digits
        (and, unless ``integer``, at most ``max(self.fraction_digits, fraction_digits)``
        fraction digits and ``exponent_digits`` exponent digits)."""
        i = max(self.integer_digits, integer_digits)
        out = f"-?(?:0|[1-9][0-9]{{0,{i - 1}}})" if i > 1 else "-?[0-9]"
        if not integer:
            f = max(self.fraction_digits, fraction_digits)
            out += f"(?:\\.[0-9]{{1,{f}}})?(?:[eE][+-]?[0-9]{{1,{self.exponent_digits}}})?"
        return out


def digits_of(d: Decimal) -> tuple[int, int]:
    """(integer digits, fraction digits) of ``d`` written positionally, without a sign."""
    d = abs(d).normalize()
    sign, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    n = len(digits)
    if exp >= 0:
        return n + exp, 0
    return max(n + exp, 1), -exp
