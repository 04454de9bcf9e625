"""``minLength``/``maxLength``, ``pattern``, ``format``: the string lexeme, and key
languages for ``propertyNames``.

The string-body language (between the quotes, over canonical JSON escaping) is the
intersection of every member's pattern (its search language), format and length
bounds; lengths fold into a single pattern when they can, else they are one more
``and`` part. A body is a regex string, an ``expr`` tuple (``("and", ...)``), None (any
string) or False (no string).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from tether import regex as rx
from tether.errors import SchemaError, limited
from tether.grammar import formats as fmt
from tether.grammar.json_schema import strings as st
from tether.grammar.json_schema.context import Context, Member, at_pointer, ptr
from tether.grammar.json_schema.layout import Spec, dumps_str
from tether.grammar.json_schema.nodes import group, joined, known, spec_node, words_node
from tether.limits import current
from tether.regex import interning

# the body of any string; its node is parsed once, with the module (every object with
# names and further keys spells "any key but these" with it)
ANY_BODY = known(st.render(st.Rep(st.ANY, 0, None)), rx.parse(st.render(st.Rep(st.ANY, 0, None))),
                 fixed=True)
# unconstrained strings accept every JSON escape (\\/ and \\uXXXX too)
_ANY_STRING = '"(?:[^"\\\\\\x00-\\x1f]|\\\\["\\\\/bfnrt]|\\\\u[0-9a-fA-F]{4})*"'
ANY_STRING = known(_ANY_STRING, rx.parse(_ANY_STRING), fixed=True)  # parsed once, with the module


def string_body(c: Context, flat: list[Member]) -> Any:
    """The string-body language: a regex string, an expr tuple, None (any) or False."""
    lo, hi = 0, None
    lo_ptr = hi_ptr = "#"
    pieces: list[tuple[st.Node | str, str]] = []  # AST or a ready regex
    for s, p in flat:
        if "minLength" in s:
            v = s["minLength"]
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                if not (isinstance(v, float) and v.is_integer() and v >= 0):
                    raise SchemaError(f"'minLength' must be a non-negative integer, got {limited(v)}", ptr(p, "minLength"))
            if int(v) > lo:
                lo, lo_ptr = int(v), ptr(p, "minLength")
        if "maxLength" in s:
            v = s["maxLength"]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
                raise SchemaError(f"'maxLength' must be a non-negative integer, got {limited(v)}", ptr(p, "maxLength"))
            if hi is None or int(v) < hi:
                hi, hi_ptr = int(v), ptr(p, "maxLength")
        if "pattern" in s:
            pat = s["pattern"]
            q = ptr(p, "pattern")
            if not isinstance(pat, str):
                raise SchemaError("'pattern' must be a string", q)
            try:
                pieces.append((at_pointer(q, search_language, pat), q))
            except st.PatternError as exc:
                c.unsupported("pattern", q, str(exc))
        if "format" in s:
            f = s["format"]
            q = ptr(p, "format")
            if f in fmt.FORMATS:
                pieces.append((format_language(f), q))
                if f in fmt.MAX_LENGTH and (hi is None or hi > fmt.MAX_LENGTH[f]):
                    hi, hi_ptr = fmt.MAX_LENGTH[f], q
            else:
                c.warn(f"format {limited(f)} is not enforced (at {q})")
    if hi is not None and lo > hi:
        return False
    asts: list[tuple[st.Node | str, str]] = list(pieces)
    # try to fold the length bounds into a single pattern exactly
    need_length = lo > 0 or hi is not None
    if need_length and asts:
        folded = []
        done = False
        for a, q in asts:
            if not done and not isinstance(a, str):
                b = st.with_length(a, lo, hi)
                if b is not None:
                    if b is not a:  # the bounds became a repeat count
                        c.repeat(lo, lo_ptr)
                        if hi is not None:
                            c.repeat(hi, hi_ptr)
                    a, done = b, True
            folded.append((a, q))
        asts = folded
        need_length = not done
    if need_length:
        for bound, q in ((hi, hi_ptr), (lo, lo_ptr)):
            if bound is not None:
                c.repeat(bound, q)
        asts.append((length_body(lo, hi) if hi != 0 else st.rep(st.ANY, lo, hi), lo_ptr))
    if not asts:
        return None
    regexes = []
    for a, _ in asts:
        if isinstance(a, str):
            regexes.append(a)
        elif st.is_empty_language(a):
            return False
        else:
            regexes.append(st.render(a))
    regexes = list(dict.fromkeys(regexes))
    return regexes[0] if len(regexes) == 1 else ("and", *regexes)


def compile_string(c: Context, flat: list[Member], excluded: list[Any] | None = None) -> Spec | None:
    body = string_body(c, flat)
    if body is False:
        return None
    if excluded:
        parts = [ANY_BODY if body is None else body, *(("not", e) for e in excluded)]
        body = ("and", *parts)
        if not body_nonempty(body):
            return None
    elif isinstance(body, tuple) and not body_nonempty(body):
        return None  # constraints that exclude each other (pattern ∧ format ∧ length)
    if body is None:
        return ("rx", ANY_STRING)
    if isinstance(body, str):
        return ("rx", joined('"', wrap(body), '"'))
    return ("expr", ("concat", '"', body, '"'))


def name_body(c: Context, nflat: list[Member]) -> Any:
    """Key-body language for ``propertyNames`` (string keywords and enum/const)."""
    body = string_body(c, nflat)
    if body is False:
        return False
    lits = None
    for s, _ in nflat:
        for kw in ("enum", "const"):
            if kw in s:
                vals = {v for v in ([s[kw]] if kw == "const" else s[kw]) if isinstance(v, str)}
                lits = vals if lits is None else lits & vals
    if lits is None:
        return body
    if not lits:
        return False
    alt = st.render(st.alt(*[st.lit(v) for v in sorted(lits)]))
    return alt if body is None else ("and", body if isinstance(body, str) else body, alt)


def body_nonempty(body: Any) -> bool:
    if isinstance(body, str):
        return True
    try:
        node = spec_node(("expr", ("concat", '"', body, '"')))
        return node is None or not rx.is_empty(node)
    except Exception:  # noqa: BLE001 - keep the region if emptiness cannot be decided
        return True


@functools.lru_cache(maxsize=4096)
def length_body(lo: int, hi: int | None) -> str:
    """The string-body regex of the strings of ``lo`` to ``hi`` characters (``hi`` > 0),
    recorded with its node, the repeat of one character's node (as the parser builds
    it): bounded strings are the most common string lexeme, and parsing each new pair of
    bounds took about 0.3 ms."""
    text = st.render(st.rep(st.ANY, lo, hi))
    return known(text, lambda: rx.repeat(_any_char(), lo, hi))


interning.memo(length_body.cache_clear)  # it records its texts (``known``)


@functools.cache
def _any_char() -> rx.Node:
    """The node of one character of a string body (``st.ANY`` rendered)."""
    return rx.parse(st.render(st.ANY))


@functools.cache
def format_language(name: str) -> st.Node:
    return st.search_language(st.parse_pattern("^(?:" + fmt.FORMATS[name] + ")$"))


@functools.lru_cache(maxsize=4096)
def search_language(pattern: str) -> st.Node:
    """The language of strings ``pattern`` finds (memoized: nodes are immutable; a
    ``PatternError`` is raised again on every call)."""
    return st.search_language(st.parse_pattern(pattern))


@functools.lru_cache(maxsize=4096)
def pattern_body(pattern: str) -> str:
    """The string-body regex of the strings ``pattern`` finds (memoized)."""
    return st.render(search_language(pattern))


@functools.lru_cache(maxsize=4096)
def pattern_re(pattern: str) -> re.Pattern[str]:
    """``st.matches`` of ``pattern``'s language as a compiled Python regex (memoized)."""
    return re.compile(st.render_plain(search_language(pattern)), re.DOTALL)


