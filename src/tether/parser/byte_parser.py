"""The reference recognizer: lexer and Earley parser driven one byte at a time.

This is the oracle the mask engine is tested against, so it is written for clarity, not
speed. Per byte ``b`` (lexer state ``s`` for the current lexeme, ``n`` bytes long):

1. If ``b`` keeps some terminal alive (``step(s, b)`` is not dead), the lexeme goes on
   (greedy, longest match).
2. Otherwise the lexeme must end before ``b``: it needs ``n > 0`` and some terminal that
   accepts it; the parser scans it (all accepting terminals the parser allows, at once;
   a lexeme matched only by ``%ignore`` terminals is skipped), the lexer restarts from the
   terminals the parser now allows (plus ``%ignore``), and ``b`` must start a new lexeme.
3. If a lazy terminal accepts the lexeme after ``b``, the lexeme ends right there.

The text is accepted when the pending lexeme (if any) can end and the parser accepts.
``is_viable`` is exact for grammars that greedy lexing does not cut short (a viable state
has a live lexer state and a live parser row, and every item of a row can complete).
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.errors import limited
from tether.grammar.ir import Grammar
from tether.parser.earley import EarleyParser, Row
from tether.parser.lexer import DEAD, Lexer
from tether.parser.tables import ParserTables
from tether.parser.tree import Tree, build_tree


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A ByteParser state (``ByteParser.snapshot``)."""

    rows: tuple[Row, ...]
    state: int
    lexeme_start: int
    data: bytes
    lexemes: tuple[tuple[int, int, tuple[int, ...], bool], ...]
    error: str | None


