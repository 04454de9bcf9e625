"""JSON Schema → Grammar IR (``compile_json_schema``) and the output policy (``dumps``).

Code map: ``strings.py`` (ECMA-262 patterns, JSON string escaping) → ``numbers.py``
(integer and decimal ranges as regexes) → ``layout.py`` (whitespace policy, ``dumps``) →
``compiler.py`` (references, conjunctions, per-type merging, emission).
See docs/json_schema.md for the supported subset.
"""

from tether.grammar.json_schema.compiler import compile_json_schema, dumps_for
from tether.grammar.json_schema.layout import dumps

__all__ = ["compile_json_schema", "dumps", "dumps_for"]
