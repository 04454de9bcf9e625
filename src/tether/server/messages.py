"""OpenAI chat messages → the ``{"role", "content"}`` list `tether.program` renders with
the model's own chat template.

* content parts (``[{"type": "text", "text": ...}]``) are joined;
* ``developer`` is a ``system`` message;
* an assistant message with ``tool_calls`` is written as the call's JSON (the form the
  model is asked to answer in), a ``tool`` (or ``function``) message as a user message
  ``Result of <function>: <content>``;
* a description of the tools becomes (the start of) the system message;
* consecutive messages of one role are joined with a blank line, since many templates
  (Gemma's among them) require user and assistant turns to alternate.
"""

from __future__ import annotations

import json

from tether.server.protocol import Message


def chat_messages(messages: list[Message], *, tools_text: str = "") -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    call_names: dict[str, str] = {}
    if tools_text:
        out.append({"role": "system", "content": tools_text})
    for m in messages:
        role = m.role
        content = m.text()
        if role == "developer":
            role = "system"
        elif role == "assistant" and m.tool_calls:
            calls = []
            for tc in m.tool_calls:
                call_names[tc.id] = tc.function.name
                try:
                    args = json.loads(tc.function.arguments or "{}")
                except json.JSONDecodeError:
                    args = tc.function.arguments
                calls.append(json.dumps({"name": tc.function.name, "arguments": args}, ensure_ascii=False))
            content = "\n".join(([content] if content else []) + calls)
        elif role in ("tool", "function"):
            name = m.name or call_names.get(m.tool_call_id or "", "") or "the function"
            role, content = "user", f"Result of {name}: {content}"
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + content
        else:
            out.append({"role": role, "content": content})
    return out
