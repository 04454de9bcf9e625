"""LMQL's Python API on tether: ``from tether.compat import lmql``.

Programs written for LMQL run unmodified: ``@lmql.query``, ``lmql.run`` / ``run_sync``,
``lmql.F``, ``lmql.model(...)``, ``lmql.decorators``, ``lmql.LMQLResult`` (see
`tether.lang.lmql` and docs/lmql.md for what is supported and what is substituted).

This module never shadows a real LMQL: ``import lmql`` in your own Python code gives
tether's surface only after the opt-in ``install()`` (and only when no real ``lmql``
is importable, unless ``force=True``). Inside a tether query, ``import lmql`` always
gives tether's surface.
"""

from __future__ import annotations

import importlib.util
import sys

from tether.lang import lmql as _surface
from tether.lang.lmql import (
    F,
    LMQLResult,
    LMQLUnsupportedError,
    ModelSpec,
    Variable,
    decorators,
    generate,
    generate_sync,
    model,
    query,
    run,
    run_sync,
)

__all__ = ["F", "LMQLResult", "LMQLUnsupportedError", "ModelSpec", "Variable", "decorators", "generate", "generate_sync", "install",
           "model", "query", "run", "run_sync", "uninstall"]


def install(*, force: bool = False) -> bool:
    """Make ``import lmql`` give tether's surface (opt-in alias).

    Returns True when installed; False (and nothing changes) when a real LMQL is
    importable and ``force`` is not set.
    """
    current = sys.modules.get("lmql")
    if current is _surface:
        return True
    if not force and (current is not None or importlib.util.find_spec("lmql") is not None):
        return False
    sys.modules["lmql"] = _surface
    sys.modules["lmql.decorators"] = decorators  # type: ignore[assignment]
    return True


def uninstall() -> None:
    """Undo `install` (only when the alias is tether's)."""
    if sys.modules.get("lmql") is _surface:
        del sys.modules["lmql"]
        sys.modules.pop("lmql.decorators", None)


def __getattr__(name: str) -> object:
    return getattr(_surface, name)  # unsupported names: LMQLUnsupportedError naming the construct
