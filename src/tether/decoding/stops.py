"""Stop sequences: end generation at the first occurrence of any stop text.

`StopScanner` sees the output bytes as they grow and says how much may be shown
already (streaming holds back a tail that could still become a stop text) and where
the output ends when a stop text appears. The stop text itself is not part of the output.
Cost: O(len(new bytes) + longest stop) per feed.
"""

from __future__ import annotations

from collections.abc import Iterable

from tether.errors import ArgumentError


class StopScanner:
    """Track output bytes; find the earliest stop text."""

    __slots__ = ("stops", "text", "hit", "_longest")

    def __init__(self, stops: Iterable[str | bytes] = ()) -> None:
        self.stops = [s.encode() if isinstance(s, str) else bytes(s) for s in stops]
        if any(not s for s in self.stops):
            raise ArgumentError("stop", "", "a non-empty string")
        self._longest = max((len(s) for s in self.stops), default=0)
        self.text = bytearray()
        self.hit: bytes | None = None

    def copy(self) -> StopScanner:
        c = StopScanner.__new__(StopScanner)
        c.stops, c._longest, c.text, c.hit = self.stops, self._longest, bytearray(self.text), self.hit
        return c

    def feed(self, data: bytes) -> bool:
        """Append ``data``; True if a stop text now occurs (``text`` is then cut before it)."""
        if self.hit is not None:
            return True
        start = max(0, len(self.text) - self._longest + 1)
        self.text += data
        if not self.stops:
            return False
        best = -1
        for s in self.stops:
            i = self.text.find(s, start)
            if i >= 0 and (best < 0 or i < best):
                best, self.hit = i, s
        if best >= 0:
            del self.text[best:]
            return True
        return False

    def safe_length(self) -> int:
        """How many bytes of ``text`` can no longer become part of a stop text."""
        if self.hit is not None or not self.stops:
            return len(self.text)
        hold = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.text)), hold, -1):
                if self.text.endswith(s[:k]):
                    hold = k
                    break
        return len(self.text) - hold
