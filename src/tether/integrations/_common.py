"""What every integration shares: ``output`` → compiled constraint, and mask helpers.

``output`` is anything `tether.generate` accepts (a JSON Schema dict, a Pydantic model,
a Python type, ``tether.regex(...)``, a list of choices, a Grammar); it is lowered by
`tether.program.outputs.output_spec` and compiled by `tether.engine.compile` (cached by
grammar content and vocabulary fingerprint), exactly as ``generate`` does.
"""

from __future__ import annotations

from typing import Any

from tether.engine import CompiledConstraint
from tether.engine import compile as compile_constraint
from tether.errors import ConstraintError
from tether.program.outputs import OutputSpec, output_spec
from tether.tokens import Vocabulary


def compile_output(output: Any, vocabulary: Vocabulary) -> tuple[OutputSpec, CompiledConstraint]:
    """Lower ``output`` and compile it for ``vocabulary``.

    Raises:
        ConstraintError: ``output`` is None (free text needs no processor) or not an
            output tether knows; SchemaError, RegexError, GrammarError, LimitError from
            lowering and compiling.
    """
    spec = output_spec(output)
    if spec.grammar is None:
        raise ConstraintError("output=None is free text: no logits processor is needed")
    return spec, compile_constraint(spec.grammar, vocabulary)
