"""The exception tree of tether.

    TetherError
     ├── RegexError (ValueError)            bad or non-regular pattern; pattern, offset, caret
     │    └── RegexLimitError               the lazy DFA grew past its state limit
     ├── GrammarError (ValueError)          bad grammar text or IR; line:column and caret
     ├── SchemaError (ValueError)           invalid JSON Schema; JSON pointer
     │    └── UnsupportedSchemaError        valid schema, keyword tether cannot enforce
     ├── VocabularyError (ValueError)       token bytes do not round-trip
     ├── ArgumentError (ValueError)         an argument of the wrong type or out of range; names it
     ├── ConstraintError (ValueError)       a constraint cannot be compiled for a vocabulary
     ├── LimitError (ValueError)            an input past one of the `tether.limits.Limits`; names
     │                                      the limit, the value, the maximum and the place
     ├── ModelError (RuntimeError)          a model backend failed; ``retryable`` says if a retry may help
     │    ├── ContextLengthError            the tokens do not fit the model's context window
     │    └── ModelArgumentError (ValueError)  a bad load option, token id or spec; names it
     ├── QuerySyntaxError (SyntaxError)     bad query-language program; line:column
     └── MissingDependencyError (ImportError)  an optional extra is not installed; says what to install

Compile time raises; decode time does not: ``Matcher.consume`` returns ``False`` and keeps
``Matcher.error``.
"""

from __future__ import annotations

from typing import Any


class TetherError(Exception):
    """Root of every error tether raises on purpose."""


