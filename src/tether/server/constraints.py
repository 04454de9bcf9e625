"""A request's constraint fields → one `Constraint` → the ``output=`` of `tether.program`.

Accepted fields (at most one of them per request; tools aside):

=====================================================  ===============  ====================
field                                                  kind             ``output=``
=====================================================  ===============  ====================
``response_format: {"type": "json_schema", ...}``      ``json_schema``  the schema dict
``response_format: {"type": "json_object"}``           ``json_object``  ``{"type": "object"}``
``structured_outputs.json`` / ``guided_json``          ``json_schema``  the schema dict
``json_schema`` (llama.cpp server)                     ``json_schema``  the schema dict
``structured_outputs.regex`` / ``guided_regex``        ``regex``        ``regex(pattern)``
``structured_outputs.choice`` / ``guided_choice``      ``choice``       the list of strings
``structured_outputs.grammar`` / ``guided_grammar`` /  ``grammar``      ``Grammar.from_gbnf``
``grammar`` (llama.cpp server; GBNF text)
=====================================================  ===============  ====================

Tools (``tools`` + ``tool_choice``): ``required`` constrains the output to one call
``{"name": <one of the functions>, "arguments": <its parameters schema>}`` (an
``anyOf`` over the functions), a named function to that function's call; ``auto`` (the
default with tools) to the union of that call form and plain text that does not start
with ``{`` or whitespace, so the model's first token picks between them; ``none``
ignores the tools. The functions are described to the model in a system message.

Nothing here runs: `Constraint.output` builds the object `tether.program.output_spec`
lowers, and the server compiles it (with its limits) once per key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.errors import LimitError, SchemaError, limited
from tether.limits import current
from tether.server.protocol import ChatCompletionRequest, CompletionRequest, FunctionDef

Kind = Literal["text", "json_schema", "json_object", "regex", "choice", "grammar", "tool_call", "tool_or_text"]

# Plain text of an `auto` tool answer: not empty, not starting like a call or with a space.
TEXT_ANSWER = r"[^{\s][\s\S]*"


class RequestError(ValueError):
    """A request field that cannot be used; ``param`` names it (dotted path)."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_request") -> None:
        self.param, self.code = param, code
        super().__init__(message)


@dataclass(frozen=True)
class Constraint:
    """What a request asks the output to be.

    Attributes:
        kind: see the module table; ``text`` is no constraint.
        param: the request field it came from (for error messages).
        source: the JSON-safe definition: a schema, a pattern, choices, grammar text, or
            for tools the call schema.
        functions: the tool names the output may call (tool kinds only).
    """

    kind: Kind
    param: str = ""
    source: Any = None
    functions: tuple[str, ...] = ()
    key: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.source, dict | list):  # before anything recurses into it
            maximum = current().max_json_depth
            where = json_depth_pointer(self.source, maximum)
            if where is not None:
                raise LimitError("max_json_depth", maximum + 1, maximum, f"{self.param} {where}")
        text = json.dumps([self.kind, self.source], sort_keys=True, ensure_ascii=False, default=str)
        object.__setattr__(self, "key", text)

    @property
    def is_tools(self) -> bool:
        return self.kind in ("tool_call", "tool_or_text")

    def output(self) -> Any:
        """The ``output=`` value for `tether.program` (lowered and compiled by the caller)."""
        from tether.grammar import Grammar
        from tether.program import regex

        if self.kind == "text":
            return None
        if self.kind in ("json_schema", "json_object", "tool_call"):
            return self.source
        if self.kind == "regex":
            return regex(self.source)
        if self.kind == "choice":
            return list(self.source)
        if self.kind == "grammar":
            return Grammar.from_gbnf(self.source, source="the request's grammar")
        # tool_or_text: a call (JSON) or a text answer
        return Grammar.union(Grammar.from_json_schema(self.source), Grammar.from_regex(TEXT_ANSWER))


TEXT = Constraint("text")


