"""The LMQL surface a running query sees: the module named ``lmql`` (and ``tether``) in
its globals, and builtins under which ``import lmql`` gives that module.

The surface (`tether.lang.lmql`) builds on `Query`, so it sits above the runtime that
runs query programs. It registers itself here when it is imported (``tether.lang``
imports it, so it is registered before any query runs), and `runtime.Program` reads it:
the runtime imports nothing above it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tether.errors import TetherError


@dataclass(frozen=True)
class Surface:
    """``module``: what ``lmql`` names inside a query; ``builtins``: the builtins of a query
    program (``import lmql`` resolving to ``module``)."""

    module: types.ModuleType
    builtins: Callable[[], dict[str, Any]]


_registered: list[Surface] = []


def register(surface: Surface) -> None:
    """Make ``surface`` the one every query program sees (the last registration wins)."""
    _registered[:] = [surface]


def surface() -> Surface:
    """The registered surface; TetherError when none is (``tether.lang`` was not imported)."""
    if not _registered:
        raise TetherError("no LMQL surface is registered: import tether.lang before running a query")
    return _registered[0]
