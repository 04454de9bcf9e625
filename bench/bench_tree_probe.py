#!/usr/bin/env python3
"""Compare two trees of tether on the peers harness's work, without the harness's workers.

Each run loads one tree's harness adapter (``TREE/bench/peers_tether.py``, which puts
``TREE/src`` first on the path) in this process, so run it once per tree, alternating:

* ``compile``: the 300 dev schemas in the harness's order; the process CPU time of
  compile + first mask per schema (the CPU part of TTFM, less noisy than wall time);
  prints the p50 and the sum; ``--profile FILE`` writes a cProfile of those calls;
* ``mask``: the harness's own ``run_task`` over 6 schemas per category (forced tokens of
  one valid instance each); prints the per-token mask p50.

Usage (the peers venv, as for bench_masks.py):

    $PEERS_VENV/bin/python bench/bench_tree_probe.py compile /path/to/tree [--json OUT] [--profile OUT]
    $PEERS_VENV/bin/python bench/bench_tree_probe.py mask /path/to/tree
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import statistics
import sys
import time
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parents[2] / "shared" / "tools" / "peers_bench"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["compile", "mask"])
    ap.add_argument("tree", help="a checkout of tether (its bench/peers_tether.py is loaded)")
    ap.add_argument("--json", help="compile: write the per-schema times here")
    ap.add_argument("--profile", help="compile: write a cProfile of compile + first mask here")
    args = ap.parse_args()
    tree = str(Path(args.tree).resolve())
    sys.path.insert(0, str(HARNESS_DIR))
    import numpy as np
    import peers_bench as pb

    pb.load_adapter_file(f"{tree}/bench/peers_tether.py")
    import tether

    if not tether.__file__ or not tether.__file__.startswith(tree):
        print(f"tether imported from {tether.__file__}, not from {tree}", file=sys.stderr)
        return 2
    vocab = pb.Vocab(need_tokenizer=args.what == "mask")
    adapter = pb.ADAPTERS["tether"](vocab)
    if args.what == "mask":
        tasks = pb.schema_tasks(vocab, pb.sample_schemas(6, 0), 1, 2000)
        times: list[float] = []
        for task in tasks:
            result = pb.run_task(adapter, task, lambda _msg: None)
            for inst in result.get("instances", []):
                times += inst["mask_us"]
        print(f"{tree}: {len(times)} tokens, mask p50 {statistics.median(times):.1f} us")
        return 0
    bitmask = np.zeros((vocab.size + 31) // 32, dtype=np.int32)
    profile = cProfile.Profile() if args.profile else None
    cpu_ms: dict[str, float | None] = {}
    for f in pb.sample_schemas(30, 0):
        spec = pb.GrammarSpec("json_schema", json.dumps(json.loads(f.read_text())["schema"]))
        gc.collect()
        gc.disable()
        c0 = time.process_time_ns()
        try:
            if profile:
                profile.enable()
            adapter.compile(spec).mask(bitmask)
            cpu_ms[f.name] = (time.process_time_ns() - c0) / 1e6
        except Exception:  # noqa: BLE001 -- a schema the engine refuses: left out, as the harness does
            cpu_ms[f.name] = None
        finally:
            if profile:
                profile.disable()
            gc.enable()
    done = sorted(v for v in cpu_ms.values() if v is not None)
    print(f"{tree}: {len(done)} compiled, compile + first mask CPU p50 {done[len(done) // 2]:.2f} ms, "
          f"sum {sum(done):.0f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(cpu_ms))
    if profile:
        profile.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
