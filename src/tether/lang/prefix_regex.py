"""Prefix viability for Python regexes: can ``text`` still be extended to a full match?

Used by ``REGEX(VAR, pattern)`` and ``[VAR: r"..."]`` holes when the Follow rule of a
regex constraint is evaluated per candidate token: a token is masked exactly when the
value with it is no longer a prefix of any string of the pattern's language.

The pattern is compiled by tether's own regex layer (`tether.regex.parse`: the exact
language of ``re.fullmatch``, as UTF-8 bytes); ``viable`` follows the Brzozowski
derivatives of the text's bytes and reports a prefix dead only when the derivative is
the empty language. It is iterative (no recursion on the text, whatever its length or
the pattern's nesting) and linear in the new bytes: derivatives are cached on the
nodes, and the node of a recent prefix is reused. Patterns the regex layer refuses as
not regular (backreferences) are checked with Python's ``re`` for full matches and are
*viable* for every prefix, which keeps the check sound (it never rejects a viable
prefix) at the price of completeness.

A pattern Python's ``re`` cannot compile raises `ConstraintError` naming the pattern and
the offset; a pattern past the `Limits` raises `LimitError`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tether.errors import ConstraintError, RegexError, RegexLimitError, limited
from tether.regex import EMPTY, Node, derivative, nullable, parse

_PREFIX_CACHE = 1024  # prefixes whose derivative node is kept (per pattern)
_REUSE = 32  # how far back a cached prefix is looked for


class PrefixRegex:
    """A compiled pattern with ``viable(text)`` and ``fullmatch(text)``."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        if not isinstance(pattern, str):
            raise ConstraintError(f"a REGEX pattern must be a string; got {type(pattern).__name__} {limited(pattern)}")
        self.pattern = pattern
        try:
            self._re = re.compile(pattern, flags)
        except re.error as exc:
            where = f" at offset {exc.pos}" if exc.pos is not None else ""
            raise ConstraintError(f"invalid REGEX pattern {limited(pattern)}: {exc.msg}{where}") from None
        except (RecursionError, MemoryError, OverflowError):
            raise ConstraintError(f"REGEX pattern {limited(pattern)} is too deeply nested or too large") from None
        self._node: Node | None
        try:
            self._node = parse(pattern, ignore_case=bool(self._re.flags & re.IGNORECASE),
                               dotall=bool(self._re.flags & re.DOTALL))
        except RegexLimitError:
            raise
        except RegexError:  # not regular (backreferences): full matches by re, prefixes permissive
            self._node = None
        self._prefixes: dict[str, Node] = {}

    def _walk(self, text: str) -> Node:
        """The derivative of the pattern by the UTF-8 bytes of ``text``."""
        assert self._node is not None
        cache = self._prefixes
        node, start = self._node, 0
        for k in range(min(_REUSE, len(text)) + 1):
            hit = cache.get(text[: len(text) - k])
            if hit is not None:
                node, start = hit, len(text) - k
                break
        for b in text[start:].encode():
            node = derivative(node, b)
            if node is EMPTY:
                break
        if len(cache) >= _PREFIX_CACHE:
            cache.clear()
        cache[text] = node
        return node

    def fullmatch(self, text: str) -> bool:
        if self._node is None:
            return self._re.fullmatch(text) is not None
        return nullable(self._walk(text))

    def viable(self, text: str) -> bool:
        """True if some continuation of ``text`` is in the language (sound, see module doc)."""
        if self._node is None:
            return True
        return self._walk(text) is not EMPTY


@lru_cache(maxsize=256)
def compile_prefix(pattern: str) -> PrefixRegex:
    return PrefixRegex(pattern)
