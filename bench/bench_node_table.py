#!/usr/bin/env python3
"""Memory of a long-running process that compiles a new JSON Schema per request.

Each request is a distinct generated schema (random property names, string, integer,
enum and nested-object properties, ``maxLength`` and ``pattern`` now and then), compiled
with ``tether.engine.compile`` (its process cache of 64 constraints, as a server uses it)
over a small byte-level vocabulary, then decoded to the end by random allowed tokens.
Prints, every ``--every`` schemas, the regex layer's intern table (nodes), the trims so far
and the process's peak RSS. ``--limit`` sets ``regex.interning.TABLE_LIMIT`` (default: the
library's); a huge limit shows the growth without the bound.

    .venv/bin/python bench/bench_node_table.py --schemas 3000 --limit 20000
    .venv/bin/python bench/bench_node_table.py --schemas 3000 --limit 1000000000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import tether.engine as te  # noqa: E402
from tether.errors import TetherError  # noqa: E402
from tether.grammar.ir import Grammar  # noqa: E402
from tether.regex import interning  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402

_TOKENS = ([bytes([b]) for b in range(32, 127)]
           + [b'{"', b'":', b'", "', b'": "', b'"}', b", ", b"true", b"false", b"null", b"<eos>"])
VOCAB = Vocabulary.from_bytes(_TOKENS, eos_ids=[len(_TOKENS) - 1])


def schema(rng: random.Random, depth: int = 0) -> dict:
    props = {}
    for _ in range(rng.randint(2, 7)):
        name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(3, 14)))
        kind = rng.random()
        if kind < 0.35:
            p: dict = {"type": "string"}
            if rng.random() < 0.3:
                p["maxLength"] = rng.randint(3, 40)
            if rng.random() < 0.2:
                p["pattern"] = f"^[a-{rng.choice('cfk')}]+[0-9]{{{rng.randint(1, 4)}}}$"
        elif kind < 0.6:
            p = {"type": "integer", "minimum": rng.randint(-50, 0), "maximum": rng.randint(1, 10**6)}
        elif kind < 0.8:
            p = {"enum": [f"v{rng.randrange(10**6)}" for _ in range(rng.randint(2, 6))]}
        elif depth < 2:
            p = schema(rng, depth + 1)
        else:
            p = {"type": "boolean"}
        props[name] = p
    return {"type": "object", "properties": props, "required": list(props)[: rng.randint(1, len(props))]}


def decode(cc: te.CompiledConstraint, rng: random.Random, steps: int = 300) -> None:
    m = cc.matcher()
    out = np.zeros((VOCAB.size + 31) // 32, np.uint32)
    eos = VOCAB.size - 1
    for _ in range(steps):
        m.compute_mask(out)
        bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: VOCAB.size]
        allowed = np.flatnonzero(bits).tolist()
        if not allowed or allowed == [eos]:
            return
        t = eos if eos in allowed and rng.random() < 0.3 else rng.choice([a for a in allowed if a != eos] or allowed)
        if t == eos or not m.consume(t):
            return


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schemas", type=int, default=3000)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--limit", type=int, default=None, help="regex.interning.TABLE_LIMIT")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.limit is not None:
        interning.TABLE_LIMIT = args.limit
    trims = [0, 0.0]
    trim = interning._trim

    def counted() -> int:
        t0 = time.perf_counter()
        try:
            return trim()
        finally:
            trims[0] += 1
            trims[1] += time.perf_counter() - t0

    interning._trim = counted
    rng = random.Random(args.seed)
    refused = 0
    t0 = time.perf_counter()
    print(f"limit {interning.TABLE_LIMIT:,} nodes")
    for i in range(1, args.schemas + 1):
        try:  # a generated schema may contradict itself: refused, as a server would
            g = Grammar.from_json_schema(schema(rng))
        except TetherError:
            refused += 1
        else:
            decode(te.compile(g, VOCAB), rng)
        if i % args.every == 0:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
            print(f"{i:6d} schemas: table {interning.table_size():8,} nodes, trims {trims[0]} "
                  f"({trims[1]:.2f} s), peak RSS {rss} MB, {refused} refused, "
                  f"{time.perf_counter() - t0:.0f} s",
                  flush=True)
    print(json.dumps({"schemas": args.schemas, "limit": interning.TABLE_LIMIT,
                      "table": interning.table_size(), "trims": trims[0], "refused": refused}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