def caret_context(text: str, offset: int, *, width: int = 100) -> str:
    """Return the line of ``text`` holding ``offset`` with a caret under that column."""
    offset = max(0, min(offset, len(text)))
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    line = text[start : end if end >= 0 else len(text)]
    col = offset - start
    if len(line) > width:  # keep the caret in view on long lines
        lo = max(0, col - width // 2)
        line, col = line[lo : lo + width], col - lo
    return f"    {line}\n    {' ' * col}^"


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def limited(value: object, limit: int = 100) -> str:
    """``repr`` of ``value`` cut to ``limit`` characters, for echoing input in messages."""
    try:
        r = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        r = f"<{type(value).__name__} of about {value.bit_length() * 3 // 10} digits>" if isinstance(value, int) else "<unprintable>"
    return r if len(r) <= limit else r[: limit - 3] + "..."


class RegexError(TetherError, ValueError):
    """A regex that cannot be parsed or is not regular (backreference, lookaround).

    Attributes:
        pattern: the pattern text.
        offset: 0-based character offset of the problem, or -1 if not tied to a place.
    """

    def __init__(self, message: str, pattern: str = "", offset: int = -1) -> None:
        self.pattern, self.offset, self.reason = pattern, offset, message
        if offset >= 0 and pattern:
            message = f"{message} at offset {offset} in pattern\n{caret_context(pattern, offset)}"
        super().__init__(message)


class RegexLimitError(RegexError):
    """The lazy DFA needed more states than its configured limit."""


class GrammarError(TetherError, ValueError):
    """A grammar that cannot be loaded: syntax, undefined/unproductive rules, bad options.

    Attributes:
        line, column: 1-based position, or 0 when not tied to a place.
    """

    def __init__(self, message: str, text: str = "", offset: int = -1, source: str = "") -> None:
        self.reason = message
        self.line = self.column = 0
        if offset >= 0 and text:
            self.line, self.column = line_col(text, offset)
            where = f" in {source}" if source else ""
            message = (
                f"{message}, at line {self.line} column {self.column}{where}\n\n"
                f"{caret_context(text, offset)}"
            )
        super().__init__(message)


class SchemaError(TetherError, ValueError):
    """An invalid JSON Schema (or one that expands past a limit); names the JSON pointer."""

    def __init__(self, message: str, pointer: str = "#") -> None:
        self.pointer, self.reason = pointer, message
        super().__init__(f"{message} (at {pointer})")


class UnsupportedSchemaError(SchemaError):
    """A valid schema keyword that tether cannot enforce; names keyword and pointer."""

    def __init__(self, keyword: str, pointer: str = "#", detail: str = "") -> None:
        self.keyword = keyword
        msg = f"keyword '{keyword}' is not supported"
        if detail:
            msg += f": {detail}"
        super().__init__(msg, pointer)


class VocabularyError(TetherError, ValueError):
    """Token bytes that disagree with the tokenizer, or an unusable vocabulary."""


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


class ArgumentError(TetherError, ValueError):
    """A generation argument of the wrong type or out of range (``n="x"``,
    ``temperature=-1``, ``top_p=2``...). A ``ValueError``.

    Attributes:
        argument: the argument's name (``"top_p"``, ``"stop[2]"``, ``"prompt[0].role"``).
        value: what was given.
        expected: what the argument accepts, in words.
    """

    def __init__(self, argument: str, value: object, expected: str) -> None:
        self.argument, self.value, self.expected = argument, value, expected
        super().__init__(f"{argument} must be {expected}; got {limited(value)} ({_article(type(value).__name__)})")


class ConstraintError(TetherError, ValueError):
    """A constraint that cannot be compiled (e.g. it allows no token sequence)."""


class LimitError(TetherError, ValueError):
    """An input, or the work it causes, exceeds one of the `tether.limits.Limits`.

    Attributes:
        limit: the name of the limit (a field of ``Limits``), e.g. ``"max_repeat"``.
        value: what the input asked for (a number, or a description).
        maximum: the limit in force (None when the limit's own value was bad).
        place: where in the input: ``line 3 column 7``, ``#/properties/a``, ``offset 12``.
    """

    def __init__(self, limit: str, value: object, maximum: object, place: str = "",
                 *, detail: str = "") -> None:
        self.limit, self.value, self.maximum, self.place = limit, value, maximum, place
        if maximum is None:
            message = f"bad limit {limit}={limited(value)}"
        else:
            message = f"{limit} exceeded: {limited(value)} > {maximum}"
        if place:
            message += f" at {place}"
        if detail:
            message += f" ({detail})"
        elif maximum is not None:
            message += f"; raise it with tether.limits.Limits({limit}=...) if the input is trusted"
        super().__init__(message)


class ModelError(TetherError, RuntimeError):
    """A model backend failed. ``retryable`` tells whether trying again may help."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class ContextLengthError(ModelError):
    """The tokens to evaluate do not fit the model's context window.

    Raised by a backend instead of its own exception; decoding ends the output with
    ``finish_reason="length"`` when it happens mid-output, and raises it when the prompt
    alone does not fit. ``n_ctx`` is the window, ``needed`` the tokens asked for.
    """

    def __init__(self, n_ctx: int, needed: int) -> None:
        self.n_ctx, self.needed = n_ctx, needed
        super().__init__(f"context window full: {needed} tokens needed, the model holds {n_ctx}")


class ModelArgumentError(ModelError, ValueError):
    """A bad argument to a model backend: a load option (unknown name, wrong type, out of
    range), a token id outside the vocabulary, an empty token sequence. Names the
    argument. A `ModelError` and a ``ValueError``."""

    def __init__(self, message: str, *, argument: str = "") -> None:
        self.argument = argument
        super().__init__(message)


class QuerySyntaxError(TetherError, SyntaxError):
    """A query-language program that cannot be parsed; names line and column."""

    def __init__(self, message: str, text: str = "", offset: int = -1, source: str = "") -> None:
        self.reason = message
        line = col = 0
        if offset >= 0 and text:
            line, col = line_col(text, offset)
            where = f" in {source}" if source else ""
            message = f"{message}, at line {line} column {col}{where}\n\n{caret_context(text, offset)}"
        super().__init__(message)
        self.lineno, self.offset = line, col


class MissingDependencyError(TetherError, ImportError):
    """An optional dependency is missing; the message says which extra to install."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} is not installed\n→ pip install 'tether[{extra}]'")


def require(module: str, extra: str) -> Any:
    """Import ``module`` or raise MissingDependencyError naming ``extra``. The module is
    returned as Any: its callers read attributes of a library chosen at run time."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module, extra) from exc
