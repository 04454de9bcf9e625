"""JSON Schema → Grammar IR (``compile_json_schema``) and the output policy (``dumps``).

Code map: ``check.py`` (the shape of a hostile document, checked first) → ``strings.py``
(ECMA-262 patterns, JSON string escaping) → ``numbers.py`` (integer and decimal ranges as
regexes, ``NumberBounds``) → ``layout.py`` (whitespace policy, ``dumps``) → ``context.py``
(what one compile shares) → ``references.py``, ``combinators.py``, ``per_type.py``,
``negation.py`` and the ``*_keywords.py`` families → ``compiler.py`` (``compile_json_schema``,
``dumps_for``). See README.md.
See docs/json_schema.md for the supported subset.
"""

from tether.grammar.json_schema.compiler import compile_json_schema, dumps_for
from tether.grammar.json_schema.layout import dumps
from tether.grammar.json_schema.numbers import NumberBounds

__all__ = ["NumberBounds", "compile_json_schema", "dumps", "dumps_for"]
