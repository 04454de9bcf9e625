"""Request → constraint mapping (no model)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pydantic")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tether.errors import LimitError  # noqa: E402
from tether.limits import limits  # noqa: E402
from tether.program import output_spec  # noqa: E402
from tether.server.constraints import (  # noqa: E402
    RequestError,
    chat_constraint,
    parse_tool_call,
    request_constraint,
    tools_message,
)
from tether.server.protocol import ChatCompletionRequest, CompletionRequest  # noqa: E402

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
MSGS = [{"role": "user", "content": "hi"}]


def chat(**kw):
    return ChatCompletionRequest.model_validate({"messages": MSGS, **kw})


# field -> (expected kind, expected param, expected source)
FIELDS = {
    "response_format_schema": ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}},
                               "json_schema", "response_format.json_schema.schema", SCHEMA),
    "response_format_object": ({"response_format": {"type": "json_object"}}, "json_object", "response_format",
                               {"type": "object"}),
    "so_json": ({"structured_outputs": {"json": SCHEMA}}, "json_schema", "structured_outputs.json", SCHEMA),
    "so_json_text": ({"structured_outputs": {"json": json.dumps(SCHEMA)}}, "json_schema", "structured_outputs.json",
                     SCHEMA),
    "so_regex": ({"structured_outputs": {"regex": "[0-9]+"}}, "regex", "structured_outputs.regex", "[0-9]+"),
    "so_choice": ({"structured_outputs": {"choice": ["a", "b"]}}, "choice", "structured_outputs.choice", ["a", "b"]),
    "so_grammar": ({"structured_outputs": {"grammar": 'root ::= "x"'}}, "grammar", "structured_outputs.grammar",
                   'root ::= "x"'),
    "so_json_object": ({"structured_outputs": {"json_object": True}}, "json_object", "structured_outputs.json_object",
                       {"type": "object"}),
    "guided_json": ({"guided_json": SCHEMA}, "json_schema", "guided_json", SCHEMA),
    "guided_regex": ({"guided_regex": "a+"}, "regex", "guided_regex", "a+"),
    "guided_choice": ({"guided_choice": ["x"]}, "choice", "guided_choice", ["x"]),
    "guided_grammar": ({"guided_grammar": 'root ::= "y"'}, "grammar", "guided_grammar", 'root ::= "y"'),
    "llama_json_schema": ({"json_schema": SCHEMA}, "json_schema", "json_schema", SCHEMA),
    "llama_grammar": ({"grammar": 'root ::= "z"'}, "grammar", "grammar", 'root ::= "z"'),
}


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_each_field_maps_to_its_constraint(name) -> None:
    body, kind, param, source = FIELDS[name]
    for req in (chat(**body), CompletionRequest.model_validate({"prompt": "p", **body})):
        c = request_constraint(req)
        assert (c.kind, c.param, c.source) == (kind, param, source)
        spec = output_spec(c.output())  # lowers through tether.program without a model
        assert spec.grammar is not None


def test_no_constraint_is_text() -> None:
    c = request_constraint(chat())
    assert c.kind == "text" and c.output() is None
    assert request_constraint(chat(response_format={"type": "text"})).kind == "text"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(FIELDS)), unique=True, max_size=4))
def test_at_most_one_constraint(names) -> None:
    body: dict = {}
    so: dict = {}
    for n in names:
        part = FIELDS[n][0]
        if "structured_outputs" in part:
            if set(part["structured_outputs"]) & set(so):
                continue
            so.update(part["structured_outputs"])
        elif "response_format" in part:
            if "response_format" in body:
                continue
            body.update(part)
        else:
            body.update(part)
    if so:
        body["structured_outputs"] = so
    req = chat(**body)
    given_ = len(so) + sum(1 for k in body if k != "structured_outputs")
    if given_ <= 1:
        c = request_constraint(req)
        assert (c.kind == "text") == (given_ == 0)
    else:
        with pytest.raises(RequestError) as e:
            request_constraint(req)
        assert f"has {given_}" in str(e.value)


def test_equal_schemas_share_a_key() -> None:
    a = request_constraint(chat(guided_json={"type": "object", "required": ["a"], "properties": {"a": {}}}))
    b = request_constraint(chat(json_schema={"properties": {"a": {}}, "required": ["a"], "type": "object"}))
    assert a.key == b.key
    assert a.key != request_constraint(chat(guided_json={"type": "array"})).key


def test_bad_schema_text_and_type() -> None:
    with pytest.raises(RequestError) as e:
        request_constraint(chat(guided_json='{"type": '))
    assert e.value.code == "invalid_schema" and "line 1 column" in str(e.value) and e.value.param == "guided_json"
    with pytest.raises(RequestError):
        request_constraint(chat(guided_json="[1, 2]"))
    with pytest.raises(RequestError):
        request_constraint(chat(guided_choice=[]))


def test_size_limit() -> None:
    with limits(max_text_chars=100), pytest.raises(LimitError) as e:
        request_constraint(chat(guided_regex="a" * 200))
    assert e.value.limit == "max_text_chars" and e.value.place == "guided_regex"


WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "time"}}


def test_tools_required_named_auto_none() -> None:
    c = chat_constraint(chat(tools=[WEATHER, TIME], tool_choice="required"))
    assert c.kind == "tool_call" and c.functions == ("weather", "time")
    names = [s["properties"]["name"]["const"] for s in c.source["anyOf"]]
    assert names == ["weather", "time"]
    assert c.source["anyOf"][0]["properties"]["arguments"] == WEATHER["function"]["parameters"]
    assert c.source["anyOf"][1]["properties"]["arguments"] == {"type": "object"}
    c = chat_constraint(chat(tools=[WEATHER, TIME], tool_choice={"type": "function", "function": {"name": "time"}}))
    assert c.kind == "tool_call" and c.functions == ("time",) and c.source["properties"]["name"] == {"const": "time"}
    c = chat_constraint(chat(tools=[WEATHER]))
    assert c.kind == "tool_or_text"
    assert output_spec(c.output()).grammar is not None
    assert chat_constraint(chat(tools=[WEATHER], tool_choice="none")).kind == "text"
    assert chat_constraint(chat(tools=[WEATHER], tool_choice="none", guided_regex="a")).kind == "regex"
    assert '"weather"' in tools_message(chat(tools=[WEATHER]), chat_constraint(chat(tools=[WEATHER])))


def test_tool_errors() -> None:
    with pytest.raises(RequestError) as e:
        chat_constraint(chat(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}))
    assert e.value.param == "tool_choice.function.name"
    with pytest.raises(RequestError):
        chat_constraint(chat(tools=[WEATHER, WEATHER], tool_choice="required"))
    with pytest.raises(RequestError) as e:
        chat_constraint(chat(tools=[WEATHER], guided_regex="a"))  # auto + another constraint
    assert e.value.param == "tool_choice"
    with pytest.raises(RequestError):
        chat_constraint(chat(tool_choice={"type": "function", "function": {"name": "weather"}}))


def test_parse_tool_call() -> None:
    c = chat_constraint(chat(tools=[WEATHER], tool_choice="required"))
    assert parse_tool_call(c, '{"name":"weather","arguments":{"city":"Oslo"}}') == ("weather", {"city": "Oslo"})
    assert parse_tool_call(c, '{"name":"other","arguments":{}}') is None
    assert parse_tool_call(c, '{"name":"weather","arguments":') is None
    assert parse_tool_call(c, "plain text") is None
    assert parse_tool_call(request_constraint(chat()), '{"name":"weather","arguments":{}}') is None


@pytest.mark.parametrize("body", [
    {"messages": []},
    {"messages": MSGS, "temperature": -1},
    {"messages": MSGS, "temperature": 3},
    {"messages": MSGS, "top_p": 0},
    {"messages": MSGS, "n": 0},
    {"messages": MSGS, "max_tokens": -1},
    {"messages": [{"role": "wizard", "content": "x"}]},
    {"messages": MSGS, "tools": [{"type": "function", "function": {"name": "bad name!"}}]},
    {"messages": MSGS, "response_format": {"type": "xml"}},
    {"messages": MSGS, "top_logprobs": 50},
])
def test_protocol_bounds(body) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate(body)


@pytest.mark.parametrize("field", ["guided_json", "json_schema"])
def test_json_depth_limit_names_the_pointer(field) -> None:
    schema: dict = {}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    with limits(max_json_depth=30), pytest.raises(LimitError) as e:
        request_constraint(chat(**{field: schema}))
    assert e.value.limit == "max_json_depth" and e.value.place.startswith(f"{field} #/items/items")
    with limits(max_json_depth=100):
        assert request_constraint(chat(**{field: schema})).kind == "json_schema"


def test_json_depth_limit_on_tool_parameters() -> None:
    params: dict = {"type": "object"}
    for _ in range(40):
        params = {"type": "object", "properties": {"x": params}}
    tool = {"type": "function", "function": {"name": "deep", "parameters": params}}
    with limits(max_json_depth=30), pytest.raises(LimitError):
        chat_constraint(chat(tools=[tool], tool_choice="required"))
