#!/usr/bin/env python3
"""Time the JSON Schema -> grammar step alone on the 300 dev schemas (no engine compile).

For each schema of ``shared/data/jsonschemabench-dev`` this runs
``Grammar.from_json_schema(schema, whitespace="flexible", property_order="schema")`` (the
peers harness's options) ``--repeat`` times and keeps the least process CPU time; prints
the p50, the p50 of the middle 40% band and the sum. Run once per tree, alternating:

    PYTHONPATH=TREE/src python bench/bench_schema_compile.py [--repeat 5] [--profile OUT]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "jsonschemabench-dev" / "schemas"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", help="write a cProfile of one pass over the schemas here")
    ap.add_argument("--json", help="write the per-schema times (file name -> ms) here")
    ap.add_argument("--only", help="profile only the schemas named in this --json file's middle 40%% band")
    args = ap.parse_args()
    import tether
    from tether.grammar.ir import Grammar

    files = sorted(BENCH.glob("*.json"))
    schemas = [json.loads(f.read_text())["schema"] for f in files]
    band_names: set[str] | None = None
    if args.only:
        earlier = sorted(json.loads(Path(args.only).read_text()).items(), key=lambda kv: kv[1])
        band_names = {k for k, _ in earlier[int(len(earlier) * 0.3):int(len(earlier) * 0.7)]}
    best: list[float] = []
    profile = cProfile.Profile() if args.profile else None
    for f, schema in zip(files, schemas, strict=True):
        profiled = profile is not None and (band_names is None or f.name in band_names)
        times = []
        for i in range(args.repeat):
            gc.collect()
            gc.disable()
            c0 = time.process_time_ns()
            try:
                if profile and profiled and i == 0:
                    profile.enable()
                Grammar.from_json_schema(schema, whitespace="flexible", property_order="schema")
            except Exception:  # noqa: BLE001 -- a schema the compiler refuses still costs its time
                pass
            finally:
                if profile:
                    profile.disable()
                gc.enable()
            times.append((time.process_time_ns() - c0) / 1e6)
        best.append(min(times))
    done = sorted(best)
    n = len(done)
    band = done[int(n * 0.3):int(n * 0.7)]
    print(f"{tether.__file__}: {n} schemas, from_json_schema CPU p50 {done[n // 2]:.3f} ms, "
          f"middle-40% mean {sum(band) / len(band):.3f} ms, sum {sum(done):.0f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({f.name: t for f, t in zip(files, best, strict=True)}))
    if profile:
        profile.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
