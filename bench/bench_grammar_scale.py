"""Scale of the grammar front ends and engine compile on large inputs (issue: fail closed).

Per case: wall time and peak traced memory (tracemalloc) of loading the grammar, of
``engine.compile`` plus the first mask, and of consuming one valid output byte by byte
(checking the mask allows each byte and EOS at the end). Cases: ``Grammar.from_choices``
with N choices, a GBNF and a Lark alternation of N string literals, rule chains, and
counted repeats (``"a"{N}``), with the shortest completion from the start.

    PYTHONPATH=src python bench/bench_grammar_scale.py [--n 10000] [--cases choices,gbnf_alt]

Each case runs under ``tether.limits.deadline()`` with the default limits; a case that
exceeds one reports the LimitError instead of a time.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from tether.engine import compile as engine_compile
from tether.errors import TetherError
from tether.grammar.ir import Grammar
from tether.tokens.vocabulary import Vocabulary


def byte_vocab() -> Vocabulary:
    return Vocabulary.from_bytes([b""] + [bytes([i]) for i in range(256)], eos_ids=[0])


def words(n: int) -> list[str]:
    return [f"w{i}x{i % 7}" for i in range(n)]


def cases(n: int) -> dict[str, tuple[Callable[[], Grammar], bytes]]:
    ws = words(n)
    mid = ws[n // 2].encode()
    return {
        "choices": (lambda: Grammar.from_choices(ws), mid),
        "gbnf_alt": (lambda: Grammar.from_gbnf("root ::= " + " | ".join(f'"{w}"' for w in ws)), mid),
        "lark_alt": (lambda: Grammar.from_lark("start: " + " | ".join(f'"{w}"' for w in ws)), mid),
        "gbnf_chain": (lambda: Grammar.from_gbnf(
            "\n".join(f'r{i} ::= "x" r{i + 1} | "y"' for i in range(n)) + f'\nr{n} ::= "z"',
            start="r0"), b"xxy"),
        "gbnf_repeat": (lambda: Grammar.from_gbnf(f'root ::= "a"{{{n}}}'), b"a" * n),
        "lark_repeat": (lambda: Grammar.from_lark(f'start: "a"{{{n}}}'), b"a" * n),
    }


def measure(fn: Callable[[], object]) -> tuple[float, float, object]:
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        out = fn()
    except TetherError as exc:
        out = exc
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return dt, peak, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--cases", default="")
    ap.add_argument("--completion", action="store_true", help="also the shortest completion from the start")
    args = ap.parse_args()
    vocab = byte_vocab()
    todo = cases(args.n)
    names = [c for c in args.cases.split(",") if c] or list(todo)
    for name in names:
        build, sample = todo[name]
        dt, mb, g = measure(build)
        if isinstance(g, TetherError):
            print(f"{name:12s} n={args.n}: load {dt:.2f}s {mb:.0f}MiB -> {type(g).__name__}: {str(g)[:120]}")
            continue
        assert isinstance(g, Grammar)
        mask = np.zeros((len(vocab) + 31) // 32, np.uint32)

        def compile_mask(g: Grammar = g, mask: np.ndarray = mask) -> object:
            cc = engine_compile(g, vocab)
            m = cc.matcher()
            m.compute_mask(mask)
            return m

        dt2, mb2, m = measure(compile_mask)
        line = (f"{name:12s} n={args.n}: load {dt:.2f}s {mb:.0f}MiB, compile+mask {dt2:.2f}s "
                f"{mb2:.0f}MiB, rules {len(g.rules)}, terminals {len(g.terminals)}")
        if isinstance(m, TetherError):
            print(line + f" -> {type(m).__name__}: {str(m)[:120]}")
            continue

        def consume(m: object = m, mask: np.ndarray = mask, sample: bytes = sample) -> object:
            w = m.copy()  # type: ignore[attr-defined]
            for b in sample:
                w.compute_mask(mask)
                if not mask[(b + 1) >> 5] >> ((b + 1) & 31) & 1 or not w.consume(b + 1):
                    return f"rejected at byte {b!r}"
            w.compute_mask(mask)
            return "ok" if mask[0] & 1 else "EOS not allowed"

        dt3, mb3, res = measure(consume)
        line += f", consume {len(sample)}B {dt3:.2f}s {mb3:.0f}MiB {res}"
        if args.completion:
            dt4, mb4, tail = measure(lambda m=m: m.shortest_completion())  # type: ignore[attr-defined]
            shown = f"{len(tail)}B" if isinstance(tail, bytes) else f"{type(tail).__name__}: {str(tail)[:80]}"
            line += f", completion {dt4:.2f}s {mb4:.0f}MiB {shown}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