class ByteParser:
    """Recognizes the bytes of a grammar's language, one byte at a time.

    Attributes:
        tables, lexer, parser: the parts it drives.
        data: every byte fed so far.
        lexemes: per finished lexeme, ``(start, end, terminal ids, scanned)``; ``scanned`` is
            False for an ``%ignore``d lexeme (its ids are then the ignore terminals).
        error: why the last ``feed`` failed, or None. Once set, every feed fails.

    ``feed`` never raises on input; it returns False and keeps ``error``.
    """

    def __init__(self, grammar: Grammar | ParserTables, *, lexer: Lexer | None = None) -> None:
        self.tables = (
            grammar if isinstance(grammar, ParserTables) else ParserTables.from_grammar(grammar)
        )
        self.lexer = lexer if lexer is not None else Lexer(self.tables)
        self.parser = EarleyParser(self.tables)
        self.state = self.lexer.start_state(self.parser.allowed_terminals())
        self.lexeme_start = 0
        self.data = bytearray()
        self.lexemes: list[tuple[int, int, tuple[int, ...], bool]] = []
        self.error: str | None = None

    @classmethod
    def resume(cls, tables: ParserTables, lexer: Lexer, parser: EarleyParser, state: int,
               in_lexeme: bool) -> ByteParser:
        """A recognizer that goes on from a state reached elsewhere (the mask engine's):
        ``parser`` (used as is, not copied) after the lexemes so far, ``state`` the lexer
        state of the pending lexeme, ``in_lexeme`` whether that lexeme is non-empty.
        ``data`` then holds only the bytes fed from here (one placeholder byte stands for a
        pending lexeme), so it is for recognizing, not for parse trees."""
        bp = cls.__new__(cls)
        bp.tables, bp.lexer, bp.parser, bp.state = tables, lexer, parser, state
        bp.lexeme_start = 0
        bp.data = bytearray(b"\0" if in_lexeme else b"")
        bp.lexemes = []
        bp.error = None
        return bp

    # -- feeding ---------------------------------------------------------------------------

    def feed(self, data: bytes | str) -> bool:
        """Consume ``data`` (str is UTF-8 encoded). Returns False (and sets ``error``) at the
        first byte that cannot continue any sentence; bytes before it stay consumed.

        Raises:
            RegexLimitError: the lexer DFA needed more states than its limit (not an
                input error: the grammar's terminals are too large for the limit).
        """
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self.error is not None:
            return False
        for b in data:
            if not self._feed_byte(b):
                return False
        return True

    def _feed_byte(self, b: int) -> bool:
        lx = self.lexer
        nxt = lx.step(self.state, b)
        if nxt == DEAD:
            if len(self.data) == self.lexeme_start:
                return self._fail(b, "no allowed terminal starts with it")
            if not self._end_lexeme():
                return self._fail(b, "the lexeme before it matches no allowed terminal")
            nxt = lx.step(self.state, b)
            if nxt == DEAD:
                return self._fail(b, "no allowed terminal starts with it")
        self.state = nxt
        self.data.append(b)
        if lx.ends_now(nxt):
            self._end_lexeme()
        return True

    def _end_lexeme(self) -> bool:
        """Scan the pending lexeme (non-empty). False if no terminal accepts it."""
        acc = self.lexer.accepting(self.state)
        if not acc:
            return False
        allowed = self.parser.allowed_terminals()
        scan = tuple(t for t in acc if t in allowed)
        if scan and not self.parser.push(scan):  # cannot fail: scan ⊆ allowed
            return False
        self.lexemes.append((self.lexeme_start, len(self.data), scan or acc, bool(scan)))
        self.lexeme_start = len(self.data)
        self.state = self.lexer.start_state(self.parser.allowed_terminals())
        return True

    def _fail(self, b: int, why: str) -> bool:
        names = sorted(self.tables.terminals[t].name for t in self.parser.allowed_terminals())
        pending = bytes(self.data[self.lexeme_start :])
        self.error = (
            f"byte {bytes([b])!r} at offset {len(self.data)} is not allowed: {why} "
            f"(pending lexeme {limited(pending, 40)}; the parser allows {limited(names, 200)})"
        )
        return False

    # -- queries ---------------------------------------------------------------------------

    def is_viable(self) -> bool:
        """The bytes so far can still be extended to a sentence."""
        return self.error is None

    def is_accepting(self) -> bool:
        """The bytes so far form a sentence (the pending lexeme ends here)."""
        if self.error is not None:
            return False
        if len(self.data) == self.lexeme_start:
            return self.parser.is_accepting()
        acc = self.lexer.accepting(self.state)
        if not acc:
            return False
        allowed = self.parser.allowed_terminals()
        scan = tuple(t for t in acc if t in allowed)
        if not scan:  # an %ignore lexeme
            return self.parser.is_accepting()
        self.parser.push(scan)
        ok = self.parser.is_accepting()
        self.parser.pop()
        return ok

    def allowed_bytes(self) -> set[int]:
        """Every byte ``b`` such that ``feed(bytes([b]))`` would succeed."""
        if self.error is not None:
            return set()
        lx = self.lexer
        out = {b for b in range(256) if lx.step(self.state, b) != DEAD}
        if len(self.data) > self.lexeme_start:
            acc = lx.accepting(self.state)
            if acc:
                allowed = self.parser.allowed_terminals()
                scan = tuple(t for t in acc if t in allowed)
                if scan:
                    self.parser.push(scan)
                start = lx.start_state(self.parser.allowed_terminals())
                if scan:
                    self.parser.pop()
                out |= {b for b in range(256) if lx.step(start, b) != DEAD}
        return out

    def parse_tree(self) -> Tree:
        """The parse tree of the bytes so far (see ``tether.parser.tree``).

        Raises:
            ValueError: the bytes so far are not a sentence.
        """
        if not self.is_accepting():
            raise ValueError(f"not a sentence: {self.error or 'the text is incomplete'}")
        lexemes = [(s, e, ts) for s, e, ts, scanned in self.lexemes if scanned]
        if len(self.data) > self.lexeme_start:
            allowed = self.parser.allowed_terminals()
            scan = tuple(t for t in self.lexer.accepting(self.state) if t in allowed)
            if scan:
                lexemes.append((self.lexeme_start, len(self.data), scan))
        return build_tree(self.tables, lexemes, bytes(self.data))

    # -- state -----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The whole state, for ``restore``; O(bytes fed)."""
        return Snapshot(
            self.parser.snapshot(),
            self.state,
            self.lexeme_start,
            bytes(self.data),
            tuple(self.lexemes),
            self.error,
        )

    def restore(self, snap: Snapshot) -> None:
        self.parser.restore(snap.rows)
        self.state, self.lexeme_start = snap.state, snap.lexeme_start
        self.data = bytearray(snap.data)
        self.lexemes = list(snap.lexemes)
        self.error = snap.error

    def copy(self) -> ByteParser:
        """An independent recognizer in the same state (tables and lexer shared)."""
        other = ByteParser.__new__(ByteParser)
        other.tables, other.lexer = self.tables, self.lexer
        other.parser = self.parser.copy()
        other.state, other.lexeme_start = self.state, self.lexeme_start
        other.data = bytearray(self.data)
        other.lexemes = list(self.lexemes)
        other.error = self.error
        return other


def _recognizer(grammar: Grammar | ParserTables | ByteParser) -> ByteParser:
    if isinstance(grammar, ByteParser):
        return ByteParser(grammar.tables, lexer=grammar.lexer)
    return ByteParser(grammar)


def accepts(grammar: Grammar | ParserTables | ByteParser, text: bytes | str) -> bool:
    """``text`` is a sentence of ``grammar`` (a ByteParser argument lends its tables)."""
    p = _recognizer(grammar)
    return p.feed(text) and p.is_accepting()


def is_viable_prefix(grammar: Grammar | ParserTables | ByteParser, text: bytes | str) -> bool:
    """``text`` can still be extended to a sentence of ``grammar``."""
    p = _recognizer(grammar)
    return p.feed(text)


def parse(grammar: Grammar | ParserTables | ByteParser, text: bytes | str) -> Tree:
    """The parse tree of ``text`` (one tree if the grammar is ambiguous).

    Raises:
        ValueError: ``text`` is not a sentence of ``grammar``; the message says where.
    """
    p = _recognizer(grammar)
    p.feed(text)
    return p.parse_tree()
