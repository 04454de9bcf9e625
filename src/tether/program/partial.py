"""Partial values of a streamed output: the value as its text grows.

`PartialJson` reads one JSON document incrementally (``feed`` text as it comes, ``value``
at any point) and gives the value decoded so far:

* an object is the dict of the members read so far; a member appears once its value
  starts: a string value as the part read so far (``{"name": "Al`` → ``{"name": "Al"}``),
  an object or array value as the partial container (``{"a": [1`` → ``{"a": []}``);
  a key still being read is not shown;
* an array is the list of the items read so far (the item in progress included, as above);
* a number appears once it is complete: when a character that cannot extend it follows,
  or at `finish` (``[12`` → ``[]``, ``[12,`` → ``[12]``); ``true``, ``false`` and ``null``
  appear once their last letter is read. A number is never shown as a prefix of itself,
  so every partial is a prefix of the final value in this sense: each string is a prefix
  of the final string, each container holds the final one's first members (all equal but
  the last, which is a prefix of its final value), and every other value is final.
* an escape in a string shows once complete (``\\u00e9`` after its fourth hex digit); a
  UTF-16 high surrogate waits for the low one that may follow (as ``json.loads`` joins
  them).

After the whole document (and `finish`), ``value == json.loads(text)``. The reader is a
loop over characters with an explicit stack: no recursion; nesting deeper than the active
``Limits.max_json_depth`` raises `LimitError`, text that is not JSON raises
`PartialJsonError` with its offset. Successive partials share completed members (treat
them as read-only).

`Partials` gives the partial values of an output kind (`tether.program.outputs`): JSON
outputs (a JSON Schema, a Pydantic model, a Python type) through `PartialJson`; text,
regex, choices and grammar outputs as the text so far; a triggered output (``after=``)
as the partials of the constrained part once its trigger has appeared.
"""

from __future__ import annotations

import re
from typing import Any

from tether.errors import LimitError, TetherError, caret_context
from tether.limits import current

