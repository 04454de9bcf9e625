#!/usr/bin/env python3
"""Time the parts of a mask that needs a walk but no table fill, on the peers harness's work.

Most per-token masks of a forced JSON decode are walks over filled tables (no slow-path
step): their cost sets the per-token mask p50. This script forces one valid instance of
every fifth dev schema through tether (as the harness does), keeps the matcher of every
mask that walked without a miss, then replays those masks with the mask cache cleared and
prints the mean of each part:

* ``start``: ``CompiledConstraint.start_mask`` (slice depth, slices taken whole, the walk set up);
* ``run``: ``Walk.run`` (the kernel; no miss, so one call);
* ``finish``: ``CompiledConstraint.finish_mask`` (EOS, the walked-once bookkeeping);
* ``compute_mask``: the whole public call, for the overhead around the three.

Alternate two trees (each run loads ``TREE/bench/peers_tether.py``) for an A/B of the mask
path; the process is single-threaded and each figure is a mean over ~7k calls, so it is
steadier than the harness's p50 on a shared machine. Usage (the peers venv):

    $PEERS_VENV/bin/python bench/bench_walk_parts.py /path/to/tree [--repeats 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench_tree_probe import load_tree  # (this folder: the script's own path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree", help="a checkout of tether (its bench/peers_tether.py is loaded)")
    ap.add_argument("--repeats", type=int, default=5, help="replays of each mask")
    ap.add_argument("--every", type=int, default=5, help="take every n-th dev schema")
    args = ap.parse_args()
    tree = str(Path(args.tree).resolve())
    pb = load_tree(tree)
    if pb is None:
        return 2
    import numpy as np

    vocab = pb.Vocab(need_tokenizer=True)
    adapter = pb.ADAPTERS["tether"](vocab)
    tasks = pb.schema_tasks(vocab, pb.sample_schemas(30, 0), 1, 2000)
    words = (vocab.size + 31) // 32
    bm = np.zeros(words, np.int32)
    cases = []  # (constraint, mask key, raw lexer state, a matcher at that state)
    for task in tasks[:: args.every]:
        try:
            m = adapter.compile(pb.GrammarSpec(task["kind"], task.get("source")))
        except Exception:  # noqa: BLE001 -- a schema the engine refuses: not timed here
            continue
        insts = task.get("instances") or []
        if not insts:
            continue
        tm = m.m
        cc = tm.cc
        for t in insts[0]["tokens"]:
            hits, slow = cc.stats["mask_hits"], cc.stats["slow_steps"]
            m.mask(bm)
            if cc.stats["mask_hits"] == hits and cc.stats["slow_steps"] == slow:
                key = (cc.mask_state(tm._ls), tm._node, tm._start)
                cases.append((cc, key, tm._ls, tm.copy()))
            if not m.advance(t):
                break
    out = np.zeros(words, np.uint32)
    pc = time.perf_counter_ns
    parts = {"start": 0, "run": 0, "finish": 0}
    whole = 0
    for _ in range(args.repeats):
        for cc, key, raw, _mc in cases:
            cc._walked_once.clear()
            t0 = pc()
            walk = cc.start_mask(key, out, None, cc._stacks, raw=raw)
            t1 = pc()
            walk.run()
            t2 = pc()
            cc.finish_mask(key, walk)
            t3 = pc()
            parts["start"] += t1 - t0
            parts["run"] += t2 - t1
            parts["finish"] += t3 - t2
        for cc, _key, _raw, mc in cases:
            cc._walked_once.clear()
            cc._masks.clear()
            t0 = pc()
            mc.compute_mask(out)
            whole += pc() - t0
    n = len(cases) * args.repeats
    print(f"{tree}: {len(cases)} miss-free walks x {args.repeats}; mean us: "
          + ", ".join(f"{k} {v / n / 1e3:.2f}" for k, v in parts.items())
          + f", compute_mask {whole / n / 1e3:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
