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
    "LimitError": "tether.errors",
    "ContextLengthError": "tether.errors",
    "ArgumentError": "tether.errors",
    "ModelArgumentError": "tether.errors",
    # limits
    "Limits": "tether.limits",
    # layers whose package is also a public name (``tether.regex(pattern)`` is callable)
    "regex": "",
    # tokens
    "Vocabulary": "tether.tokens",
    "TokenTrie": "tether.tokens",
    # grammar
    "Grammar": "tether.grammar",
    "schema_of": "tether.grammar.pytypes",
    "parse_value": "tether.grammar.pytypes",
    # engine
    "compile": "tether.engine",
    "CompiledConstraint": "tether.engine",
    "Matcher": "tether.engine",
    "compute_masks": "tether.engine",
    # models
    "load_model": "tether.models",
    "Costs": "tether.models",
    "LlamaCppModel": "tether.models",
    # decoding
    "Argmax": "tether.decoding",
    "Sample": "tether.decoding",
    "Beam": "tether.decoding",
    # program
    "generate": "tether.program",
    "agenerate": "tether.program.aio",
    "AsyncStream": "tether.program.aio",
    "Stream": "tether.program",
    "Generation": "tether.program",
    "gen": "tether.program",
    "select": "tether.program",
    "ModelState": "tether.program",
    "Generator": "tether.program",
    "function": "tether.program",
    "system": "tether.program",
    "user": "tether.program",
    "assistant": "tether.program",
    # lang
    "query": "tether.lang",
    "run_query": "tether.lang",
    "arun_query": "tether.lang.query",
    "load_query": "tether.lang",
    "Query": "tether.lang",
    "QueryResult": "tether.lang",
}

__all__ = sorted([*_LAZY, "__version__"])


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = (importlib.import_module(f"tether.{name}") if module == ""
             else getattr(importlib.import_module(module), name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


def _provide_idioms() -> None:
    """Import the program layer, which registers ``model(prompt, output)`` and
    ``model + "text"`` (see `tether.models.base.Idioms`)."""
    importlib.import_module("tether.program")


# cheap: tether.models.base imports only tether.errors
from tether.models.base import IDIOMS as _IDIOMS  # noqa: E402

_IDIOMS.provider = _provide_idioms


if TYPE_CHECKING:  # pragma: no cover
    from tether.errors import *  # noqa: F403
