"""Errors as the OpenAI API returns them: ``{"error": {"message", "type", "param", "code"}}``.

Every `TetherError` a request causes is a 400 (``invalid_request_error``) whose message
names the place (JSON pointer, regex offset, grammar line/column) and whose ``code`` says
which kind: ``invalid_schema``, ``invalid_regex``, ``invalid_grammar``,
``limit_exceeded``, ``context_length_exceeded``, ``invalid_constraint``, ``model_error``.
A model error that says a retry may help is a 503.
"""

from __future__ import annotations

from typing import Any

from tether.errors import (
    ConstraintError,
    ContextLengthError,
    GrammarError,
    LimitError,
    ModelError,
    RegexError,
    SchemaError,
    TetherError,
)


class HTTPError(Exception):
    """An error response: status and the OpenAI error fields."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | None = None) -> None:
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        super().__init__(message)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def from_exception(exc: BaseException, param: str | None = None) -> HTTPError:
    """The response for an exception raised while handling a request."""
    from tether.server.constraints import RequestError

    if isinstance(exc, HTTPError):
        return exc
    if isinstance(exc, RequestError):
        return HTTPError(400, str(exc), param=exc.param or param, code=exc.code)
    if isinstance(exc, TetherError):
        code = "invalid_constraint"
        if isinstance(exc, LimitError):
            code = "limit_exceeded"
            param = param or exc.place or None
        elif isinstance(exc, ContextLengthError):
            code = "context_length_exceeded"
        elif isinstance(exc, SchemaError):
            code = "invalid_schema"
        elif isinstance(exc, RegexError):
            code = "invalid_regex"
        elif isinstance(exc, GrammarError):
            code = "invalid_grammar"
        elif isinstance(exc, ModelError):
            if exc.retryable:
                return HTTPError(503, str(exc), type="server_error", code="model_busy")
            code = "model_error"
        elif isinstance(exc, ConstraintError):
            code = "invalid_constraint"
        return HTTPError(400, str(exc), param=param, code=code)
    return HTTPError(500, "internal error while handling the request (see the server log)",
                     type="server_error", code="internal_error")
