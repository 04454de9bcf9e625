#!/usr/bin/env python3
"""Compare two trees of tether on the peers harness's work, without the harness's workers.

Each run loads one tree's harness adapter (``TREE/bench/peers_tether.py``, which puts
``TREE/src`` first on the path) in this process, so run it once per tree, alternating:

* ``compile``: the 300 dev schemas in the harness's order; the process CPU time of
  compile + first mask per schema (the CPU part of TTFM, less noisy than wall time);
  prints the p50 and the sum, and the first mask's alone (p50, mean); ``--profile FILE`` writes a cProfile of those calls;
* ``mask``: the harness's own ``run_task`` over 6 schemas per category (forced tokens of
  one valid instance each); prints the per-token mask p50;
* ``whole``: ``run_task`` over all 300 dev schemas (one valid instance each): the whole
  workload as the issue counts it, compile + every mask and consume of the schemas compiled
  and accepted; prints wall and process CPU seconds, the mask p50 / p99 / mean, consume
  p50 and the slowest schemas. ``--only a,b`` keeps the schemas whose id contains one of
  the words; ``--digest`` hashes every mask (an equality check between trees; adds time
  to the loops, so compare timings without it). The harness's full ``gc.collect()``
  before each task is left out (it is not timed and takes most of the run's wall time).

Usage (the peers venv, as for bench_masks.py):

    $PEERS_VENV/bin/python bench/bench_tree_probe.py compile /path/to/tree [--json OUT] [--profile OUT]
    $PEERS_VENV/bin/python bench/bench_tree_probe.py mask /path/to/tree
    $PEERS_VENV/bin/python bench/bench_tree_probe.py whole /path/to/tree [--only WORDS] [--digest]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HARNESS_DIR = Path(__file__).resolve().parents[2] / "shared" / "tools" / "peers_bench"


def load_tree(tree: str) -> Any:
    """The harness module with ``tree``'s adapter loaded (``TREE/bench/peers_tether.py``
    puts ``TREE/src`` first on the path), or None (said on stderr) when tether was imported
    from elsewhere. ``tree``: a resolved path."""
    sys.path.insert(0, str(HARNESS_DIR))
    import peers_bench as pb

    pb.load_adapter_file(f"{tree}/bench/peers_tether.py")
    import tether

    if not tether.__file__ or not tether.__file__.startswith(tree):
        print(f"tether imported from {tether.__file__}, not from {tree}", file=sys.stderr)
        return None
    return pb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["compile", "mask", "whole"])
    ap.add_argument("tree", help="a checkout of tether (its bench/peers_tether.py is loaded)")
    ap.add_argument("--json", help="compile: write the per-schema times here")
    ap.add_argument("--profile", help="compile: write a cProfile of compile + first mask here; "
                    "whole: of the tasks run")
    ap.add_argument("--only", help="whole: schemas whose id contains one of these comma-separated words")
    ap.add_argument("--digest", action="store_true", help="whole: hash every mask (slower loops)")
    args = ap.parse_args()
    tree = str(Path(args.tree).resolve())
    pb = load_tree(tree)
    if pb is None:
        return 2
    import numpy as np

    vocab = pb.Vocab(need_tokenizer=args.what in ("mask", "whole"))
    adapter = pb.ADAPTERS["tether"](vocab)
    if args.what == "whole":
        return whole(pb, adapter, vocab, tree, args.only, args.digest, args.profile)
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
    first_us: dict[str, float] = {}
    for f in pb.sample_schemas(30, 0):
        spec = pb.GrammarSpec("json_schema", json.dumps(json.loads(f.read_text())["schema"]))
        gc.collect()
        gc.disable()
        c0 = time.process_time_ns()
        try:
            if profile:
                profile.enable()
            m = adapter.compile(spec)
            c1 = time.process_time_ns()
            m.mask(bitmask)
            cpu_ms[f.name] = (time.process_time_ns() - c0) / 1e6
            first_us[f.name] = (time.process_time_ns() - c1) / 1e3
        except Exception:  # noqa: BLE001 -- a schema the engine refuses: left out, as the harness does
            cpu_ms[f.name] = None
        finally:
            if profile:
                profile.disable()
            gc.enable()
    done = sorted(v for v in cpu_ms.values() if v is not None)
    firsts = sorted(first_us.values())
    print(f"{tree}: {len(done)} compiled, compile + first mask CPU p50 {done[len(done) // 2]:.2f} ms, "
          f"sum {sum(done):.0f} ms; first mask alone p50 {firsts[len(firsts) // 2]:.0f} us, "
          f"mean {statistics.fmean(firsts):.0f} us")
    if args.json:
        Path(args.json).write_text(json.dumps(cpu_ms))
    if profile:
        profile.dump_stats(args.profile)
    return 0


def whole(pb, adapter, vocab, tree: str, only: str | None, digest: bool, profile_to: str | None = None) -> int:  # noqa: ANN001 -- the harness module and its objects
    """The ``whole`` mode (see the module docstring)."""
    tasks = pb.schema_tasks(vocab, pb.sample_schemas(30, 0), 1, 2000)
    if only:
        tasks = [t for t in tasks if any(w in t["id"] for w in only.split(","))]
    collect = gc.collect
    gc.collect = lambda *_a: 0  # the harness's untimed full collection before each task
    h = hashlib.sha256()
    masks: list[float] = []
    moves: list[float] = []
    per: list[tuple[float, str]] = []
    compile_ms = loop_ms = 0.0
    profile = cProfile.Profile() if profile_to else None
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        if profile:
            profile.enable()
        for task in tasks:
            if digest:
                task["record_masks"] = True
            r = pb.run_task(adapter, task, lambda _msg: None)
            insts = r.get("instances") or []
            if r.get("status") != "ok" or not insts or any(i["status"] != "accepted" for i in insts):
                continue
            loops = sum(i["loop_wall_ms"] for i in insts)
            compile_ms += r["compile_ms"]
            loop_ms += loops
            per.append((r["compile_ms"] + loops, r["id"]))
            for i in insts:
                masks += i["mask_us"]
                moves += i["advance_us"]
                h.update("".join(i.get("mask_digests", [])).encode())
    finally:
        if profile:
            profile.disable()
            profile.dump_stats(profile_to)
        gc.collect = collect
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    masks.sort()
    moves.sort()
    print(f"{tree}: {len(per)} schemas compiled and accepted, {len(masks)} tokens; "
          f"compile {compile_ms / 1000:.2f} s + loops {loop_ms / 1000:.2f} s = "
          f"{(compile_ms + loop_ms) / 1000:.2f} s (whole run: wall {wall:.1f} s, CPU {cpu:.1f} s)")
    print(f"  mask p50 {masks[len(masks) // 2]:.1f} us, p99 {masks[int(len(masks) * 0.99)]:.0f} us, "
          f"mean {statistics.fmean(masks):.1f} us; consume p50 {moves[len(moves) // 2]:.2f} us")
    if digest:
        print(f"  mask digest {h.hexdigest()[:16]}")
    for t, name in sorted(per, reverse=True)[:5]:
        print(f"  {t:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
