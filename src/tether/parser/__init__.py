"""Earley parser over lexemes, its lexer, and the byte-level reference recognizer.

Code map, in reading order:

* ``tables.py``: ``ParserTables``, the integer encoding of a grammar (flat dotted rules,
  nullable symbols, prediction closures);
* ``earley.py``: ``EarleyParser``, rows of integer items pushed and popped per lexeme
  (Aycock–Horspool nullable handling, Leo items for right recursion);
* ``terminals.py``: a terminal and its options (lazy, stop, max_len) as one regex node;
* ``lexer.py``: ``Lexer``, one lazy DFA over all terminals, started per allowed set;
* ``byte_parser.py``: ``ByteParser``, lexer + parser byte by byte (greedy lexing,
  lazy terminals, ``%ignore``), the oracle for the mask engine;
* ``tree.py``: ``parse``/``ByteParser.parse_tree``: the parse tree of an accepted text.
"""

from tether.parser.byte_parser import ByteParser, Snapshot, accepts, is_viable_prefix, parse
from tether.parser.earley import EarleyParser
from tether.parser.lexer import DEAD, Lexer
from tether.parser.tables import ParserTables
from tether.parser.tree import Lexeme, Tree

__all__ = [
    "DEAD",
    "ByteParser",
    "EarleyParser",
    "Lexeme",
    "Lexer",
    "ParserTables",
    "Snapshot",
    "Tree",
    "accepts",
    "is_viable_prefix",
    "parse",
]
