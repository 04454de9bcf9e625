"""Decoder objects: how the next token is chosen among those the constraint allows.

A decoder is a small frozen value; `decode` (``tether.decoding.loop``) and `beam_search`
read it. Every decoder sees only the *allowed* tokens: the logits of the allowed rows,
in ascending token-id order, so masking and selective logits give identical results.

* `Argmax` — the most likely allowed token (ties → lowest token id). Deterministic.
* `Sample` — temperature, top-k, top-p (nucleus), min-p, with a seed; reproducible:
  sample ``i`` of a run draws from ``numpy.random.default_rng([seed, i])``, so the same
  seed gives the same samples whether they run batched or one by one.
* `Beam` — beam search over constrained sequences; returns ``n`` distinct texts sorted
  by score (sum of the constrained log-probabilities).
* `BestOf` — ``n`` samples, ranked by their log-probability; the best first.
"""

from __future__ import annotations

from dataclasses import dataclass


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


@dataclass(frozen=True, slots=True)
class Argmax:
    """Pick the most likely allowed token at every step."""

    n: int = 1

    def __post_init__(self) -> None:
        _check(self.n == 1, f"Argmax produces one sequence; got n={self.n} (use Beam(n) or Sample(n=...))")


@dataclass(frozen=True, slots=True)
class Sample:
    """Sample among the allowed tokens.

    Filters apply in this order to the allowed logits divided by ``temperature``:
    ``top_k`` (0 = off), ``min_p`` (drop tokens with probability below ``min_p`` × the
    largest), ``top_p`` (smallest set of most likely tokens whose mass reaches ``top_p``).
    ``temperature == 0`` is argmax. ``n`` samples run batched.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None
    n: int = 1

    def __post_init__(self) -> None:
        _check(self.temperature >= 0, f"temperature must be >= 0; got {self.temperature}")
        _check(self.top_k >= 0, f"top_k must be >= 0 (0 = off); got {self.top_k}")
        _check(0 < self.top_p <= 1, f"top_p must be in (0, 1]; got {self.top_p}")
        _check(0 <= self.min_p <= 1, f"min_p must be in [0, 1]; got {self.min_p}")
        _check(self.n >= 1, f"n must be >= 1; got {self.n}")


@dataclass(frozen=True, slots=True)
class Beam:
    """Beam search keeping ``width`` live sequences (default ``n``); returns ``n`` results."""

    n: int = 2
    width: int | None = None

    def __post_init__(self) -> None:
        _check(self.n >= 1, f"n must be >= 1; got {self.n}")
        _check(self.width is None or self.width >= self.n, f"width must be >= n ({self.n}); got {self.width}")

    @property
    def beam_width(self) -> int:
        return self.width if self.width is not None else self.n


@dataclass(frozen=True, slots=True)
class BestOf:
    """Draw ``n`` samples with ``sample``'s settings; rank them by log-probability."""

    n: int = 4
    sample: Sample = Sample()

    def __post_init__(self) -> None:
        _check(self.n >= 1, f"n must be >= 1; got {self.n}")


Decoder = Argmax | Sample | Beam | BestOf
