"""The protocol every model backend implements, and the cost counters they share.

Two kinds of model (outlines' split):

* *steerable* — tether owns the logits (llama.cpp, transformers, scripted): it masks
  them with the engine at every step;
* *black-box* — an HTTP API: tether passes the constraint through where the server
  supports it (``response_format``, ``logit_bias``, stop) and validates the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from tether.tokens import Vocabulary


@dataclass
class Costs:
    """What the LMQL paper counts (Tables 3, 4), kept by every backend.

    Attributes:
        model_calls: forward passes (one per decoding step; a batched pass counts once).
        generate_calls: decoding runs started (one per hole or per chunk-wise generate()).
        prompt_tokens: tokens sent as input, summed over generate calls (billable input).
        generated_tokens: tokens produced by decoding (billable output).
        evaluated_tokens: tokens actually run through the network (after KV reuse).
    """

    model_calls: int = 0
    generate_calls: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    evaluated_tokens: int = 0

    @property
    def billable_tokens(self) -> int:
        return self.prompt_tokens + self.generated_tokens

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)

    def snapshot(self) -> Costs:
        return Costs(**{f.name: getattr(self, f.name) for f in fields(self)})

    def __sub__(self, other: Costs) -> Costs:
        return Costs(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


@runtime_checkable
class Model(Protocol):
    """A steerable model: next-token logits for a token sequence.

    ``logits(tokens)`` returns the logits for the token after ``tokens`` as a float32
    array of width ``n_logits`` (which may exceed ``vocabulary.size``: padding rows are
    never allowed). Backends reuse the KV cache of the longest common prefix with the
    previous call. The returned array may be a view valid only until the next call.
    """

    vocabulary: Vocabulary
    costs: Costs
    name: str

    @property
    def eos_ids(self) -> tuple[int, ...]: ...

    def tokenize(self, text: str, *, add_bos: bool = False) -> list[int]: ...

    def detokenize(self, tokens: Sequence[int]) -> bytes: ...

    def logits(self, tokens: Sequence[int]) -> NDArray[np.float32]: ...