@functools.lru_cache(maxsize=1 << 16)
def key_body(key: str) -> str:
    """The string-body regex of exactly ``key`` (memoized: every object lists its names):
    ``st.render(st.lit(key))``, which writes a sequence of characters character by
    character (each an atom), so it is assembled here from each character's text."""
    return "".join(map(_char_body, key))


@functools.lru_cache(maxsize=1 << 12)
def _char_body(ch: str) -> str:
    return st.render(st.lit(ch))


def names_regex(names: Iterable[str]) -> str:
    """The string-body regex of exactly the strings ``names`` (``key_body`` of each, as
    alternatives), recorded with its node (``nodes.words_node`` over the canonical JSON
    text of each name: the characters the body regex spells one by one), built on first
    use."""
    return _names_regex(tuple(names))


@functools.lru_cache(maxsize=4096)
def _names_regex(names: tuple[str, ...]) -> str:
    bodies = [key_body(k) for k in names]
    text = "|".join(bodies)
    if any("(?:" in b for b in bodies):  # an escaped character, written as a group
        return text
    lim = current()
    if len(bodies) > lim.max_alternatives or len(text) > lim.max_text_chars:
        return text  # past the regex layer's limits: its parser reports them, as before
    try:
        for k in names:
            k.encode("utf-8")  # a lone surrogate has no UTF-8 text (the regex matches nothing)
    except UnicodeEncodeError:
        return text
    return known(text, lambda: words_node([dumps_str(k)[1:-1] for k in names]))


interning.memo(_names_regex.cache_clear)  # it records its texts (``known``)


def wrap(body: str) -> str:
    """Group a body regex so it can sit between two quotes."""
    return body if "|" not in body else group(body)
