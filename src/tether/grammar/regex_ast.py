"""Read a simple Python-flavor regex into the front-end AST, so the greedy-safe lowering
(``tether.grammar.lower``) can look inside it instead of treating it as one opaque,
greedily lexed terminal.

1. The regex layer's parser (``tether.regex.parser``, the one that compiles the regex)
   reads the pattern into its parse tree;
2. code point sets (literals, classes, ``.``, with case folding already applied),
   sequences, alternations (left-factored alternations of literals too) and counted
   repetitions map to AST nodes;
3. anything else (anchors, look-around, word boundaries, counted repetitions above
   ``MAX_COUNT``, patterns the parser refuses) returns None and the regex stays opaque.

The AST has the same language as the regex (full match), so nothing changes but the
lowering's freedom to split it where greedy lexing would lose a parse.
"""

from __future__ import annotations

from tether.errors import LimitError, RegexError
from tether.grammar.ast import MAX_CP, Cls, Lit, Node, Ranges, Rep, alt, complement, seq
from tether.limits import Limits, current, limits
from tether.regex.ast import INF
from tether.regex.escapes import Flags
from tether.regex.parser import Parser
from tether.regex.tree import Tree, fold_trie

MAX_COUNT = 64  # counted repetitions above this stay opaque (the automata would be large)


class _Unsupported(Exception):
    pass


def _char(ranges: Ranges) -> Node:
    """One character of ``ranges``: a literal if it is one code point, else a class that
    keeps its complement for writing when that is the shorter list (``[^"\\\\]``, ``.``)."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return Lit(chr(ranges[0][0]))
    if not ranges:  # an empty class (``[^\\s\\S]``) matches nothing
        return Cls((), negated_view=((0, MAX_CP),))
    other = complement(ranges)
    return Cls(ranges, negated_view=other) if len(other) < len(ranges) else Cls(ranges)


def _convert(t: Tree) -> Node:
    kind = t[0]
    if kind == "set":
        return _char(t[1])
    if kind == "seq":
        merged: list[Node] = []  # runs of literals become one string
        for x in t[1]:
            it = _convert(x)
            if isinstance(it, Lit) and merged and isinstance(merged[-1], Lit):
                merged[-1] = Lit(merged[-1].text + it.text)
            else:
                merged.append(it)
        return seq(merged)
    if kind == "alt":
        return alt([_convert(x) for x in t[1]])
    if kind == "rep":
        lo, hi = t[2], t[3]
        if lo > MAX_COUNT or (hi != INF and hi > MAX_COUNT):
            raise _Unsupported("large count")
        return Rep(_convert(t[1]), lo, None if hi == INF else hi)
    if kind == "trie":  # an alternation of set sequences, left-factored
        return fold_trie(t[1], lambda k, rest: seq([_char(k), rest]), alt, seq([]))
    raise _Unsupported(kind)  # an assertion


def regex_to_ast(pattern: str, *, flags: str = "", flavor: str = "python") -> Node | None:
    """The AST of ``pattern`` (full-match language), or None if it uses something the
    AST cannot express (then keep the regex as an opaque terminal)."""
    if flavor != "python" or "x" in flags and "#" in pattern:
        return None
    parser = Parser(pattern, "python", Flags(ignore_case="i" in flags, dotall="s" in flags, verbose="x" in flags))
    # Nesting is bounded here by the default depth at least: the AST's consumers (the
    # lowering, the GBNF writer) check it against the limits in force, naming their
    # place, and a grammar built under the defaults stays readable under tighter limits.
    depth = max(current().max_nesting, Limits().max_nesting)
    try:
        with limits(max_nesting=depth):
            tree = parser.parse()
    except (RegexError, LimitError):  # the regex layer reports these when it compiles
        return None
    if parser.assertions:
        return None
    try:
        return _convert(tree)
    except (_Unsupported, RecursionError):
        return None
