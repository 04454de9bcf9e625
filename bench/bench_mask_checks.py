"""Per-call cost of ``Matcher.compute_mask`` on a cached state (the argument checks are on
this path). Run: ``PYTHONPATH=src python bench/bench_mask_checks.py``."""

from __future__ import annotations

import sys
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "engine"))
from engine_reference import list_grammar  # noqa: E402

from tether.engine import compile  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402


def main() -> None:
    for n_tokens in (150, 262_144):
        toks = [b"", b"1", b"12", b"a", b"ab", b",", b"1,"] + [bytes([65 + i % 26]) * (1 + i // 26 % 7) for i in range(n_tokens - 7)]
        vocab = Vocabulary.from_bytes(toks, eos_ids=[0])
        m = compile(list_grammar(), vocab).matcher()
        out = np.zeros(m.cc.n_words, np.uint32)
        m.compute_mask(out)  # warm: the state's mask is cached from here on
        call = m.compute_mask
        best = min(timeit.repeat(lambda call=call, out=out: call(out), number=20_000, repeat=7)) / 20_000
        print(f"compute_mask, cached state, {n_tokens} tokens: {best * 1e9:.0f} ns/call")


if __name__ == "__main__":
    main()
