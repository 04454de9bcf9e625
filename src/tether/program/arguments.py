"""Checks of `generate`'s arguments: types, ranges and `tether.limits.Limits`.

Every argument may come from a stranger (a server request passes them through), so each
is checked before any work starts: a wrong type or a value out of range raises
`ArgumentError` (a ``ValueError``) naming the argument and what it accepts; a value past
a limit raises `LimitError` (``max_tokens``, ``max_n``, ``max_batch``,
``max_prompt_chars``). Decoder fields are checked by the decoder values themselves
(`tether.decoding.decoders`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tether import limits
from tether.decoding.decoders import check_bool, check_int, check_number, check_seed
from tether.errors import ArgumentError
from tether.limits import Limits

Prompt = str | list[dict[str, str]]
PROMPT_EXPECTED = "a string, a list of chat messages ({'role', 'content'} dicts), or a non-empty list of those"


def check_messages(messages: Sequence[Any], place: str = "prompt") -> list[dict[str, str]]:
    """Chat messages as plain dicts: each a mapping with string ``role`` and ``content``."""
    if not messages:
        raise ArgumentError(place, messages, "a non-empty list of chat messages")
    out = []
    for i, m in enumerate(messages):
        where = f"{place}[{i}]"
        if not isinstance(m, Mapping):
            raise ArgumentError(where, m, "a chat message: a dict with 'role' and 'content'")
        for key in ("role", "content"):
            if key not in m:
                raise ArgumentError(where, dict(m), f"a chat message with a {key!r} key")
            if not isinstance(m[key], str):
                raise ArgumentError(f"{where}.{key}", m[key], "a string")
        if not m["role"]:
            raise ArgumentError(f"{where}.role", m["role"], "a non-empty string")
        limits.check("max_prompt_chars", len(m["content"]), f"{where}.content")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def is_chat(p: Any) -> bool:
    """A non-empty list (or tuple) whose items are all mappings: one chat conversation."""
    return isinstance(p, list | tuple) and len(p) > 0 and all(isinstance(m, Mapping) for m in p)


def check_prompt(prompt: Any) -> tuple[bool, list[Prompt]]:
    """(is it a batch, the prompts): a string, one chat, or a list of strings and chats."""
    if isinstance(prompt, str):
        limits.check("max_prompt_chars", len(prompt), "prompt")
        return False, [prompt]
    if not isinstance(prompt, list | tuple) or not prompt:
        raise ArgumentError("prompt", prompt, PROMPT_EXPECTED)
    if is_chat(prompt):
        return False, [check_messages(prompt)]
    limits.check("max_batch", len(prompt), "prompt (batch)")
    out: list[Prompt] = []
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            limits.check("max_prompt_chars", len(p), f"prompt[{i}]")
            out.append(p)
        elif is_chat(p):
            out.append(check_messages(p, f"prompt[{i}]"))
        else:
            raise ArgumentError(f"prompt[{i}]", p, "a string or a list of chat messages")
    return True, out


def check_stop(stop: Any) -> list[str]:
    """None, a non-empty string, or a list of non-empty strings → a list."""
    if stop is None:
        return []
    if isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list | tuple):
        stops = list(stop)
        limits.check("max_alternatives", len(stops), "stop")
    else:
        raise ArgumentError("stop", stop, "None, a non-empty string or a list of them")
    for i, s in enumerate(stops):
        where = "stop" if isinstance(stop, str) else f"stop[{i}]"
        if not isinstance(s, str) or not s:
            raise ArgumentError(where, s, "a non-empty string")
        limits.check("max_prompt_chars", len(s), where)
    return stops


@dataclass(frozen=True)
class Options:
    """`generate`'s checked scalar arguments."""

    max_tokens: int
    n: int
    stop: list[str]
    healing: int
    fast_forward: bool
    close_on_budget: bool
    stream: bool
    selective: bool


def check_options(*, max_tokens: Any, temperature: Any, top_k: Any, top_p: Any, min_p: Any, seed: Any,
                  n: Any, stop: Any, healing: Any, fast_forward: Any, close_on_budget: Any, stream: Any,
                  selective: Any, chat_template: Any) -> Options:
    """Check every scalar argument of `generate` (see the module docstring)."""
    mt = check_int("max_tokens", max_tokens, minimum=1, limit="max_tokens")
    nn = check_int("n", n, minimum=1, limit="max_n")
    if temperature is not None:
        check_number("temperature", temperature, 0.0)
    check_int("top_k", top_k, minimum=0)
    check_number("top_p", top_p, 0.0, 1.0, lo_open=True)
    check_number("min_p", min_p, 0.0, 1.0)
    check_seed(seed)
    if isinstance(healing, bool):
        heal = int(healing)
    else:
        heal = check_int("healing", healing, minimum=0)
    if chat_template is not None:
        if not isinstance(chat_template, str) or not chat_template:
            raise ArgumentError("chat_template", chat_template, "None or a non-empty Jinja template string")
        limits.check("max_text_chars", len(chat_template), "chat_template")
    return Options(
        max_tokens=mt, n=nn, stop=check_stop(stop), healing=heal,
        fast_forward=check_bool("fast_forward", fast_forward),
        close_on_budget=check_bool("close_on_budget", close_on_budget),
        stream=check_bool("stream", stream), selective=check_bool("selective", selective),
    )


def check_limits_arg(value: Any) -> Limits | None:
    if value is not None and not isinstance(value, Limits):
        raise ArgumentError("limits", value, "None or a tether.limits.Limits")
    return value


__all__ = ["ArgumentError", "Options", "check_limits_arg", "check_messages", "check_options", "check_prompt",
           "check_stop", "is_chat"]
