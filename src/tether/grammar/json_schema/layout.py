"""The output policy: where whitespace goes, and how values are written as text.

Three layouts, each a function of the nesting depth:

* ``compact``: no whitespace at all (``{"a":1,"b":[1,2]}``);
* ``pretty``: ``json.dumps(value, indent=indent)`` (newline + indent after ``{``/``[``/``,``,
  ``": "`` between key and value);
* ``flexible``: any of ``" \\t\\n\\r"``, at most ``max_whitespace`` characters, around every
  ``{ } [ ] , :`` (bounded, so a model cannot loop on whitespace); with ``pattern``, the
  whitespace of every such gap is what that regex matches instead.

Punctuation is fused with its whitespace and, for objects, with the key into one lexeme:
``{"name":``, ``,"age":``, ``}`` (compact). ``dumps`` writes a value in the same policy,
with the canonical escaping of ``strings.py``, integral floats as integers (``1.0`` → ``1``)
and other floats positionally (``1e-07`` → ``0.0000001``); it is what the grammar accepts
for a value (given its schema's property order).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from tether import regex as rx

Whitespace = Literal["compact", "pretty", "flexible"]

# A lexeme spec: ("lit", text) | ("rx", regex) | ("rx", regex, its regex-layer node)
# | ("expr", tuple tree over regexes)
Spec = tuple[Any, ...]


@functools.lru_cache(maxsize=256)
def _parsed(pattern: str) -> rx.Node:
    """The node of one of the layout's own gap regexes (a handful per layout)."""
    return rx.parse(pattern)


@functools.lru_cache(maxsize=1 << 16)
def _key_lexeme(before: str, text: str, after: str) -> Spec:
    """``before`` key ``after`` with its node. An object has one such lexeme per property
    (asked for once per parser state): the node is built once, from the parsed gaps and
    the key's bytes, so that no key is parsed as a regex."""
    node = rx.concat(_parsed(before), rx.literal(text.encode("utf-8"), _parsed(after)))
    return ("rx", before + re.escape(text) + after, node)


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
        return f"[ \\t\\n\\r]{{0,{self.max_whitespace}}}"

    # -- objects (depth = depth of the object itself)
    def open_key(self, depth: int, first: bool) -> tuple[str, str]:
        """(text before the key, text after the key) as regexes."""
        ws = self._ws()
        if self.whitespace == "flexible":
            before = f"\\{{{ws}" if first else f"{ws},{ws}"
            return before, f"{ws}:{ws}"
        if self.whitespace == "pretty":
            pad = "\n" + " " * (self.indent * (depth + 1))
            before = ("{" if first else ",") + pad
            return re.escape(before), re.escape(": ")
        return ("\\{" if first else ","), ":"

    def key_literal(self, depth: int, first: bool, key: str) -> Spec:
        text = dumps_str(key)
        if self.whitespace == "flexible":
            before, after = self.open_key(depth, first)
            if self.pattern is not None:  # a gap regex may look around: parse the whole
                return ("rx", before + re.escape(text) + after)
            return _key_lexeme(before, text, after)
        if self.whitespace == "pretty":
            pad = "\n" + " " * (self.indent * (depth + 1))
            return ("lit", ("{" if first else ",") + pad + text + ": ")
        return ("lit", ("{" if first else ",") + text + ":")

    def close_object(self, depth: int, empty: bool) -> Spec:
        if self.whitespace == "flexible":
            ws = self._ws()
            return ("rx", f"\\{{{ws}\\}}" if empty else f"{ws}\\}}")
        if empty:
            return ("lit", "{}")
        if self.whitespace == "pretty":
            return ("lit", "\n" + " " * (self.indent * depth) + "}")
        return ("lit", "}")

    # -- arrays
    def array_sep(self, depth: int, first: bool) -> Spec:
        if self.whitespace == "flexible":
            ws = self._ws()
            return ("rx", f"\\[{ws}" if first else f"{ws},{ws}")
        if self.whitespace == "pretty":
            pad = "\n" + " " * (self.indent * (depth + 1))
            return ("lit", ("[" if first else ",") + pad)
        return ("lit", "[" if first else ",")

    def close_array(self, depth: int, empty: bool) -> Spec:
        if self.whitespace == "flexible":
            ws = self._ws()
            return ("rx", f"\\[{ws}\\]" if empty else f"{ws}\\]")
        if empty:
            return ("lit", "[]")
        if self.whitespace == "pretty":
            return ("lit", "\n" + " " * (self.indent * depth) + "]")
        return ("lit", "]")

    def value_spec(self, value: Any, depth: int = 0) -> Spec:
        """The lexeme for a literal value (enum/const); whitespace-flexible if the layout is."""
        if self.whitespace != "flexible" or not isinstance(value, (list, tuple, dict)):
            return ("lit", self.dumps(value, depth))
        ws = self._ws()

        def rx(v: Any) -> str:
            if not v and isinstance(v, (list, tuple, dict)):
                return f"\\[{ws}\\]" if isinstance(v, (list, tuple)) else f"\\{{{ws}\\}}"
            if isinstance(v, (list, tuple)):
                return f"\\[{ws}" + f"{ws},{ws}".join(rx(x) for x in v) + f"{ws}\\]"
            if isinstance(v, dict):
                items = (re.escape(dumps_str(str(k))) + f"{ws}:{ws}" + rx(x) for k, x in v.items())
                return f"\\{{{ws}" + f"{ws},{ws}".join(items) + f"{ws}\\}}"
            return re.escape(dumps(v))

        return ("rx", rx(value))

    def dumps(self, value: Any, depth: int = 0) -> str:
        """``value`` as the text this layout writes (flexible writes it compact)."""
        return dumps(value, whitespace=self.whitespace, indent=self.indent, depth=depth)


def dumps_str(s: str) -> str:
    """The canonical JSON text of a string (``json.dumps(s, ensure_ascii=False)``)."""
    return json.dumps(s, ensure_ascii=False)


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
