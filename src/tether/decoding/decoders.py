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

Every field is checked when a decoder is made: a wrong type or a value out of range
(``n="x"``, ``temperature=nan``, ``top_p=0``) raises `ArgumentError` (a ``ValueError``)
naming the argument. ``make_decoder``/``parse_decoder_call`` build one from a name and
keywords (``"beam(n=3)"``); ``check_limits`` holds ``n`` to ``Limits.max_n``.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real

from tether import limits
from tether.errors import ArgumentError

MAX_SEED = 2**128


def check_int(name: str, value: object, *, minimum: int | None = None, limit: str | None = None) -> int:
    """``value`` as an int (bools refused) that is ``>= minimum`` and within the current
    ``Limits`` field ``limit``. Raises ArgumentError, or LimitError past the limit."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ArgumentError(name, value, "an int" + (f" >= {minimum}" if minimum is not None else ""))
    v = int(value)
    if minimum is not None and v < minimum:
        raise ArgumentError(name, value, f"an int >= {minimum}")
    if limit is not None:
        limits.check(limit, v, name)
    return v


def check_number(name: str, value: object, lo: float, hi: float = math.inf, *,
                 lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite float in the interval ``lo``..``hi`` (open ends as asked)."""
    interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open or math.isinf(hi) else ']'}"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ArgumentError(name, value, f"a number in {interval}")
    v = float(value)
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi):
        raise ArgumentError(name, value, f"a finite number in {interval}")
    return v


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ArgumentError(name, value, "True or False")
    return value


def check_seed(value: object, name: str = "seed") -> int | None:
    """None or an int in ``[0, 2**128)`` (what numpy's seed sequences take)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or not 0 <= int(value) < MAX_SEED:
        raise ArgumentError(name, value, "None or an int in [0, 2**128)")
    return int(value)


@dataclass(frozen=True, slots=True)
class Argmax:
    """Pick the most likely allowed token at every step."""

    n: int = 1

    def __post_init__(self) -> None:
        if check_int("n", self.n) != 1:
            raise ArgumentError("n", self.n, "1 for argmax (use Beam(n) or Sample(n=...) for more outputs)")


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
        check_number("temperature", self.temperature, 0.0)
        check_int("top_k", self.top_k, minimum=0)
        check_number("top_p", self.top_p, 0.0, 1.0, lo_open=True)
        check_number("min_p", self.min_p, 0.0, 1.0)
        check_seed(self.seed)
        check_int("n", self.n, minimum=1)


@dataclass(frozen=True, slots=True)
class Beam:
    """Beam search keeping ``width`` live sequences (default ``n``); returns ``n`` results."""

    n: int = 2
    width: int | None = None

    def __post_init__(self) -> None:
        check_int("n", self.n, minimum=1)
        if self.width is not None:
            check_int("width", self.width, minimum=int(self.n))

    @property
    def beam_width(self) -> int:
        return self.width if self.width is not None else self.n


@dataclass(frozen=True, slots=True)
class BestOf:
    """Draw ``n`` samples with ``sample``'s settings; rank them by log-probability."""

    n: int = 4
    sample: Sample = Sample()

    def __post_init__(self) -> None:
        check_int("n", self.n, minimum=1)
        if not isinstance(self.sample, Sample):
            raise ArgumentError("sample", self.sample, "a tether.decoding.Sample")


Decoder = Argmax | Sample | Beam | BestOf

DECODER_NAMES = {"argmax": "argmax", "greedy": "argmax", "sample": "sample", "beam": "beam",
                 "beam_search": "beam", "best_of": "best_of", "best-of": "best_of"}
_KEYWORDS = {
    "argmax": {"n"},
    "sample": {"temperature", "top_k", "top_p", "min_p", "seed", "n"},
    "beam": {"n", "width"},
    "best_of": {"temperature", "top_k", "top_p", "min_p", "seed", "n"},
}
MAX_DECODER_TEXT = 1000


def check_limits(decoder: Decoder, place: str = "decoder") -> None:
    """Raise LimitError if the decoder asks for more sequences than ``Limits.max_n``."""
    limits.check("max_n", decoder.n, f"{place} n")
    if isinstance(decoder, Beam):
        limits.check("max_n", decoder.beam_width, f"{place} width")


def make_decoder(name: str, args: Mapping[str, object]) -> Decoder:
    """The decoder ``name`` (argmax, greedy, sample, beam, beam_search, best_of) built from
    keyword ``args``; unknown names and keywords raise ArgumentError."""
    method = DECODER_NAMES.get(name) if isinstance(name, str) else None
    if method is None:
        raise ArgumentError("decoder", name, "one of 'argmax', 'sample', 'beam', 'best_of'")
    unknown = sorted(str(k) for k in args if k not in _KEYWORDS[method])
    if unknown:
        raise ArgumentError(f"{name}({unknown[0]}=...)", args[unknown[0]],
                            f"a known keyword of {name}: one of {sorted(_KEYWORDS[method])}")
    a = dict(args)
    if method == "argmax":
        return Argmax(**a)  # type: ignore[arg-type]
    if method == "sample":
        return Sample(**a)  # type: ignore[arg-type]
    if method == "beam":
        return Beam(**a)  # type: ignore[arg-type]
    n = a.pop("n", 4)
    return BestOf(n=n, sample=Sample(**a))  # type: ignore[arg-type]


def parse_decoder_call(text: str) -> tuple[str, dict[str, object]]:
    """``"beam(n=3)"`` → ``("beam", {"n": 3})``: a name, optionally called with constant
    keyword arguments. Raises ArgumentError for anything else."""
    expected = "a decoder name or call with constant keywords, e.g. 'sample(temperature=0.7, n=2)'"
    if not isinstance(text, str) or len(text) > MAX_DECODER_TEXT:
        raise ArgumentError("decoder", text, expected)
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ArgumentError("decoder", text, expected) from None
    if isinstance(node, ast.Name):
        return node.id, {}
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.args:
        raise ArgumentError("decoder", text, expected)
    args: dict[str, object] = {}
    for k in node.keywords:
        if k.arg is None or k.arg in args:
            raise ArgumentError("decoder", text, expected)
        try:
            args[k.arg] = ast.literal_eval(k.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise ArgumentError(f"decoder argument {k.arg}", text, "a constant (number, string, True/False/None)") from None
    return node.func.id, args
