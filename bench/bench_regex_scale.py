"""Compile time of large regexes: alternations of literals (10k, 20k), case-insensitive
ones, and nested counted repeats. Run: ``PYTHONPATH=src python bench/bench_regex_scale.py``
(about half a minute)."""

from __future__ import annotations

import gc
import sys
import time

from tether.errors import TetherError
from tether.regex import parse, search


def timed(label: str, f) -> None:  # type: ignore[no-untyped-def]
    gc.collect()
    t = time.perf_counter()
    try:
        f()
        what = "ok"
    except TetherError as e:
        what = f"{type(e).__name__}: {str(e).splitlines()[0][:70]}"
    print(f"{label:<44} {time.perf_counter() - t:8.3f} s  {what}", flush=True)


def main() -> None:
    quick = "--quick" in sys.argv
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 20_000)
    for n in sizes:
        words = [f"literal_number_{i:05d}" for i in range(n)]
        pattern = "|".join(words)
        timed(f"{n} literals (22 chars), fullmatch", lambda p=pattern: parse(p))
        timed(f"{n} literals, search", lambda p=pattern: search(p, flavor="python"))
        timed(f"{n} literals, ignore case", lambda p=pattern: parse(p, ignore_case=True))
        short = "|".join(f"{i}" for i in range(n))
        timed(f"{n} numbers 0..{n - 1}", lambda p=short: parse(p))
    for p in ("((a{50}){50}){50}", "(?:a{1000}){1000}", "(?:(?:a{100}){100}){100}"):
        timed(p, lambda p=p: parse(p))


if __name__ == "__main__":
    main()
