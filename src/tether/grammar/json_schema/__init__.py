"""JSON Schema → Grammar IR (``compile_json_schema``) and the output policy (``dumps``).

Code map: ``check.py`` (the shape of a hostile document, checked first) → ``strings.py``
(ECMA-262 patterns, JSON string escaping) → ``numbers.py`` (integer and decimal ranges as
regexes, ``NumberBounds``) → ``layout.py`` (whitespace policy, ``dumps``) → ``compiler.py``
(references, conjunctions, per-type merging, emission).
See docs/json_schema.md for the supported subset.
"""

from tether.grammar.json_schema.compiler import compile_json_schema, dumps_for
from tether.grammar.json_schema.layout import dumps
from tether.grammar.json_schema.numbers import NumberBounds

__all__ = ["NumberBounds", "compile_json_schema", "dumps", "dumps_for"]
