"""What typed partial values cost: the partial-JSON reader alone, and a streamed JSON
output on the embedded model with and without ``partials()``.

* reader: one JSON document (about 80 KB, 1,000 objects) read in one feed, then in
  4-character chunks with a snapshot of the value after every change (a stream's worst
  case: every chunk changes the value), beside ``json.loads`` of the whole text;
* model (``--model``): the same JSON Schema output streamed on Gemma 3 270M, reading the
  text chunks only, then ``partials()``; seconds for each (best of ``--repeat``).

    PYTHONPATH=src python bench/bench_partial.py
    PYTHONPATH=src python bench/bench_partial.py --model
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from tether.program.partial import PartialJson

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20},
                   "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 4},
                   "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "hobbies", "age"],
}


def best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_reader(repeat: int) -> None:
    rng = random.Random(0)
    doc = json.dumps([{"name": "x" * rng.randint(1, 20), "age": rng.randint(0, 100), "tags": ["a", "bb", 1.5],
                       "s": "é\n"} for _ in range(1000)])

    def whole() -> None:
        r = PartialJson()
        r.feed(doc)
        r.finish()

    snapshots = 0

    def chunked() -> None:
        nonlocal snapshots
        r, snapshots = PartialJson(), 0
        for i in range(0, len(doc), 4):
            if r.feed(doc[i : i + 4]):
                r.value  # noqa: B018 -- the snapshot is the cost measured
                snapshots += 1
        r.finish()

    t_whole, t_chunked, t_loads = best(whole, repeat), best(chunked, repeat), best(lambda: json.loads(doc), repeat)
    print(f"reader: {len(doc)} chars; one feed {t_whole * 1e3:.1f} ms ({len(doc) / t_whole / 1e6:.2f} M chars/s); "
          f"4-char chunks with {snapshots} snapshots {t_chunked * 1e3:.1f} ms "
          f"({t_chunked / snapshots * 1e6:.1f} us per change, feed included); json.loads {t_loads * 1e3:.2f} ms")


def bench_model(repeat: int) -> None:
    from tether.models import load_model
    from tether.program import generate

    model = load_model()
    prompt = "A person and their hobbies, as JSON: "
    generate(model, prompt, SCHEMA, max_tokens=80)  # compile once, warm the model

    def chunks() -> None:
        for _ in generate(model, prompt, SCHEMA, max_tokens=80, stream=True):
            pass

    n = 0

    def partials() -> None:
        nonlocal n
        n = sum(1 for _ in generate(model, prompt, SCHEMA, max_tokens=80, stream=True).partials())

    g = generate(model, prompt, SCHEMA, max_tokens=80)
    t_chunks, t_partials = best(chunks, repeat), best(partials, repeat)
    print(f"model: {len(g.tokens)} tokens; text chunks {t_chunks * 1e3:.1f} ms; with partials() "
          f"{t_partials * 1e3:.1f} ms ({n} partial values; {(t_partials / t_chunks - 1) * 100:+.1f}%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="store_true", help="also stream on the embedded model")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    bench_reader(args.repeat)
    if args.model:
        bench_model(args.repeat)


if __name__ == "__main__":
    main()