__all__ = ["MISSING", "PartialJson", "PartialJsonError", "Partials"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: no value yet (nothing of the value is visible)
MISSING: Any = _Missing()


class PartialJsonError(TetherError, ValueError):
    """Text that is not (a prefix of) one JSON document; ``offset`` is where it stops being one."""

    def __init__(self, message: str, offset: int = -1, context: str = "", caret: int = 0) -> None:
        self.offset = offset
        if offset >= 0:
            message = f"{message} at offset {offset} of the JSON text"
            if context:
                message += "\n" + caret_context(context, caret)
        super().__init__(message)


# reader states
_VALUE, _ARRAY_FIRST, _OBJECT_FIRST, _KEY, _COLON, _AFTER, _STRING, _NUMBER, _LITERAL, _DONE = range(10)

_WS = frozenset(" \t\n\r")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_PLAIN = re.compile(r'[^"\\\x00-\x1f]+')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: dict[str, tuple[str, Any]] = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_HEX = frozenset("0123456789abcdefABCDEF")
_TAIL = 40  # characters of text kept for error messages


class PartialJson:
    """An incremental reader of one JSON document (see the module docstring).

    Args:
        max_depth: the deepest nesting allowed (a value at the top is depth 1, a member
            of a top-level object depth 2); default: the active ``Limits.max_json_depth``.
    """

    def __init__(self, *, max_depth: int | None = None) -> None:
        self.max_depth = current().max_json_depth if max_depth is None else max_depth
        self._stack: list[list[Any]] = []  # frames [container, key]: key of the member being read (objects)
        self._root: Any = MISSING
        self._state = _VALUE
        self._buf: list[str] = []  # the string, number or literal being read
        self._is_key = False
        self._escape = 0  # 0: none, 1: after a backslash, 2: in \uXXXX (hex digits in _hex)
        self._hex = ""
        self._high: int | None = None  # a high surrogate waiting for its low half
        self._offset = 0  # characters read
        self._tail = ""  # the last characters read (for error messages)
        self._error: TetherError | None = None

    # -- reading -------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """The whole document has been read (only whitespace may follow)."""
        return self._state == _DONE

    @property
    def has_value(self) -> bool:
        """Some of the value is visible (`value` is not `MISSING`)."""
        return self._root is not MISSING or (self._state == _STRING and not self._is_key)

    def feed(self, text: str) -> bool:
        """Read ``text`` (the next part of the document); True when the partial value changed.

        Raises PartialJsonError where the text stops being a JSON prefix, LimitError past
        ``max_depth``; after an error the reader refuses more text with the same error.
        """
        if self._error is not None:
            raise self._error
        try:
            return self._feed(text)
        except TetherError as exc:
            self._error = exc
            raise
        finally:
            self._tail = (self._tail + text)[-_TAIL:]

    def finish(self) -> bool:
        """The text has ended: a number at the end of the document is complete.

        True when that changed the value. The document may still be incomplete (see
        `complete`); the value stays the partial one.
        """
        if self._error is not None:
            raise self._error
        if self._state == _NUMBER and not self._stack:
            try:
                self._end_number("", 0)
            except TetherError as exc:
                self._error = exc
                raise
            return True
        return False

    @property
    def value(self) -> Any:
        """The value read so far (`MISSING` while none of it is visible); a fresh snapshot."""
        tail: Any = "".join(self._buf) if self._state == _STRING and not self._is_key else MISSING
        if not self._stack:
            return tail if tail is not MISSING else self._root
        child = tail
        last = len(self._stack) - 1
        for i in range(last, -1, -1):
            container, key = self._stack[i]
            if isinstance(container, list):
                copy: Any = list(container)
                if child is not MISSING:
                    if i == last:
                        copy.append(child)  # the string in progress is not in the list yet
                    else:
                        copy[-1] = child  # the open container is the list's last item
            else:
                copy = dict(container)
                if child is not MISSING:
                    copy[key] = child
            child = copy
        return child

    # -- the state machine ---------------------------------------------------------------

    def _fail(self, what: str, text: str, i: int) -> PartialJsonError:
        """The error at ``text[i]`` (the chunk being read), shown after the text before it."""
        before = (self._tail + text[:i])[-_TAIL:]
        return PartialJsonError(what, self._offset + i, before + text[i : i + 1], len(before))

    def _feed(self, text: str) -> bool:
        changed = False
        i, n = 0, len(text)
        while i < n:
            state = self._state
            if state == _STRING:
                if self._escape == 0:
                    m = _PLAIN.match(text, i)
                    if m is not None:
                        self._flush_high()
                        if not self._is_key:
                            changed = True
                        self._buf.append(m.group())
                        i = m.end()
                        continue
                    c = text[i]
                    if c == '"':
                        changed = (self._flush_high() and not self._is_key) or changed
                        self._end_string()
                    elif c == "\\":
                        self._escape = 1
                    else:
                        raise self._fail("a control character inside a string", text, i)
                elif self._escape == 1:
                    c = text[i]
                    if c == "u":
                        self._escape, self._hex = 2, ""
                    elif c in _ESCAPES:
                        self._flush_high()  # a lone high surrogate shows with this character
                        self._buf.append(_ESCAPES[c])
                        self._escape = 0
                        changed = changed or not self._is_key
                    else:
                        raise self._fail("an invalid escape in a string", text, i)
                else:
                    c = text[i]
                    if c not in _HEX:
                        raise self._fail("an invalid \\u escape in a string", text, i)
                    self._hex += c
                    if len(self._hex) == 4:
                        self._escape = 0
                        changed = self._code_unit(int(self._hex, 16)) or changed
                i += 1
                continue
            c = text[i]
            if state == _NUMBER:
                if c in _NUMBER_CHARS:
                    self._buf.append(c)
                    i += 1
                    continue
                self._end_number(text, i)  # then read c in the state after the number
                changed = True
                continue
            if state == _LITERAL:
                word, value = _LITERALS[self._buf[0]]
                if not word.startswith("".join(self._buf) + c):
                    raise self._fail(f"an invalid literal (expected {word!r})", text, i)
                self._buf.append(c)
                if len(self._buf) == len(word):
                    self._buf = []
                    self._put(value)
                    changed = True
                i += 1
                continue
            i += 1
            if c in _WS:
                continue
            if state in (_VALUE, _ARRAY_FIRST):
                if c == "]" and state == _ARRAY_FIRST:
                    self._close()
                else:
                    self._start_value(c, text, i - 1)
                    changed = changed or c in "{[\""
            elif state in (_OBJECT_FIRST, _KEY):
                if c == '"':
                    self._state, self._is_key, self._buf = _STRING, True, []
                elif c == "}" and state == _OBJECT_FIRST:
                    self._close()
                else:
                    raise self._fail("expected a member name in quotes" + (" or '}'" if state == _OBJECT_FIRST else ""),
                                     text, i - 1)
            elif state == _COLON:
                if c != ":":
                    raise self._fail("expected ':' after a member name", text, i - 1)
                self._state = _VALUE
            elif state == _AFTER:
                container = self._stack[-1][0]
                if c == ",":
                    self._state = _KEY if isinstance(container, dict) else _VALUE
                elif (c == "]" and isinstance(container, list)) or (c == "}" and isinstance(container, dict)):
                    self._close()
                else:
                    raise self._fail("expected ',' or '" + ("]" if isinstance(container, list) else "}") + "'",
                                     text, i - 1)
            else:  # _DONE
                raise self._fail("text after the end of the JSON document", text, i - 1)
        self._offset += n
        return changed

    def _start_value(self, c: str, text: str, i: int) -> None:
        depth = len(self._stack) + 1
        if depth > self.max_depth:
            raise LimitError("max_json_depth", depth, self.max_depth, f"offset {self._offset + i} of the JSON text")
        if c == "{" or c == "[":
            new: Any = {} if c == "{" else []
            self._insert(new)
            self._stack.append([new, None])
            self._state = _OBJECT_FIRST if c == "{" else _ARRAY_FIRST
        elif c == '"':
            self._state, self._is_key, self._buf = _STRING, False, []
        elif c == "-" or "0" <= c <= "9":
            self._state, self._buf = _NUMBER, [c]
        elif c in _LITERALS:
            self._state, self._buf = _LITERAL, [c]
        else:
            raise self._fail("expected a JSON value", text, i)

    def _insert(self, value: Any) -> None:
        """Place ``value`` where the current value goes (the top, an array item, a member)."""
        if not self._stack:
            self._root = value
            return
        container, key = self._stack[-1]
        if isinstance(container, list):
            container.append(value)
        else:
            container[key] = value

    def _put(self, value: Any) -> None:
        """A scalar value is complete."""
        self._insert(value)
        if self._stack:
            self._stack[-1][1] = None
            self._state = _AFTER
        else:
            self._state = _DONE

    def _close(self) -> None:
        self._stack.pop()
        if self._stack:
            self._stack[-1][1] = None
            self._state = _AFTER
        else:
            self._state = _DONE

    def _end_string(self) -> None:
        s = "".join(self._buf)
        self._buf = []
        if self._is_key:
            self._stack[-1][1] = s
            self._state = _COLON
        else:
            self._put(s)

    def _end_number(self, text: str, i: int) -> None:
        s = "".join(self._buf)
        if _NUMBER_RE.fullmatch(s) is None:
            raise self._fail(f"an invalid number {s[:40]!r}", text, i)
        try:
            value: Any = int(s) if s.lstrip("-").isdigit() else float(s)
        except ValueError as exc:  # past Python's digit limit for int()
            raise self._fail(f"a number Python cannot read ({exc})", text, i) from None
        self._buf = []
        self._put(value)

    def _code_unit(self, u: int) -> bool:
        """One \\uXXXX escape: joins a surrogate pair as ``json.loads`` does."""
        if self._high is not None:
            if 0xDC00 <= u <= 0xDFFF:
                self._buf.append(chr(0x10000 + ((self._high - 0xD800) << 10) + (u - 0xDC00)))
                self._high = None
                return not self._is_key
            self._flush_high()
        if 0xD800 <= u <= 0xDBFF:
            self._high = u
            return False
        self._buf.append(chr(u))
        return not self._is_key

    def _flush_high(self) -> bool:
        if self._high is None:
            return False
        self._buf.append(chr(self._high))  # a lone surrogate, kept as json.loads keeps it
        self._high = None
        return True


class Partials:
    """Partial values of one output as its text grows (see the module docstring).

    Args:
        spec: the output's `OutputSpec` (None: free text).
        max_depth: the JSON nesting bound (default: the active ``Limits.max_json_depth``).
    """

    def __init__(self, spec: Any = None, *, max_depth: int | None = None) -> None:
        self.kind = "text" if spec is None else spec.kind
        self._max_depth = max_depth
        self._text: list[str] = []
        self._json = PartialJson(max_depth=max_depth) if self.kind in ("json", "pydantic", "type") else None
        self._after: dict[str, Any] = dict(spec.extra.get("after", {})) if self.kind == "triggered" else {}
        self._inner: Partials | None = None  # the constrained part of a triggered output
        self._seen = ""  # triggered: the text searched for a trigger so far

    @property
    def has_value(self) -> bool:
        if self._inner is not None:
            return self._inner.has_value
        if self._json is not None:
            return self._json.has_value
        return self.kind != "triggered" and bool(self._text)

    @property
    def value(self) -> Any:
        """The partial value (`MISSING` while none is visible)."""
        if self.kind == "triggered":
            return self._inner.value if self._inner is not None else MISSING
        if self._json is not None:
            return self._json.value
        return "".join(self._text) if self._text else MISSING

    def feed(self, chunk: str) -> bool:
        """Read the next chunk of the output's text; True when the partial value changed."""
        if not chunk:
            return False
        if self.kind == "triggered":
            if self._inner is not None:
                return self._inner.feed(chunk)
            return self._find_trigger(chunk)
        if self._json is not None:
            return self._json.feed(chunk)
        self._text.append(chunk)
        return True

    def finish(self) -> bool:
        """The text has ended (see `PartialJson.finish`); True when the value changed."""
        if self._inner is not None:
            return self._inner.finish()
        if self._json is not None:
            return self._json.finish()
        if self.kind != "triggered" and not self._text:
            self._text.append("")  # an empty output: its value is the empty text
            return True
        return False

    def _find_trigger(self, chunk: str) -> bool:
        from tether.program.outputs import first_trigger

        longest = max(len(t) for t in self._after)
        start = max(0, len(self._seen) - longest + 1)
        self._seen += chunk
        trigger, end = first_trigger(self._seen[start:], list(self._after))
        if trigger is None:
            self._seen = self._seen[-longest:]  # only a trigger's worth is needed to find one later
            return False
        self._inner = Partials(self._after[trigger], max_depth=self._max_depth)
        rest = self._seen[start + end:]
        self._seen = ""
        self._inner.feed(rest)
        return self._inner.has_value