def _schema(value: Any, param: str) -> dict[str, Any] | bool:
    """A schema given as a dict, a boolean, or JSON text."""
    if isinstance(value, str):
        if len(value) > current().max_text_chars:
            raise LimitError("max_text_chars", len(value), current().max_text_chars, param)
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RequestError(f"{param} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                               param, "invalid_schema") from None
    if not isinstance(value, dict | bool):
        raise RequestError(f"{param} must be a JSON Schema (an object or a boolean); got {limited(value)}",
                           param, "invalid_schema")
    return value


def json_depth_pointer(value: Any, maximum: int) -> str | None:
    """The JSON pointer of a place nested deeper than ``maximum`` in ``value``, or None
    (iterative: a hostile document cannot exhaust the stack)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "#")]
    while stack:
        v, depth, ptr = stack.pop()
        if depth > maximum:
            return ptr
        if isinstance(v, dict):
            stack.extend((x, depth + 1, f"{ptr}/{str(k).replace('~', '~0').replace('/', '~1')}")
                         for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, depth + 1, f"{ptr}/{i}") for i, x in enumerate(v))
    return None


def _check_size(c: Constraint) -> Constraint:
    """The constraint's text within ``max_text_chars`` (its depth is checked on creation)."""
    lim = current()
    n = len(c.key)
    if n > lim.max_text_chars:
        raise LimitError("max_text_chars", n, lim.max_text_chars, c.param)
    return c


def _one(found: list[Constraint]) -> Constraint:
    if len(found) > 1:
        names = ", ".join(c.param for c in found)
        raise RequestError(f"give at most one output constraint; this request has {len(found)}: {names}",
                           found[1].param)
    return _check_size(found[0]) if found else TEXT


def _guided(json_: dict[str, Any] | bool | str | None, regex: str | None, choice: list[str] | None,
            grammar: str | None, param: str) -> list[Constraint]:
    """The constraints of vLLM's four fields (``structured_outputs.*``, ``guided_*``) that
    are set, in that order; ``param`` names each (``"guided_{}"``: ``guided_json``...)."""
    out = []
    if json_ is not None:
        out.append(Constraint("json_schema", param.format("json"), _schema(json_, param.format("json"))))
    if regex is not None:
        out.append(Constraint("regex", param.format("regex"), regex))
    if choice is not None:
        out.append(_choices(choice, param.format("choice")))
    if grammar is not None:
        out.append(Constraint("grammar", param.format("grammar"), grammar))
    return out


def _choices(value: list[str], param: str) -> Constraint:
    if not value:
        raise RequestError(f"{param} needs at least one choice", param)
    return Constraint("choice", param, list(value))


def request_constraint(req: ChatCompletionRequest | CompletionRequest) -> Constraint:
    """The output constraint of a request's ``response_format`` / vLLM / llama.cpp fields.

    Raises:
        RequestError: two constraints, or an unusable field; LimitError: past the limits.
    """
    found: list[Constraint] = []
    rf = req.response_format
    if rf is not None and rf.type == "json_schema":
        if rf.json_schema is None:
            raise RequestError("response_format of type json_schema needs a json_schema object",
                               "response_format.json_schema")
        schema = rf.json_schema.schema_
        found.append(Constraint("json_schema", "response_format.json_schema.schema",
                                {} if schema is None else _schema(schema, "response_format.json_schema.schema")))
    elif rf is not None and rf.type == "json_object":
        found.append(Constraint("json_object", "response_format", {"type": "object"}))
    so = req.structured_outputs
    if so is not None:
        found += _guided(so.json_, so.regex, so.choice, so.grammar, "structured_outputs.{}")
        if so.json_object:
            found.append(Constraint("json_object", "structured_outputs.json_object", {"type": "object"}))
    found += _guided(req.guided_json, req.guided_regex, req.guided_choice, req.guided_grammar, "guided_{}")
    if req.json_schema is not None:
        found.append(Constraint("json_schema", "json_schema", _schema(req.json_schema, "json_schema")))
    if req.grammar is not None:
        found.append(Constraint("grammar", "grammar", req.grammar))
    return _one(found)


def call_schema(fn: FunctionDef) -> dict[str, Any]:
    """The JSON Schema of one call of ``fn``: ``{"name": <its name>, "arguments": ...}``."""
    params: dict[str, Any] | bool = fn.parameters if fn.parameters is not None else {"type": "object"}
    return {
        "type": "object",
        "properties": {"name": {"const": fn.name}, "arguments": params},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def chat_constraint(req: ChatCompletionRequest) -> Constraint:
    """The constraint of a chat request, tools included (see the module docstring)."""
    tools = req.tools or []
    choice = req.tool_choice
    if not tools or choice == "none":
        if choice not in (None, "none", "auto"):
            raise RequestError("tool_choice names a tool, but the request has no tools", "tool_choice")
        return request_constraint(req)
    names = [t.function.name for t in tools]
    if len(set(names)) != len(names):
        raise RequestError("two tools have the same function name", "tools")
    for i, t in enumerate(tools):
        if t.function.parameters is not None:
            _schema(t.function.parameters, f"tools[{i}].function.parameters")
    by_name = {t.function.name: t.function for t in tools}
    if choice is None or choice == "auto":
        if request_constraint(req).kind != "text":
            raise RequestError("tool_choice 'auto' cannot be combined with another output constraint; "
                               "use tool_choice 'required' or 'none'", "tool_choice")
        c = Constraint("tool_or_text", "tools", _any_call([by_name[n] for n in names]), tuple(names))
    elif choice == "required":
        c = Constraint("tool_call", "tools", _any_call([by_name[n] for n in names]), tuple(names))
    else:
        fn = by_name.get(choice.function.name)
        if fn is None:
            raise RequestError(f"tool_choice names {choice.function.name!r}, which is not one of the tools "
                               f"({', '.join(names)})", "tool_choice.function.name")
        c = Constraint("tool_call", "tool_choice", call_schema(fn), (fn.name,))
    return _check_size(c)


def _any_call(fns: list[FunctionDef]) -> dict[str, Any]:
    schemas = [call_schema(f) for f in fns]
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def tools_message(req: ChatCompletionRequest, c: Constraint) -> str:
    """The system text describing the callable functions to the model."""
    fns = [t.function for t in req.tools or [] if t.function.name in c.functions]
    listing = json.dumps([{"name": f.name, "description": f.description or "",
                           "parameters": f.parameters or {"type": "object"}} for f in fns],
                         ensure_ascii=False)
    how = ('To call a function, answer with only a JSON object '
           '{"name": <function name>, "arguments": <arguments object>}.')
    if c.kind == "tool_or_text":
        how += " If no function is needed, answer in plain text."
    return f"You can call these functions:\n{listing}\n{how}"


def parse_tool_call(c: Constraint, text: str) -> tuple[str, dict[str, Any]] | None:
    """``(name, arguments)`` when ``text`` is a call of one of ``c``'s functions, else None."""
    if not c.is_tools or not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if (isinstance(value, dict) and value.get("name") in c.functions
            and isinstance(value.get("arguments"), dict)):
        return value["name"], value["arguments"]
    return None


def describe(c: Constraint) -> str:
    """A short name of the constraint for logs and metrics."""
    return c.kind


def schema_error_param(c: Constraint, exc: SchemaError) -> str:
    """The request field and JSON pointer of a schema error."""
    return f"{c.param} ({exc.pointer})" if c.param else exc.pointer
