"""Regex layer benchmark: compile cost, DFA sizes, and trie walks under lexer DFAs.

Run: ``.venv/bin/python bench/bench_regex.py [--repeat N] [--no-walk]``.

1. Every distinct JSON Schema ``pattern`` of ``../shared/data`` (dev set + test suite):
   parse time (search semantics, ECMA-262), then the number of DFA states and the time
   to fill every row reachable from the start (cold: fresh process-wide caches are not
   possible, so "cold" means a fresh ``LexerDfa`` with derivatives possibly cached by an
   earlier pattern sharing sub-expressions).
2. Adversarial patterns: states and time to run 100 kB of input.
3. The numba trie walk (``tether.tokens.fill_mask``) over the Gemma 3 vocabulary under
   lexer DFAs: an integer, a JSON string body, a free-text-to-newline lexeme; first walk
   (rows filled lazily) and warm walks (table complete) separately.

Not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "differential"))


def ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench_patterns() -> None:
    from test_regex_vs_re import schema_patterns

    from tether.errors import RegexError
    from tether.regex import LexerDfa, search

    pats = [p for p, _ in schema_patterns()]
    parse_t, fill_t, states, rejected = [], [], [], []
    worst: list[tuple[int, float, str]] = []
    for p in pats:
        t0 = time.perf_counter()
        try:
            node = search(p, flavor="ecma")
        except RegexError as e:
            rejected.append((p, e.reason))
            continue
        t1 = time.perf_counter()
        dfa = LexerDfa([node])
        n = dfa.fill_reachable()
        t2 = time.perf_counter()
        parse_t.append(t1 - t0)
        fill_t.append(t2 - t1)
        states.append(n)
        worst.append((n, t2 - t1, p))
    print(f"\n## JSON Schema patterns ({len(pats)} distinct; search semantics, ECMA-262)")
    print(f"  compiled {len(states)}, rejected {len(rejected)}")
    for p, why in rejected:
        print(f"    rejected {p!r}: {why}")
    print(f"  parse:      median {ms(statistics.median(parse_t))}, p90 {ms(pct(parse_t, 0.9))}, "
          f"max {ms(max(parse_t))}, total {ms(sum(parse_t))}")
    print(f"  DFA states: median {statistics.median(states):.0f}, p90 {pct(states, 0.9):.0f}, "
          f"max {max(states)}, total {sum(states)}")
    print(f"  fill all reachable rows: median {ms(statistics.median(fill_t))}, "
          f"p90 {ms(pct(fill_t, 0.9))}, max {ms(max(fill_t))}, total {ms(sum(fill_t))}")
    print("  largest DFAs:")
    for n, t, p in sorted(worst, reverse=True)[:5]:
        print(f"    {n:5d} states {ms(t):>12}  {p[:70]!r}")


def bench_adversarial() -> None:
    from tether.regex import LexerDfa, parse

    print("\n## Adversarial patterns (100,000 input bytes, no match at the end)")
    for pattern, text in [("(a+)+b", b"a" * 100_000), ("(a|aa)*c", b"a" * 100_000),
                          ("(x+x+)+y", b"x" * 100_000), ("[ab]*a[ab]{10}", b"ab" * 50_000)]:
        dfa = LexerDfa([parse(pattern)])
        t0 = time.perf_counter()
        s = dfa.run(dfa.start(), text)
        dt = time.perf_counter() - t0
        print(f"  {pattern:<18} {dfa.n_states:5d} states  {ms(dt):>12} (Python step loop)  "
              f"accepts={bool(s >= 0 and dfa.accepts[s])}")


def bench_walks(repeat: int) -> None:
    try:
        from tether.models.llama_cpp import embedded_model_path

        path = embedded_model_path()
    except Exception as exc:  # noqa: BLE001 - report and skip
        print(f"\n(trie walks skipped: embedded model unavailable: {exc})")
        return
    from tether.regex import ANY_CHAR, LexerDfa, complement, concat, intersect, literal, parse, star
    from tether.tokens import TokenTrie, Vocabulary, allocate_mask, count_bits, fill_mask
    from tether.tokens.walk import warmup

    def stop_phrase(stop: bytes):  # type: ignore[no-untyped-def]
        text = star(ANY_CHAR)
        return concat(intersect(text, complement(concat(text, literal(stop), text))), literal(stop))

    vocab = Vocabulary.from_gguf(path)
    trie = TokenTrie.from_vocabulary(vocab)
    warmup()
    print(f"\n## Trie walks over Gemma 3 ({vocab.size:,} tokens, {trie.n_nodes:,} trie nodes)")
    lexers = {
        "integer -?(0|[1-9][0-9]*)": parse(r"-?(0|[1-9][0-9]*)"),
        'JSON string body ([^"\\\\\\x00-\\x1f]|\\\\escape)*"': parse(
            r'([^"\\\x00-\x1F]|\\(["\\/bfnrt]|u[0-9a-fA-F]{4}))*"', flavor="ecma"
        ),
        "free text to newline [^\\n]*\\n": parse(r"[^\n]*\n"),
        "text up to stop phrase (.*&~(.*END.*))END": stop_phrase(b"END"),
        "JSON number": parse(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"),
    }
    mask = allocate_mask(vocab.size)
    for name, node in lexers.items():
        dfa = LexerDfa([node])
        start = dfa.start()
        t0 = time.perf_counter()
        fill_mask(trie, dfa, start, mask)
        first = time.perf_counter() - t0
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fill_mask(trie, dfa, start, mask)
            times.append(time.perf_counter() - t0)
        print(f"  {name:<52} first {ms(first):>11} ({dfa.n_states} states)  "
              f"warm median {ms(statistics.median(times)):>10} min {ms(min(times)):>10}  "
              f"{count_bits(mask):,} tokens allowed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--no-walk", action="store_true")
    args = ap.parse_args()
    import numpy as np

    print(f"machine: {platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, "
          f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}, numpy {np.__version__}")
    bench_patterns()
    bench_adversarial()
    if not args.no_walk:
        bench_walks(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
