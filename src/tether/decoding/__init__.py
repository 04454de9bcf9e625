"""Decoders (argmax, sampling, beam, best-of), token healing, fast-forward, stop texts.

Code map, in reading order: ``decoders.py`` (the decoder values) → ``sampling.py``
(choosing among allowed logits) → ``guide.py`` (matcher + healing per sequence) →
``logits.py`` (scores of allowed tokens; selective logits) → ``options.py`` (the keyword
options of every entry point, checked once) → ``branch.py`` (one sequence, the step pieces
loop and beam share) → ``loop.py`` (`decode`) →
``beam.py`` → ``healing.py`` → ``scoring.py`` (`score_continuations`).
"""

from tether.decoding.beam import beam_search
from tether.decoding.decoders import Argmax, Beam, BestOf, Decoder, Sample, make_decoder
from tether.decoding.guide import Guide, allowed_ids
from tether.decoding.healing import plan_healing
from tether.decoding.loop import Decoded, decode, decode_iter
from tether.decoding.options import DecodeOptions
from tether.decoding.scoring import score_continuations
from tether.decoding.stops import StopScanner
from tether.decoding.tokenize import greedy_tokens, tokens_for_bytes
from tether.errors import ArgumentError

__all__ = [
    "ArgumentError",
    "Argmax",
    "Beam",
    "BestOf",
    "DecodeOptions",
    "Decoded",
    "Decoder",
    "Guide",
    "Sample",
    "StopScanner",
    "allowed_ids",
    "beam_search",
    "decode",
    "decode_iter",
    "greedy_tokens",
    "make_decoder",
    "plan_healing",
    "score_continuations",
    "tokens_for_bytes",
]
