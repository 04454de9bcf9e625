"""Chat message conversion and the error mapping (no model)."""

from __future__ import annotations

import pytest

pytest.importorskip("pydantic")

from tether.errors import (  # noqa: E402
    ConstraintError,
    ContextLengthError,
    GrammarError,
    LimitError,
    ModelError,
    RegexError,
    SchemaError,
)
from tether.server.constraints import RequestError  # noqa: E402
from tether.server.errors import HTTPError, from_exception  # noqa: E402
from tether.server.messages import chat_messages  # noqa: E402
from tether.server.protocol import Message  # noqa: E402


def msgs(*items):
    return [Message.model_validate(m) for m in items]


def test_roles_parts_and_merging() -> None:
    out = chat_messages(msgs(
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": "c"},
    ), tools_text="TOOLS")
    assert out == [{"role": "system", "content": "TOOLS\n\nbe brief"}, {"role": "user", "content": "ab\n\nc"}]


def test_tool_turns() -> None:
    out = chat_messages(msgs(
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "cold"},
    ))
    assert out[1] == {"role": "assistant", "content": '{"name": "weather", "arguments": {"city": "Oslo"}}'}
    assert out[2] == {"role": "user", "content": "Result of weather: cold"}


@pytest.mark.parametrize("exc, status, code", [
    (SchemaError("bad", "#/a"), 400, "invalid_schema"),
    (RegexError("bad", "a(", 1), 400, "invalid_regex"),
    (GrammarError("bad", "x", 0), 400, "invalid_grammar"),
    (LimitError("max_repeat", 5, 3, "offset 2"), 400, "limit_exceeded"),
    (ContextLengthError(10, 20), 400, "context_length_exceeded"),
    (ConstraintError("no"), 400, "invalid_constraint"),
    (ModelError("broken"), 400, "model_error"),
    (ModelError("busy", retryable=True), 503, "model_busy"),
    (RequestError("x", "p"), 400, "invalid_request"),
    (KeyError("secret internals"), 500, "internal_error"),
])
def test_error_mapping(exc, status, code) -> None:
    err = from_exception(exc, "param")
    assert (err.status, err.code) == (status, code)
    body = err.body()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    if status == 500:
        assert "secret" not in body["message"]
    else:
        assert body["message"] == str(exc)


def test_limit_error_place_is_the_param_when_none_given() -> None:
    assert from_exception(LimitError("max_n", 9, 8, "n")).param == "n"
    assert from_exception(LimitError("max_n", 9, 8, "n"), "x").param == "x"
    e = HTTPError(404, "m", code="c")
    assert from_exception(e) is e
