"""tether: language-model programs with typed, constrained holes.

``import tether`` is cheap: it imports no numba, torch or llama_cpp. Public names are
resolved lazily from their layers on first use (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY: dict[str, str] = {
    # errors
    "TetherError": "tether.errors",
    "RegexError": "tether.errors",
    "GrammarError": "tether.errors",
    "SchemaError": "tether.errors",
    "UnsupportedSchemaError": "tether.errors",
    "VocabularyError": "tether.errors",
    "ConstraintError": "tether.errors",
    "ModelError": "tether.errors",
    "QuerySyntaxError": "tether.errors",
    "MissingDependencyError": "tether.errors",
    # layers
    "Vocabulary": "tether.tokens",
    "TokenTrie": "tether.tokens",
    "Grammar": "tether.grammar",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover
    from tether.errors import *  # noqa: F403
