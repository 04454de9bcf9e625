"""Where a byte of a JSON text is: inside a key, a string value, a number, or between values.

``Scanner().feed(prefix)`` reads a prefix once; ``.copy().feed(token, record=True)``
then reports what the token's bytes do after it (``events``), for the differential tests'
classification of mask differences. Lenient: text that is not JSON is read as far as it
goes. Cost: linear in the bytes fed.
"""

from __future__ import annotations

import copy

WS = b" \t\n\r"


class Scanner:
    def __init__(self) -> None:
        self.events: set[str] = set()  # what the recorded bytes did
        self.ws_run = 0  # whitespace run before the end (outside strings)
        self.max_ws_run = 0  # longest whitespace run reaching into recorded bytes
        self.in_string = False
        self.in_key = False
        self.expect_key = False  # in an object, where a key may start
        self.stack: list[int] = []  # ord("{") / ord("[")
        self.esc = 0  # 1 after a backslash, >1 inside \\uXXXX
        self.num = False
        self.text = b""  # the current string's bytes so far (escapes kept)

    def copy(self) -> Scanner:
        s = copy.copy(self)
        s.events = set()
        s.stack = list(self.stack)
        s.max_ws_run = 0
        return s

    def feed(self, data: bytes, *, record: bool = False) -> Scanner:
        ev = self.events
        for b in data:
            if self.in_string:
                self.text += bytes([b])
                if self.esc == 1:
                    self.esc = 5 if b == 0x75 else 0
                    if record:
                        ev.add("escape_u" if b == 0x75 else f"escape_{chr(b)}")
                elif self.esc > 1:
                    self.esc = self.esc - 1 if self.esc > 2 else 0
                elif b == 0x5C:
                    self.esc = 1
                elif b == 0x22:
                    self.in_string = False
                    if record:
                        ev.add("key_end" if self.in_key else "string")
                    self.in_key = False
                    continue
                if record:
                    ev.add("key" if self.in_key else "string")
                    if b == 0x7F:
                        ev.add("del")
                continue
            if b in WS:
                self.ws_run += 1
                self.num = False
                if record:
                    ev.add("ws")
                    self.max_ws_run = max(self.max_ws_run, self.ws_run)
                continue
            self.ws_run = 0
            if b in b"-0123456789" or (self.num and b in b"+.eE"):
                self.num = True
                if record:
                    ev.add("number_form" if b in b".eE+" else "number")
                continue
            self.num = False
            if record:
                ev.add("punct")
            if b == 0x22:
                self.in_string = True
                self.text = b""
                self.in_key = self.expect_key
                self.expect_key = False
                if record:
                    ev.add("key_start" if self.in_key else "string")
            elif b in b"{[":
                self.stack.append(b)
                self.expect_key = b == 0x7B
            elif b in b"}]":
                if self.stack:
                    self.stack.pop()
                self.expect_key = False
            elif b == 0x2C:
                self.expect_key = bool(self.stack) and self.stack[-1] == 0x7B
                if record and self.expect_key:
                    ev.add("object_comma")
            elif b == 0x3A:
                self.expect_key = False
            elif record:
                ev.add("literal")
        return self


def scan(data: bytes, start: int) -> Scanner:
    """What ``data[start:]`` does after ``data[:start]``."""
    return Scanner().feed(data[:start]).copy().feed(data[start:], record=True)
