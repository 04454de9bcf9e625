"""Prefix viability for Python regexes: can ``text`` still be extended to a full match?

Used by ``REGEX(VAR, pattern)`` and ``[VAR: r"..."]`` holes when the Follow rule of a
regex constraint is evaluated per candidate token: a token is masked exactly when the
value with it is no longer a prefix of any string of the pattern's language.

The check walks the pattern parsed by Python's own ``re`` parser with backtracking;
reaching the end of ``text`` anywhere inside the pattern means "viable". Constructs
that are not regular (backreferences, lookaround, word boundaries) are treated as
matching anything, which keeps the check *sound* (it never rejects a viable prefix)
at the price of completeness. Cost: worst case exponential in nested repeats, linear
for the patterns queries use (fixed-width fields, classes, simple repeats).
"""

from __future__ import annotations

import re
import re._constants as C  # type: ignore[import-not-found]
import re._parser as P  # type: ignore[import-not-found]
from collections.abc import Callable
from functools import lru_cache

_CATS: dict[object, Callable[[str], bool]] = {
    C.CATEGORY_DIGIT: str.isdigit,
    C.CATEGORY_NOT_DIGIT: lambda c: not c.isdigit(),
    C.CATEGORY_SPACE: str.isspace,
    C.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    C.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    C.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
    C.CATEGORY_LINEBREAK: lambda c: c == "\n",
    C.CATEGORY_NOT_LINEBREAK: lambda c: c != "\n",
}


def _in_set(items: list[tuple[object, object]], ch: str, icase: bool) -> bool:
    neg = False
    hit = False
    code = ord(ch)
    alts = {code, ord(ch.lower()), ord(ch.upper())} if icase else {code}
    for op, av in items:
        if op is C.NEGATE:
            neg = True
        elif op is C.LITERAL:
            hit = hit or av in alts
        elif op is C.RANGE:
            bounds: tuple[int, int] = av  # type: ignore[assignment]
            hit = hit or any(bounds[0] <= a <= bounds[1] for a in alts)
        elif op is C.CATEGORY:
            hit = hit or _CATS.get(av, lambda c: True)(ch)
        else:  # unknown: be permissive (sound)
            hit = True
    return hit != neg


class PrefixRegex:
    """A compiled pattern with ``viable(text)`` and ``fullmatch(text)``."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._re = re.compile(pattern, flags)
        self._tree = P.parse(pattern, flags)
        self._icase = bool(self._re.flags & re.IGNORECASE)
        self._dotall = bool(self._re.flags & re.DOTALL)

    def fullmatch(self, text: str) -> bool:
        return self._re.fullmatch(text) is not None

    def viable(self, text: str) -> bool:
        """True if some continuation of ``text`` is in the language (sound, see module doc)."""
        n = len(text)
        icase, dotall = self._icase, self._dotall
        budget = [200_000]

        def seq(items: list, i: int, pos: int, cont: Callable[[int], bool]) -> bool:
            budget[0] -= 1
            if budget[0] < 0:
                return True  # give up soundly
            if pos >= n:
                return True
            if i == len(items):
                return cont(pos)
            op, av = items[i]
            nxt = lambda p: seq(items, i + 1, p, cont)  # noqa: E731
            ch = text[pos]
            if op is C.LITERAL:
                return (ch == chr(av) or (icase and ch.lower() == chr(av).lower())) and nxt(pos + 1)
            if op is C.NOT_LITERAL:
                return ch != chr(av) and nxt(pos + 1)
            if op is C.ANY:
                return (dotall or ch != "\n") and nxt(pos + 1)
            if op is C.IN:
                return _in_set(av, ch, icase) and nxt(pos + 1)
            if op is C.SUBPATTERN:
                return seq(list(av[-1]), 0, pos, nxt)
            if op is C.BRANCH:
                return any(seq(list(alt), 0, pos, nxt) for alt in av[1])
            if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, hi, sub = av
                body = list(sub)

                def rep(count: int, p: int) -> bool:
                    if p >= n:
                        return True
                    if count >= lo and nxt(p):
                        return True
                    if count >= hi:
                        return False
                    return seq(body, 0, p, lambda p2: (p2 > p or count < lo) and rep(count + 1 if p2 > p else max(count + 1, lo), p2))

                return rep(0, pos)
            if op is C.AT:
                if av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
                    return pos == 0 and nxt(pos)
                if av in (C.AT_END, C.AT_END_STRING):
                    return False  # text remains at pos < n
                return nxt(pos)
            if op is C.CATEGORY:
                return _CATS.get(av, lambda c: True)(ch) and nxt(pos + 1)
            # backreferences, lookaround, conditionals: permissive (sound)
            return True

        return seq(list(self._tree), 0, 0, lambda p: p >= n)


@lru_cache(maxsize=256)
def compile_prefix(pattern: str) -> PrefixRegex:
    return PrefixRegex(pattern)
