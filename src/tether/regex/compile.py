"""Regex pattern text → ``Node``: ``parse`` (the texts a pattern fully matches) and
``search`` (the texts in which it matches somewhere), cached per pattern, flavor, flags
and limits. The work is done by ``parser.py`` (text → tree) and ``lowering.py``
(tree → node).
"""

from __future__ import annotations

from ..errors import LimitError, RegexError
from ..limits import check, current, deadline
from .ast import Node
from .escapes import Flags, Flavor, check_flavor
from .lowering import lower
from .parser import Parser
from .tree import Tree

# (pattern, flavor, ignore_case, dotall, search, the limits checked) -> node. Nodes are immutable and
# interned, so a cached result is the node compiling again would build; patterns recur
# across grammars (JSON strings, numbers, whitespace, formats). Successes only; the
# oldest half is dropped when full.
_COMPILED: dict[tuple[str, str, bool, bool, bool, int, int, int, int, int], Node] = {}
_COMPILED_MAX = 20_000


def _compile(pattern: str, flavor: str, ignore_case: bool, dotall: bool, search: bool) -> Node:
    check_flavor(flavor)
    if not isinstance(pattern, str):
        raise RegexError(f"pattern must be str; got {type(pattern).__name__}")
    lim = current()  # the limits a pattern is checked against are part of the key
    key = (pattern, flavor, bool(ignore_case), bool(dotall), search,
           lim.max_text_chars, lim.max_nesting, lim.max_repeat, lim.max_expanded,
           lim.max_alternatives)
    node = _COMPILED.get(key)
    if node is None:
        check("max_text_chars", len(pattern), "regex pattern")
        try:
            with deadline("regex"):
                node = _compile_uncached(pattern, flavor, ignore_case, dotall, search)
        except RecursionError:
            # not reached within the default limits (nesting is bounded by max_nesting and
            # the passes walk sequences without recursion); a last guard for raised limits
            raise LimitError("max_nesting", "a pattern nested too deeply to lower",
                             current().max_nesting, "regex pattern") from None
        if len(_COMPILED) >= _COMPILED_MAX:
            for k in list(_COMPILED)[: _COMPILED_MAX // 2]:
                del _COMPILED[k]
        _COMPILED[key] = node
    return node



def _compile_uncached(pattern: str, flavor: str, ignore_case: bool, dotall: bool, search: bool) -> Node:
    parser = Parser(pattern, flavor, Flags(ignore_case=ignore_case, dotall=dotall))
    tree = parser.parse()
    return lower(tree, pattern, flavor, search, assertions=parser.assertions)


def parse_tree(
    pattern: str,
    *,
    flavor: Flavor = "python",
    ignore_case: bool = False,
    dotall: bool = False,
    multiline: bool = False,
    verbose: bool = False,
) -> tuple[Tree, bool]:
    """The parse tree of ``pattern`` (``tree.py``) and whether it holds an assertion (an
    anchor, a word boundary or a lookaround), for makers that build a larger tree around
    it and lower that once with ``from_tree`` (a lookaround is then judged on the whole
    text, as in the pattern the larger tree spells).

    Raises:
        RegexError: as ``parse``; LimitError: the pattern's size, nesting or counts.
    """
    check_flavor(flavor)
    if not isinstance(pattern, str):
        raise RegexError(f"pattern must be str; got {type(pattern).__name__}")
    check("max_text_chars", len(pattern), "regex pattern")
    parser = Parser(pattern, flavor, Flags(ignore_case=ignore_case, dotall=dotall,
                                           verbose=verbose, multiline=multiline))
    with deadline("regex"):
        tree = parser.parse()
    return tree, parser.assertions


def from_tree(tree: Tree, *, assertions: bool, flavor: Flavor = "python", pattern: str = "") -> Node:
    """The node for the texts ``tree`` fully matches, as ``parse`` lowers a pattern's tree
    (``pattern``, the text the tree spells, only names places in errors).

    Raises:
        RegexError: an assertion the lowering refuses; LimitError: the time limit.
    """
    check_flavor(flavor)
    try:
        with deadline("regex"):
            return lower(tree, pattern, flavor, False, assertions=assertions)
    except RecursionError:
        raise LimitError("max_nesting", "a tree nested too deeply to lower",
                         current().max_nesting, "regex tree") from None


def parse(
    pattern: str,
    *,
    flavor: Flavor = "python",
    ignore_case: bool = False,
    dotall: bool = False,
) -> Node:
    """Compile ``pattern`` to a node matching exactly the UTF-8 texts it *fully* matches.

    ``re.fullmatch(pattern, text)`` succeeds iff ``text.encode()`` is in the language
    (``flavor="python"``); ``flavor="ecma"`` follows ECMA-262 (``\\d \\w`` ASCII, ``.`` stops
    at any line terminator, Annex B leniency). Anchors at the ends are allowed.

    Cost: parsing and lowering on the first call; results are cached by (pattern,
    flavor, flags), so a pattern seen before (in any grammar of the process) is a dict
    lookup.

    Raises:
        RegexError: bad syntax or a non-regular feature; the message names the offset.
    """
    return _compile(pattern, flavor, ignore_case, dotall, False)


def search(
    pattern: str,
    *,
    flavor: Flavor = "ecma",
    ignore_case: bool = False,
    dotall: bool = False,
) -> Node:
    """A node for the texts in which ``pattern`` matches *somewhere* (``re.search``).

    This is what a JSON Schema ``pattern`` means (hence ``flavor="ecma"`` by default):
    unanchored sides may be surrounded by any text, ``^``/``$`` pin the match to an end.
    Cached as ``parse``.

    Raises:
        RegexError: as ``parse``.
    """
    return _compile(pattern, flavor, ignore_case, dotall, True)
