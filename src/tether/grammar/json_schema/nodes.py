"""Regex-layer nodes of the compiler's lexemes, built from their parts instead of parsed.

The compiler spells every lexeme as regex text: the text stays the terminal's meaning for
printing, GBNF and composition. The pieces whose node it can build directly (whitespace
gaps and punctuation, object keys, alternations of names, string bodies written from
``strings.py``'s AST) are recorded here by their text (``known``); ``spec_node`` gives a
lexeme its node from those, and parses only the texts it holds no node for (a user's
``pattern`` as a ``patternProperties`` region, a custom gap regex).

Each recorded node is the very node the regex layer's parser builds for the text (nodes
are interned, so the tests compare identity): where the parser reshapes what it reads (an
alternation of many literals becomes a trie, ``a|b`` one class), the builders here do the
same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from tether import regex as rx
from tether.errors import LimitError, RegexError
from tether.grammar.ir import LazyNode, expr_node, set_operation
from tether.regex import charset, interning

# text -> its node, or a function building it (built on first use: a lexeme the compiler
# spells but does not keep costs nothing)
_KNOWN: dict[str, rx.Node | Callable[[], rx.Node]] = {}
_KNOWN_MAX = 1 << 16
# the records made at import (``known(..., fixed=True)``): made again whenever _KNOWN is
# emptied, as no maker will record them again
_FIXED: dict[str, rx.Node] = {}

# the regex parser factors an alternation of at least this many literal branches into a
# trie (A·X | A·Y = A·(X|Y)); below it keeps the branches as they are
TRIE_MIN = 8


def known(text: str, node: rx.Node | Callable[[], rx.Node], *, fixed: bool = False) -> str:
    """Record that ``text`` parses to ``node`` (or to what ``node()`` builds, called on
    first use); return ``text``. ``fixed``: a record made at import (a node, kept
    through every emptying of the records)."""
    if len(_KNOWN) >= _KNOWN_MAX:
        _empty_records()
    _KNOWN[text] = node
    if fixed:
        assert isinstance(node, rx.Node)
        _FIXED[text] = node
    return text


def _empty_records() -> None:
    _KNOWN.clear()
    _KNOWN.update(_FIXED)


def recorded(text: str) -> rx.Node | None:
    """The node recorded for ``text`` (built now if it was recorded as a function)."""
    node = _KNOWN.get(text)
    if node is None or isinstance(node, rx.Node):
        return node
    built = _KNOWN[text] = node()
    return built


known('"', rx.literal('"'), fixed=True)  # the quotes around a string body
known("", rx.EPSILON, fixed=True)  # nothing (a key's text after it, when the colon is a lexeme of its own)


def clear_node_caches() -> None:
    """Empty the records (but the fixed ones) and ``_expr_node``'s memo (see
    ``tether.regex.interning``). The memoized makers that record texts (``length_body``,
    ``_names_regex``, the layout's lexemes) register their memos too, so that a text is
    recorded again when it is made again."""
    _empty_records()
    _expr_node.cache_clear()


interning.memo(clear_node_caches)


def joined(*texts: str) -> str:
    """The regex ``texts`` written one after another, recorded with the concatenation of
    their nodes when each is recorded. The caller keeps the parts apart: no part may end
    with a repeat of what the next starts with (the parser would merge the counts)."""
    text = "".join(texts)
    if text not in _KNOWN and all(t in _KNOWN for t in texts):
        known(text, lambda: rx.concat(*(leaf(t) for t in texts)))
    return text


def group(text: str) -> str:
    """``(?:text)`` (recorded with ``text``'s node, if that is recorded)."""
    out = f"(?:{text})"
    if text in _KNOWN:
        known(out, lambda: leaf(text))
    return out


def leaf(text: str) -> rx.Node:
    """The node of a regex ``text`` of a lexeme: recorded, else parsed (cached by the
    regex layer).

    Raises:
        RegexError, LimitError: as ``tether.regex.parse``.
    """
    node = recorded(text)
    if node is None:
        node = rx.parse(text)
    return node


def spec_node(spec: tuple[Any, ...]) -> rx.Node | None:
    """The node of a lexeme spec (``layout.Spec``), or None for a literal and for a text
    that does not parse (the engine then reports it, naming the terminal, as before)."""
    kind = spec[0]
    if kind == "lit":
        return None
    if len(spec) > 2:
        node: rx.Node = spec[2]
        return node
    try:
        if kind == "rx":
            return leaf(spec[1])
        return _expr_node(spec[1])
    except (RegexError, LimitError):
        return None


def lexeme_node(spec: tuple[Any, ...]) -> rx.Node | LazyNode | None:
    """``spec_node`` for a terminal of the compiler (its lexemes are never empty): a
    node recorded as built, or one built here from a parse; a ``LazyNode`` where every
    text in it is recorded (the node is built from parts when the lexer first needs it,
    and cannot fail: a recorded text's node is its parse)."""
    kind = spec[0]
    if kind == "lit" or len(spec) > 2:
        return spec_node(spec)  # none, or the node recorded with the spec
    value = spec[1]
    if kind == "rx":
        found = _KNOWN.get(value)
        if found is None:
            return spec_node(spec)
        if isinstance(found, rx.Node):
            return found
        return LazyNode(functools.partial(leaf, value), False)
    if _all_recorded(value):
        return LazyNode(functools.partial(_expr_node, value), False)
    return spec_node(spec)


def _all_recorded(tree: tuple[Any, ...]) -> bool:
    """Every regex text in the ``expr`` tree is recorded (``known``)."""
    stack = [tree]
    while stack:
        for a in stack.pop()[1:]:
            if isinstance(a, tuple):
                stack.append(a)
            elif isinstance(a, str) and a not in _KNOWN:
                return False  # (else a count of "repeat" or "except")
    return True


@functools.lru_cache(maxsize=8192)
def _expr_node(tree: tuple[Any, ...]) -> rx.Node:
    """``expr_node`` of a lexeme's tree, by content, and so of each of its subtrees (a
    key language is asked for by ``body_nonempty`` and by the terminals of the first and
    later keys, each around it; errors are not cached)."""
    op = tree[0]
    if op in ("except", "repeat"):
        built: rx.Node = expr_node(tree, leaf)
        return built
    return set_operation(op, [_expr_node(a) if isinstance(a, tuple) else leaf(a) for a in tree[1:]])


def words_node(words: Sequence[str]) -> rx.Node:
    """The node of the alternation ``w1|w2|...`` of the literal texts ``words`` (each
    written with every character escaped: one character, one class), as the parser
    builds it: one class if every word is one character, a trie from ``TRIE_MIN`` words
    on, else the union of the literals."""
    if len(words) == 1:
        return rx.literal(words[0])
    if all(len(w) == 1 for w in words):
        return rx.charset_node(charset.of_chars("".join(words)))
    if len(words) < TRIE_MIN:
        return rx.alt(*(rx.literal(w) for w in words))
    return _trie_node(sorted(set(words)))


def _trie_node(words: list[str]) -> rx.Node:
    """The trie of the sorted, distinct ``words``: a group of words sharing their first
    ``d`` characters is the union of ``EPSILON`` (a word ending there: the group's first)
    and, per character at ``d``, that character before its subgroup's node; a subgroup
    of one word is the literal of the rest of it. ``alt`` orders its members itself, so
    this is the node the parser's trie builds (the tests check identity). Groups are
    ranges of ``words``; children first, without recursion (a shared prefix may be long).
    One word's tail (most of a trie of names) costs one ``literal``: no node per
    character of the walk, as a trie of dictionaries would."""
    runs_of: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    built: dict[tuple[int, int, int], rx.Node] = {}
    stack = [(0, len(words), 0)]
    while stack:
        group = stack[-1]
        lo, hi, d = group
        runs = runs_of.get(group)
        if runs is None:
            runs = runs_of[group] = []
            i = lo + 1 if len(words[lo]) == d else lo
            while i < hi:
                ch, j = words[i][d], i + 1
                while j < hi and words[j][d] == ch:
                    j += 1
                runs.append((i, j))
                i = j
            pending = [(i, j, d + 1) for i, j in runs if j - i > 1]
            if pending:
                stack.extend(pending)
                continue
        stack.pop()
        parts = [rx.literal(words[i][d:]) if j - i == 1 else rx.literal(words[i][d], built[(i, j, d + 1)])
                 for i, j in runs]
        if len(words[lo]) == d:
            parts.append(rx.EPSILON)
        built[group] = parts[0] if len(parts) == 1 else rx.alt(*parts)
    return built[(0, len(words), 0)]
