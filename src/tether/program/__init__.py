"""The Python API: `generate` with typed outputs, and Guidance-style composition.

Code map: ``outputs.py`` (what ``output=`` may be → grammar + value parser) →
``chat.py`` (chat templates) → ``generate.py`` (`generate`, `Generation`, `Stream`) →
``compose.py`` (`gen`, `select`, ``+``, captures) → ``remote.py`` (black-box HTTP models).
"""

from tether.grammar.json_schema import NumberBounds
from tether.program.compose import Program, ProgramResult, gen, select
from tether.program.generate import Generation, Stream, generate
from tether.program.outputs import Regex, output_spec, regex

__all__ = [
    "Generation",
    "NumberBounds",
    "Program",
    "ProgramResult",
    "Regex",
    "Stream",
    "gen",
    "generate",
    "output_spec",
    "regex",
    "select",
]
