"""Calling a hole's variable decorators: LMQL's ``(value, context)`` pair or one value."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def _takes_context(fn: Callable[..., Any]) -> bool:
    """Does a decorator take LMQL's ``(value, context)`` pair rather than one value?"""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: one value
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def call_decorator(fn: Callable[..., Any], value: Any, context: Any) -> Any:
    """``fn(value, context)`` for LMQL's two-argument decorators, else ``fn(value)``."""
    return fn(value, context) if _takes_context(fn) else fn(value)
