"""The output policy: where whitespace goes, and how values are written as text.

Three layouts, each a function of the nesting depth:

* ``compact``: no whitespace at all (``{"a":1,"b":[1,2]}``);
* ``pretty``: ``json.dumps(value, indent=indent)`` (newline + indent after ``{``/``[``/``,``,
  ``": "`` between key and value);
* ``flexible``: any of ``" \\t\\n\\r"``, at most ``max_whitespace`` characters, around every
  ``{ } [ ] , :`` (bounded, so a model cannot loop on whitespace); with ``pattern``, the
  whitespace of every such gap is what that regex matches instead.

Punctuation is fused with its whitespace into one lexeme and, for objects, with the key:
``{"name":``, ``,"age":``, ``}`` (compact). The flexible layout gives a key a lexeme of its
own between two punctuation lexemes (``{ws`` or ``ws,ws`` before, ``ws:ws`` after, one
terminal each for every key of the grammar: ``Layout.split_keys``): fused there, each key
would be alive in every lexer state of the counted whitespace around its comma (17 states
per gap, each deriving every key of the object), and every key would have its own 34
states of the gaps around its colon (a lexer state names the terminal it accepts). On the
300 dev schemas of JSONSchemaBench the split before the key took the per-token mask mean
from 190 to 143 µs, the one after it the whole workload (compile and every step) 3 %
lower (lexer states filled 135k to 87k), same masks. The key's lexeme is then its string
alone, a literal: its node is built when a lexer state first holds it (a schema's first
mask needs none of its keys). ``dumps`` writes a value in the same policy,
with the canonical escaping of ``strings.py``, integral floats as integers (``1.0`` → ``1``)
and other floats positionally (``1e-07`` → ``0.0000001``); it is what the grammar accepts
for a value (given its schema's property order).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from decimal import Decimal
from json.encoder import encode_basestring  # what json.dumps(s, ensure_ascii=False) calls
from typing import Any, Literal

from tether import regex as rx
from tether.grammar.json_schema.nodes import known
from tether.regex import interning

Whitespace = Literal["compact", "pretty", "flexible"]

# A lexeme spec: ("lit", text) | ("rx", regex) | ("rx", regex, its regex-layer node)
# | ("expr", tuple tree over regexes)
Spec = tuple[Any, ...]


GAP = object()  # a whitespace gap in a lexeme's parts (see ``Layout._lexeme``)


@functools.lru_cache(maxsize=1 << 16)
def _flexible_lexeme(max_ws: int, parts: tuple[object, ...]) -> Spec:
    """The lexeme of ``parts`` (texts, matched literally, and ``GAP``s of at most
    ``max_ws`` whitespace characters) with its node, built from the parts: no regex is
    parsed. No two gaps are adjacent (the parser would merge their counts). The text is
    recorded (``nodes.known``): a lexeme the compiler assembles around it finds its node
    there."""
    text = "".join(_ws_regex(max_ws) if p is GAP else re.escape(str(p)) for p in parts)
    node = _prepend(max_ws, parts, rx.EPSILON)
    return ("rx", known(text, node), node)


interning.memo(_flexible_lexeme.cache_clear)  # it records its texts and holds nodes


def _prepend(max_ws: int, parts: tuple[object, ...], node: rx.Node) -> rx.Node:
    """The node of ``parts`` followed by ``node``."""
    for p in reversed(parts):
        node = rx.concat(_gap_node(max_ws), node) if p is GAP else rx.literal(str(p), node)
    return node


@functools.lru_cache(maxsize=64)
def _gap_node(max_ws: int) -> rx.Node:
    """The node of one gap: at most ``max_ws`` JSON whitespace characters."""
    return rx.repeat(rx.byte_set(9, 10, 13, 32), 0, max_ws)


interning.memo(_gap_node.cache_clear)


def _literal_regex(text: str) -> str:
    """``text`` as a regex, recorded with its node (``nodes.known``)."""
    return known(re.escape(text), rx.literal(text))


def _ws_regex(max_ws: int) -> str:
    return f"[ \\t\\n\\r]{{0,{max_ws}}}"


@dataclass(frozen=True)
class Layout:
    whitespace: Whitespace = "compact"
    indent: int = 2
    max_whitespace: int = 16
    pattern: str | None = None  # flexible: the whitespace regex of one gap

    @property
    def depth_matters(self) -> bool:
        return self.whitespace == "pretty"

    def _ws(self) -> str:
        if self.pattern is not None:
            return f"(?:{self.pattern})"
        return _ws_regex(self.max_whitespace)

    def _lexeme(self, *parts: object) -> Spec:
        """Flexible layout: the lexeme of ``parts`` (texts and ``GAP``s), with its node
        unless the gaps are a custom regex (it may look around: parsed whole)."""
        if self.pattern is None:
            return _flexible_lexeme(self.max_whitespace, parts)
        ws = self._ws()
        return ("rx", "".join(ws if p is GAP else re.escape(str(p)) for p in parts))

    # -- objects (depth = depth of the object itself)
    @property
    def split_keys(self) -> bool:
        """Keys are lexemes of their own after a punctuation lexeme (``{ws`` / ``ws,ws``,
        one terminal for every key of the grammar) in the flexible layout; the other
        layouts, and a custom gap regex (it may look around the key), fuse the
        punctuation into the key. A fused flexible key would put every key of an object
        into each lexer state of the whitespace around its comma (counted: a new state
        per character, each deriving every key)."""
        return self.whitespace == "flexible" and self.pattern is None

    def key_punct(self, depth: int, first: bool) -> Spec:
        """The flexible layout's punctuation before a key: a lexeme of its own when
        ``split_keys``, else the head of the key's lexeme."""
        return self._lexeme("{", GAP) if first else self._lexeme(GAP, ",", GAP)

    def key_colon(self) -> Spec:
        """The flexible layout's colon after a key (``ws:ws``), a lexeme of its own when
        ``split_keys``: one terminal for every key of the grammar."""
        return self._lexeme(GAP, ":", GAP)

    def open_key(self, depth: int, first: bool) -> tuple[str, str]:
        """(text before the key, text after the key) as regexes, in the key's lexeme
        (nothing before it when ``split_keys``: ``key_punct`` is a lexeme of its own)."""
        if self.whitespace == "flexible":
            if self.split_keys:
                return "", ""
            return self.key_punct(depth, first)[1], self._lexeme(GAP, ":", GAP)[1]
        if self.whitespace == "pretty":
            pad = "\n" + " " * (self.indent * (depth + 1))
            return _literal_regex(("{" if first else ",") + pad), _literal_regex(": ")
        return _literal_regex("{" if first else ","), _literal_regex(":")

    def key_literal(self, depth: int, first: bool, key: str) -> Spec:
        """The key's lexeme (with its punctuation unless ``split_keys``)."""
        text = dumps_str(key)
        if self.whitespace == "flexible":
            if self.split_keys:
                # a literal: the lexer builds its node when a state first holds it (the
                # first mask needs none of an object's keys)
                return ("lit", text)
            return self._lexeme(*(("{", GAP) if first else (GAP, ",", GAP)), text, GAP, ":", GAP)
        if self.whitespace == "pretty":
            pad = "\n" + " " * (self.indent * (depth + 1))
            return ("lit", ("{" if first else ",") + pad + text + ": ")
        return ("lit", ("{" if first else ",") + text + ":")

    def close_object(self, depth: int, empty: bool) -> Spec:
        if self.whitespace == "flexible":
            return self._lexeme("{", GAP, "}") if empty else self._lexeme(GAP, "}")
        if empty:
            return ("lit", "{}")
        if self.whitespace == "pretty":
            return ("lit", "\n" + " " * (self.indent * depth) + "}")
        return ("lit", "}")

    # -- arrays
    def array_sep(self, depth: int, first: bool) -> Spec:
        if self.whitespace == "flexible":
            return self._lexeme("[", GAP) if first else self._lexeme(GAP, ",", GAP)
        if self.whitespace == "pretty":
            pad = "\n" + " " * (self.indent * (depth + 1))
            return ("lit", ("[" if first else ",") + pad)
        return ("lit", "[" if first else ",")

    def close_array(self, depth: int, empty: bool) -> Spec:
        if self.whitespace == "flexible":
            return self._lexeme("[", GAP, "]") if empty else self._lexeme(GAP, "]")
        if empty:
            return ("lit", "[]")
        if self.whitespace == "pretty":
            return ("lit", "\n" + " " * (self.indent * depth) + "]")
        return ("lit", "]")

    def value_spec(self, value: Any, depth: int = 0) -> Spec:
        """The lexeme for a literal value (enum/const); whitespace-flexible if the layout is."""
        if type(value) is str:  # the most common value: no layout, no call to ``dumps``
            return ("lit", dumps_str(value))
        if self.whitespace != "flexible" or not isinstance(value, (list, tuple, dict)):
            return ("lit", self.dumps(value, depth))
        parts: list[object] = []

        def write(v: Any) -> None:
            if isinstance(v, (list, tuple)):
                parts.extend(("[", GAP))
                for i, x in enumerate(v):
                    if i:
                        parts.extend((GAP, ",", GAP))
                    write(x)
                parts.extend((GAP, "]") if v else ("]",))
            elif isinstance(v, dict):
                parts.extend(("{", GAP))
                for i, (k, x) in enumerate(v.items()):
                    if i:
                        parts.extend((GAP, ",", GAP))
                    parts.extend((dumps_str(str(k)), GAP, ":", GAP))
                    write(x)
                parts.extend((GAP, "}") if v else ("}",))
            else:
                parts.append(dumps(v))

        write(value)
        return self._lexeme(*parts)

    def dumps(self, value: Any, depth: int = 0) -> str:
        """``value`` as the text this layout writes (flexible writes it compact)."""
        return dumps(value, whitespace=self.whitespace, indent=self.indent, depth=depth)


def dumps_str(s: str) -> str:
    """The canonical JSON text of a string (``json.dumps(s, ensure_ascii=False)``)."""
    return encode_basestring(s)


def dumps_number(x: int | float) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{x!r} is not a JSON number")
    if x.is_integer():
        return str(int(x))
    s = format(Decimal(repr(x)), "f")
    return s


def dumps(value: Any, *, whitespace: Whitespace = "compact", indent: int = 2, depth: int = 0) -> str:
    """Write ``value`` in the output policy (see the module docstring).

    Object keys keep their order in ``value``; ``depth`` is the nesting level the value
    sits at (pretty layout indents continuation lines by it).
    """
    pretty = whitespace == "pretty"

    def go(v: Any, d: int) -> str:
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, (int, float)):
            return dumps_number(v)
        if isinstance(v, str):
            return dumps_str(v)
        if isinstance(v, (list, tuple)):
            if not v:
                return "[]"
            if pretty:
                pad = "\n" + " " * (indent * (d + 1))
                return "[" + pad + ("," + pad).join(go(x, d + 1) for x in v) + "\n" + " " * (indent * d) + "]"
            return "[" + ",".join(go(x, d + 1) for x in v) + "]"
        if isinstance(v, dict):
            if not v:
                return "{}"
            if pretty:
                pad = "\n" + " " * (indent * (d + 1))
                items = (dumps_str(str(k)) + ": " + go(x, d + 1) for k, x in v.items())
                return "{" + pad + ("," + pad).join(items) + "\n" + " " * (indent * d) + "}"
            return "{" + ",".join(dumps_str(str(k)) + ":" + go(x, d + 1) for k, x in v.items()) + "}"
        raise TypeError(f"{type(v).__name__} is not JSON")

    return go(value, depth)
