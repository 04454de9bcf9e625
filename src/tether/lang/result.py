"""What a query run returns: the interaction trace, every variable, and all n branches."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class Segment:
    """A piece of the trace: prompt text, a hole's value, a role tag or user input."""

    kind: Literal["text", "hole", "role", "input"]
    text: str
    name: str = ""


@dataclass
class HoleRecord:
    """One decoded (or supplied) hole: its name, text in the trace and program value.

    ``query`` names the (nested) query the hole belongs to; ``stopped`` tells how decoding
    ended: "stop" (stop phrase), "eos" (end chosen), "budget" (token limit), "masked"
    (no token allowed), "length" (the model's context window is full), "supplied" (pre
    decorator), "distribute". ``satisfied`` is True only when the final value makes the
    hole's constraint true (or the constraint still reads a later hole); a typed hole
    (``int``, ``float``, a dataclass) whose text does not parse has ``value`` None.
    """

    name: str
    text: str
    value: Any
    query: str = ""
    stopped: str = ""
    n_tokens: int = 0
    satisfied: bool = True
    distribution: dict[str, float] | None = None
    logprob: float = 0.0


@dataclass
class QueryResult:
    """The result of one branch; ``results`` lists all n branches (best first).

    Attributes:
        prompt: the full interaction trace (prompt text with hole values substituted).
        variables: the program's variables at the end (holes and Python variables).
        holes: every hole decoded, in order (a hole in a loop appears once per iteration).
        segments: the trace split into text / hole / role / input pieces (for display).
        distributions: for ``distribute`` holes, value → probability (sums to 1).
        return_value: what the query body returned (None if it did not).
        logprob: log-probability of the decoded hole tokens under the model.
        costs: cost counters of the whole run (all branches), a ``tether.models.base.Costs``.
        results: all branches; ``results[0] is self`` for the returned result.
        returned: True when the body ran ``return <value>`` (a bare ``return`` or none: False).
    """

    prompt: str
    variables: dict[str, Any]
    holes: list[HoleRecord]
    segments: list[Segment]
    distributions: dict[str, dict[str, float]] = field(default_factory=dict)
    return_value: Any = None
    logprob: float = 0.0
    costs: Any = None
    results: list[QueryResult] = field(default_factory=list)
    returned: bool = False

    def __getitem__(self, name: str) -> Any:
        return self.variables[name]

    def values(self, name: str) -> list[Any]:
        """Every value hole ``name`` took (loops reassign a hole)."""
        return [h.value for h in self.holes if h.name == name]

    @property
    def violations(self) -> list[HoleRecord]:
        return [h for h in self.holes if not h.satisfied]

    def _repr_html_(self) -> str:
        """The notebook view: the trace with holes highlighted and named (`tether.program.view`)."""
        from tether.program.view import trace_html

        return trace_html(self.segments, self.holes)

    def render(self, color: bool = True) -> str:
        """The trace with holes highlighted (ANSI colour, or [[NAME: value]] without)."""
        out = []
        for s in self.segments:
            if s.kind == "hole":
                out.append(f"\x1b[1;34m{s.text}\x1b[0m" if color else f"⟦{s.text}⟧")
            elif s.kind == "role":
                out.append(f"\x1b[2m{s.text}\x1b[0m" if color else s.text)
            elif s.kind == "input":
                out.append(f"\x1b[32m{s.text}\x1b[0m" if color else s.text)
            else:
                out.append(s.text)
        return "".join(out)
