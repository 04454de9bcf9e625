"""The Python API: `generate` with typed outputs, and Guidance-style composition.

Code map: ``outputs.py`` (what ``output=`` may be → grammar + value parser) →
``chat.py`` (chat templates) → ``generate.py`` (`generate`, `Generation`, `Stream`) →
``compose.py`` (`gen`, `select`, ``+``, chat turns, captures) → ``state.py`` (Guidance-style
`ModelState`: ``lm += gen(...)``, ``with user():``, `function`) → ``compose.py`` (streaming)
(``lm.stream(piece)``, ``program.stream(model)``: `HoleEvent` per hole as it grows) → ``generator.py``
(Outlines-style ``model(prompt, output)`` and `Generator`) → ``view.py`` (the notebook
view, ``_repr_html_``) → ``remote.py`` (black-box HTTP models).
"""

from tether.grammar.json_schema import NumberBounds
from tether.program.compose import (
    HoleEvent,
    Program,
    ProgramResult,
    ProgramStream,
    assistant,
    gen,
    role,
    select,
    system,
    user,
)
from tether.program.generate import Generation, Stream, generate
from tether.program.generator import GeneratedText, Generator
from tether.program.outputs import Regex, output_spec, regex
from tether.program.state import ModelState, function

__all__ = [
    "GeneratedText",
    "Generation",
    "Generator",
    "HoleEvent",
    "ModelState",
    "NumberBounds",
    "Program",
    "ProgramResult",
    "ProgramStream",
    "Regex",
    "Stream",
    "assistant",
    "function",
    "gen",
    "generate",
    "output_spec",
    "regex",
    "role",
    "select",
    "system",
    "user",
]
