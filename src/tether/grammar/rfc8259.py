"""JSON text (RFC 8259) as a lexeme grammar: the reference grammar of the parser and
engine tests and benchmarks.

Terminals: punctuation and the three literals, ``STRING`` and ``NUMBER`` as RFC 8259
writes them, ``WS`` (``%ignore``). Rules: ``value``, ``object``, ``members``, ``pair``,
``array``, ``elements``. The recursion of the two lists is a parameter (the same
language either way; parsers see different shapes).
"""

from __future__ import annotations

from typing import Literal

from tether.grammar.ir import NT, Grammar, T, Terminal

STRING = r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
NUMBER = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"

Recursion = Literal["left", "right"]


def json_text(members: Recursion = "left", elements: Recursion = "left") -> Grammar:
    """The grammar of one JSON value with ``%ignore`` whitespace; ``members`` and
    ``elements`` choose how the object and array lists recurse."""
    g = Grammar("value")
    for name, lit in [("LBRACE", "{"), ("RBRACE", "}"), ("LBRACK", "["), ("RBRACK", "]"),
                      ("COMMA", ","), ("COLON", ":"), ("TRUE", "true"), ("FALSE", "false"),
                      ("NULL", "null")]:
        g.add_terminal(Terminal(name, literal=lit))
    g.add_terminal(Terminal("STRING", regex=STRING))
    g.add_terminal(Terminal("NUMBER", regex=NUMBER))
    g.add_terminal(Terminal("WS", regex=r"[ \t\n\r]+"))
    g.ignore.append("WS")
    for alt in ("object", "array"):
        g.add_rule("value", NT(alt))
    for term in ("STRING", "NUMBER", "TRUE", "FALSE", "NULL"):
        g.add_rule("value", T(term))
    g.add_rule("object", T("LBRACE"), T("RBRACE"))
    g.add_rule("object", T("LBRACE"), NT("members"), T("RBRACE"))
    g.add_rule("pair", T("STRING"), T("COLON"), NT("value"))
    _list(g, "members", "pair", members)
    g.add_rule("array", T("LBRACK"), T("RBRACK"))
    g.add_rule("array", T("LBRACK"), NT("elements"), T("RBRACK"))
    _list(g, "elements", "value", elements)
    return g


def _list(g: Grammar, name: str, item: str, recursion: Recursion) -> None:
    g.add_rule(name, NT(item))
    if recursion == "left":
        g.add_rule(name, NT(name), T("COMMA"), NT(item))
    else:
        g.add_rule(name, NT(item), T("COMMA"), NT(name))
