"""tether.regex: regex syntax → hash-consed AST → Brzozowski derivatives → lazy byte DFA.

Code map, in reading order: ``charset.py`` (code point sets, UTF-8 byte ranges, Unicode
classes, case folding) → ``escapes.py`` (character-level syntax per flavor) → ``parser.py``
(Python / ECMA-262 pattern → parse tree, ``tree.py``) → ``lowering.py`` (parse tree →
node: anchors, lookarounds) → ``compile.py`` (``parse`` and ``search``, cached) →
``ast.py`` (interned nodes, simplification, ``derivative``, byte classes) → ``dfa.py``
(``LexerDfa`` over a set of terminals, ``matches``, ``is_subset``); ``interning.py``
keeps the table of interned nodes bounded across grammars.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Literal

from .ast import (
    ANY_BYTE,
    ANYTHING,
    EMPTY,
    EPSILON,
    INF,
    Node,
    alt,
    byte_classes,
    byte_range,
    byte_set,
    complement,
    concat,
    derivative,
    intersect,
    literal,
    nullable,
    optional,
    plus,
    repeat,
    star,
)
from .compile import from_tree, parse, parse_tree, search
from .dfa import DEAD, DEFAULT_MAX_STATES, UNKNOWN, LexerDfa
from .language import example, is_empty, is_equivalent, is_subset, matches, random_member
from .lowering import ANY_CHAR, charset_node
from .show import to_string


@dataclass(frozen=True, slots=True)
class Regex:
    """A regex *output constraint*: the generated text must match ``pattern`` as a whole.

    Users build it as ``tether.regex(pattern)`` (this module is callable) or
    ``tether.program.regex(pattern)``; ``generate(..., output=...)`` and grammar
    composition accept it.
    """

    pattern: str
    flavor: Literal["python", "ecma"] = "python"


class _CallableModule(types.ModuleType):
    """Lets ``tether.regex(pattern)`` build a `Regex` while ``tether.regex`` stays the layer."""

    def __call__(self, pattern: str, *, flavor: Literal["python", "ecma"] = "python") -> Regex:
        return Regex(pattern, flavor)


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "ANY_BYTE",
    "ANY_CHAR",
    "ANYTHING",
    "DEAD",
    "DEFAULT_MAX_STATES",
    "EMPTY",
    "EPSILON",
    "INF",
    "UNKNOWN",
    "LexerDfa",
    "Regex",
    "Node",
    "alt",
    "byte_classes",
    "byte_range",
    "byte_set",
    "charset_node",
    "complement",
    "concat",
    "derivative",
    "example",
    "from_tree",
    "intersect",
    "is_empty",
    "is_equivalent",
    "is_subset",
    "literal",
    "matches",
    "nullable",
    "optional",
    "parse",
    "parse_tree",
    "plus",
    "random_member",
    "repeat",
    "search",
    "star",
    "to_string",
]
