"""The request bodies the server accepts, as Pydantic models with bounds.

The fields follow the OpenAI API (``/v1/chat/completions``, ``/v1/completions``) plus
the constraint fields other servers accept: vLLM's ``structured_outputs`` (and its older
``guided_*`` names) and llama.cpp server's ``json_schema`` and ``grammar``. Unknown
fields are ignored, as OpenAI-compatible servers do; every known field is checked
(type and range) before anything runs. Hard bounds that depend on the server's options
(``max_tokens``, ``n``, prompt size) are checked by the app against its `Limits`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STOP = 4  # the OpenAI API allows up to 4 stop sequences
MAX_STOP_CHARS = 256
MAX_MESSAGES = 1024
MAX_TOOLS = 128


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class TextPart(_Body):
    type: Literal["text"] = "text"
    text: str


class FunctionCall(_Body):
    name: str = Field(max_length=256)
    arguments: str = ""


class ToolCall(_Body):
    id: str = Field(default="", max_length=256)
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[TextPart] | None = None
    name: str | None = Field(default=None, max_length=256)
    tool_calls: list[ToolCall] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_call_id: str | None = Field(default=None, max_length=256)

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content)


class FunctionDef(_Body):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = Field(default=None, max_length=8192)
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Body):
    type: Literal["function"] = "function"
    function: FunctionDef


class NamedFunction(_Body):
    name: str = Field(max_length=64)


class NamedToolChoice(_Body):
    type: Literal["function"] = "function"
    function: NamedFunction


class JsonSchemaFormat(_Body):
    name: str = Field(default="response", max_length=64)
    description: str | None = None
    # "schema" shadows a BaseModel attribute name: kept under an alias
    schema_: dict[str, Any] | bool | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputs(_Body):
    """vLLM's ``structured_outputs`` field: exactly one of these."""

    json_: dict[str, Any] | bool | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = Field(default=None, max_length=100_000)
    grammar: str | None = None
    json_object: bool | None = None


class StreamOptions(_Body):
    include_usage: bool = False


class _Sampling(_Body):
    model: str = Field(default="", max_length=256)
    max_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=-1)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**64 - 1)
    n: int = Field(default=1, ge=1)
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(default=None, max_length=256)
    # constraint fields beside OpenAI's (see tether.server.constraints)
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | bool | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = Field(default=None, max_length=100_000)
    guided_grammar: str | None = None
    json_schema: dict[str, Any] | bool | None = None
    grammar: str | None = None
    response_format: ResponseFormat | None = None

    def stops(self) -> list[str]:
        """The stop texts (at most 4, each non-empty and short)."""
        s = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return s


class ChatCompletionRequest(_Sampling):
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[Tool] | None = Field(default=None, max_length=MAX_TOOLS)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None


class CompletionRequest(_Sampling):
    prompt: str | list[str] = ""
    logprobs: int | None = Field(default=None, ge=0, le=5)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = Field(default=None, ge=1)
