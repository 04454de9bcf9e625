#!/usr/bin/env python3
"""Batch mask step time: tether's ``compute_masks`` beside llguidance's parallel fill.

One decoding step of a batch of B sequences needs B token masks. This measures, in one
process and on the same steps, the time of

* tether: ``tether.engine.compute_masks(matchers, out2d, threads=T)`` (``uint32[B, 8192]``);
* llguidance: ``llguidance.numpy.fill_next_token_bitmask_par(LLExecutor(T), pairs, bitmask)``
  (``int32[B, 8192]``),

for B in 32, 64, 128, 256 (``--batch``) and thread counts ``--threads``.

Vocabulary and grammars are the shared peers harness's
(``../shared/tools/peers_bench/peers_bench.py``): its ``Vocab`` (Gemma 3, 262,144 tokens),
its llguidance adapter (``LLTokenizer(TokenizerWrapper(...))``, ``grammar_from_json_schema``
with the harness's defaults) and tether's harness adapter (``bench/peers_tether.py``:
``Grammar.from_json_schema(schema, whitespace="flexible", property_order="schema")``, the
peers' JSON semantics), so both engines see the same vocabulary and the same JSON text.

Workload: the 300 dev schemas (``../shared/data/jsonschemabench-dev``, the harness's
round-robin order over the 10 categories), each with its first valid instance tokenized as
the harness does (canonical Gemma tokens of ``json.dumps(instance, ensure_ascii=False)``).
A preparation pass keeps the pairs that both engines compile and accept token by token
(single-sequence masks, separate compiled objects). Slot i of a batch holds pair
``i % P`` (P pairs; consecutive slots are different schemas of different categories);
a slot that repeats a pair starts ``(i // P) * 13`` tokens into its instance (consumed
before timing) so twins are not in lockstep. Step k: every slot's mask is filled (timed,
per engine), the masks are compared, every slot consumes its next token (timed
separately: tether calls ``Matcher.consume`` row by row, llguidance
``consume_token_par``). Rule for finished sequences: **restart** -- a slot whose instance
is fully consumed resets its matcher and starts the instance again, so every step has
exactly B rows.

Regimes, per repeat (each repeat compiles everything again):

* ``cold``: fresh compiled constraints (``CompiledConstraint(grammar, vocab)``, bypassing
  tether's compile cache, so its mask cache starts empty) and fresh ``LLMatcher`` objects.
  Step 0 (each sequence's first mask: compile-time work for tether) is reported apart as
  ``first``; steps 1..K are ``steady``. Repeated pairs and restarts find tether's mask
  cache filled by earlier rows/steps, as a server reusing compiled schemas would.
* ``warm``: the same compiled objects, matchers reset, the same K+1 steps again: tether
  stores a mask at its key's second walk, so a key the cold pass met once is walked
  again here (over filled tables) and stored, and a key met twice is a cache hit (a
  server's steady state for schemas it has seen: from the third visit on, every mask
  is a hit).
* ``tables``: fresh constraints with tether's mask cache limited to one entry
  (``mask_cache_bytes=1``) and fresh ``LLMatcher`` objects; one untimed pass over the
  K+1 steps builds both engines' lexer and parser tables, then the matchers are reset
  and the same steps are timed: every tether mask is a trie walk (the kernels, on
  ``threads`` threads) over tables already built, no Python slow path. This splits the
  ``cold`` cost into the walk itself and the table building.

Columns: ``first`` = step 0 (ms, whole batch), ``cons`` = consume p50 per step (ms,
whole batch), ``misses`` = tether rows whose mask was computed (not a cache hit) over the
K steady steps.

Bit-for-bit check: every step, every row of the two masks is compared (outside the
timing); rows that differ only in the EOS bit are counted apart, other differences are
listed with the tokens only one engine allows.

Usage (the peers venv has llguidance 1.9.1 and numba; tether comes from this checkout):

    PYTHONPATH=src /work/peers_venv/bin/python bench/bench_batch_masks.py \
        --batch 32,64,128,256 --threads 1,2 --steps 64 --repeats 3 \
        --out bench/results/batch-masks-DATE.txt
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
HARNESS_DIR = SHARED / "tools" / "peers_bench"
DATA = SHARED / "data" / "jsonschemabench-dev"

sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HARNESS_DIR))
sys.path.insert(0, str(REPO / "bench"))

import peers_bench as pb  # noqa: E402  (the shared harness: Vocab, adapters, sampling)
import peers_tether as pt  # noqa: E402  (tether's harness adapter: registers with pb)


@dataclass
class Pair:
    id: str
    source: str
    tokens: list[int]


@dataclass
class Stats:
    fill_t: list[float] = field(default_factory=list)  # us per step, tether
    fill_l: list[float] = field(default_factory=list)  # us per step, llguidance
    cons_t: list[float] = field(default_factory=list)
    cons_l: list[float] = field(default_factory=list)
    first_t: float = 0.0
    first_l: float = 0.0
    rows: int = 0
    diff_eos: int = 0
    diff_other: int = 0
    examples: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)  # differing rows by kind of token
    misses: int = 0  # tether rows whose mask was not cached (steady steps)


# ---------------------------------------------------------------------------- preparation

class _Timeout(Exception):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise _Timeout


def prepare(vocab: pb.Vocab, tad: Any, lad: Any, timeout_s: float, limit: int | None,
            log: Any) -> tuple[list[Pair], dict[str, int]]:
    """The (schema, instance) pairs that both engines compile and accept, token by token."""
    pb.DATA_DIR = DATA
    files = pb.sample_schemas(30, 20251121)
    tasks = pb.schema_tasks(vocab, files, 1, 4000)
    if limit:
        tasks = tasks[:limit]
    words = (vocab.size + 31) // 32
    bm = np.zeros(words, np.int32)
    counts = {"schemas": len(tasks), "no_instance": 0, "tether_compile": 0, "llg_compile": 0,
              "tether_rejects": 0, "llg_rejects": 0, "kept": 0}
    signal.signal(signal.SIGALRM, _alarm)
    out = []
    for n, t in enumerate(tasks):
        if not t["instances"]:
            counts["no_instance"] += 1
            continue
        toks = t["instances"][0]["tokens"]
        spec = pb.GrammarSpec("json_schema", t["source"])
        ok = True
        for name, ad in (("tether", tad), ("llg", lad)):
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            try:
                m = ad.compile(spec)
                for tok in toks:
                    m.mask(bm)
                    if not pb._bit(bm, tok) or not m.advance(tok):
                        counts[f"{name}_rejects"] += 1
                        ok = False
                        break
                else:
                    if not m.is_accepting():
                        counts[f"{name}_rejects"] += 1
                        ok = False
            except (pb.Unsupported, _Timeout, Exception):  # noqa: BLE001 -- any failure drops the pair
                counts[f"{name}_compile"] += 1
                ok = False
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if not ok:
                break
        if ok:
            out.append(Pair(t["id"], t["source"], toks))
        if (n + 1) % 50 == 0:
            print(f"prepared {n + 1}/{len(tasks)}: kept {len(out)}", file=log, flush=True)
    counts["kept"] = len(out)
    return out, counts


# ---------------------------------------------------------------------------- one run

class Batch:
    """B slots of both engines' matchers, at the same positions of the same instances."""

    def __init__(self, pairs: list[Pair], b: int, tad: Any, lad: Any, llg: Any,
                 **cc_options: Any) -> None:
        from tether.engine import CompiledConstraint

        self.pairs = pairs
        p = len(pairs)
        distinct = pairs[:min(b, p)]
        self.cc = [CompiledConstraint(pt.schema_grammar(x.source, tad.json_options), tad.tv,
                                      **cc_options) for x in distinct]
        self.grammars = [llg.LLMatcher.grammar_from_json_schema(x.source, defaults=lad.json_defaults)
                         for x in distinct]
        self.slot_pair = [i % p for i in range(b)]
        self.offset = [((i // p) * 13) % len(pairs[i % p].tokens) for i in range(b)]
        self.tm = [self.cc[i % p].matcher() for i in range(b)]
        self.lm = [llg.LLMatcher(lad.tok, self.grammars[i % p], log_level=0) for i in range(b)]
        self.pos = [0] * b
        self.reset()

    def reset(self) -> None:
        for i in range(len(self.tm)):
            self.tm[i].reset()
            self.lm[i].reset()
            self.pos[i] = 0
            toks = self.pairs[self.slot_pair[i]].tokens
            for tok in toks[:self.offset[i]]:
                if not (self.tm[i].consume(tok) and self.lm[i].consume_token(tok)):
                    raise RuntimeError(f"slot {i}: prefix rejected")
                self.pos[i] += 1

    def next_tokens(self) -> list[int]:
        return [self.pairs[self.slot_pair[i]].tokens[self.pos[i]] for i in range(len(self.tm))]

    def advanced(self) -> None:
        """Positions after a consume; restart the slots whose instance is done."""
        for i in range(len(self.tm)):
            self.pos[i] += 1
            if self.pos[i] == len(self.pairs[self.slot_pair[i]].tokens):
                self.tm[i].reset()
                self.lm[i].reset()
                self.pos[i] = 0


def compare(st: Stats, batch: Batch, out_t: np.ndarray, out_l: np.ndarray, eos: int,
            vocab: pb.Vocab, step: int) -> None:
    a = out_t
    b = out_l.view(np.uint32)
    diff = a != b
    rows = np.nonzero(diff.any(axis=1))[0]
    st.rows += a.shape[0]
    w, bit = eos >> 5, np.uint32(1 << (eos & 31))
    for r in rows:
        d = np.nonzero(diff[r])[0]
        if len(d) == 1 and d[0] == w and (a[r, w] ^ b[r, w]) == bit:
            st.diff_eos += 1
            continue
        st.diff_other += 1
        x = np.unpackbits(a[r].view(np.uint8), bitorder="little").astype(bool)
        y = np.unpackbits(b[r].view(np.uint8), bitorder="little").astype(bool)
        only_t = np.nonzero(x & ~y)[0]
        only_l = np.nonzero(y & ~x)[0]
        kind = (f"tether-only: {classify([vocab.tokens[i] for i in only_t])}; "
                f"llguidance-only: {classify([vocab.tokens[i] for i in only_l])}")
        st.kinds[kind] = st.kinds.get(kind, 0) + 1
        if st.kinds[kind] == 1:  # one example of each kind
            pair = batch.pairs[batch.slot_pair[r]]
            seen = vocab.decode_bytes(pair.tokens[:batch.pos[r]])[-40:]
            st.examples.append(
                f"step {step} slot {r} {pair.id} at token {batch.pos[r]} after ...{seen!r}: "
                f"tether-only {len(only_t)} {[vocab.tokens[i] for i in only_t[:5]]}, "
                f"llguidance-only {len(only_l)} {[vocab.tokens[i] for i in only_l[:5]]} [{kind}]")


def classify(toks: list[bytes]) -> str:
    """What a set of tokens allowed by one engine only has in common (for the report)."""
    if not toks:
        return "none"
    kinds = set()
    for t in toks:
        if t and not t.strip(b" \t\n\r"):
            kinds.add("whitespace-only tokens")
        elif b"\x7f" in t:
            kinds.add("tokens with DEL (0x7f)")
        elif b"\\/" in t:
            kinds.add("tokens with the \\/ escape")
        else:
            kinds.add("other tokens")
    return " + ".join(sorted(kinds))


def run_steps(batch: Batch, st: Stats, steps: int, threads: int, ex: Any, llnp: Any,
              out_t: np.ndarray, out_l: np.ndarray, eos: int, vocab: pb.Vocab,
              count_misses: bool) -> None:
    from tether.engine import compute_masks

    pc = time.perf_counter_ns
    lpairs = [(m, i) for i, m in enumerate(batch.lm)]
    ccs = {id(m.cc): m.cc for m in batch.tm}
    for k in range(steps + 1):
        lpairs = [(m, i) for i, m in enumerate(batch.lm)]
        miss0 = sum(c.stats["mask_misses"] for c in ccs.values())
        if k % 2 == 0:
            t0 = pc()
            compute_masks(batch.tm, out_t, threads=threads)
            t1 = pc()
            llnp.fill_next_token_bitmask_par(ex, lpairs, out_l)
            t2 = pc()
            ft, fl = t1 - t0, t2 - t1
        else:
            t0 = pc()
            llnp.fill_next_token_bitmask_par(ex, lpairs, out_l)
            t1 = pc()
            compute_masks(batch.tm, out_t, threads=threads)
            t2 = pc()
            ft, fl = t2 - t1, t1 - t0
        if k == 0:
            st.first_t += ft / 1e3
            st.first_l += fl / 1e3
        else:
            st.fill_t.append(ft / 1e3)
            st.fill_l.append(fl / 1e3)
            if count_misses:
                st.misses += sum(c.stats["mask_misses"] for c in ccs.values()) - miss0
        compare(st, batch, out_t, out_l, eos, vocab, k)
        toks = batch.next_tokens()
        t0 = pc()
        for m, tok in zip(batch.tm, toks, strict=True):
            if not m.consume(tok):
                raise RuntimeError(f"tether rejected a forced token: {m.error}")
        t1 = pc()
        oks = llnp.consume_token_par(ex, list(zip(batch.lm, toks, strict=True)))
        t2 = pc()
        if not all(oks):
            raise RuntimeError("llguidance rejected a forced token")
        if k > 0:
            st.cons_t.append((t1 - t0) / 1e3)
            st.cons_l.append((t2 - t1) / 1e3)
        batch.advanced()


# ---------------------------------------------------------------------------- report

def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def ms(x: float) -> str:
    return f"{x / 1e3:8.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", default="32,64,128,256")
    ap.add_argument("--threads", default="1,2", help="thread counts (both engines get the same)")
    ap.add_argument("--steps", type=int, default=64, help="steady steps per run (after step 0)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="first N dev schemas only (smoke runs)")
    ap.add_argument("--compile-timeout", type=float, default=10.0)
    ap.add_argument("--pairs", default=None, help="JSON cache of the prepared pair ids (reused if present)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    log = sys.stderr
    import llguidance as llg
    import llguidance.numpy as llnp

    from tether.engine.batch import default_threads

    load0 = os.getloadavg()
    t_start = time.time()
    vocab = pb.Vocab()
    tad = pt.TetherAdapter(vocab)
    lad = pb.LLGuidanceAdapter(vocab)
    eos = vocab.eos_id
    pairs: list[Pair]
    if a.pairs and Path(a.pairs).exists():
        saved = json.loads(Path(a.pairs).read_text())
        pairs = [Pair(**p) for p in saved["pairs"]]
        counts = saved["counts"]
        print(f"reused {len(pairs)} pairs from {a.pairs}", file=log)
    else:
        pairs, counts = prepare(vocab, tad, lad, a.compile_timeout, a.limit, log)
        if a.pairs:
            Path(a.pairs).write_text(json.dumps({"counts": counts, "pairs": [p.__dict__ for p in pairs]}))
    print(f"pairs: {counts}", file=log)
    words = (vocab.size + 31) // 32
    batches = [int(x) for x in a.batch.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    results: dict[tuple[int, int, str], list[Stats]] = {}
    loads = []
    for rep in range(a.repeats):
        for b in batches:
            for th in threads:
                ex = llg.LLExecutor(num_threads=th)
                out_t = np.zeros((b, words), np.uint32)
                out_l = np.zeros((b, words), np.int32)
                for regime in ("cold", "warm", "tables"):
                    gc.collect()
                    if regime == "cold":
                        batch = Batch(pairs, b, tad, lad, llg)
                    elif regime == "warm":
                        batch.reset()
                    else:  # mask cache of one entry: a first pass builds the tables, untimed
                        batch = Batch(pairs, b, tad, lad, llg, mask_cache_bytes=1)
                        run_steps(batch, Stats(), a.steps, th, ex, llnp, out_t, out_l, eos, vocab, False)
                        batch.reset()
                    st = Stats()
                    gc.disable()
                    try:
                        run_steps(batch, st, a.steps, th, ex, llnp, out_t, out_l, eos, vocab,
                                  regime != "warm")
                    finally:
                        gc.enable()
                    results.setdefault((b, th, regime), []).append(st)
                    print(f"rep {rep} B={b} threads={th} {regime}: tether p50 "
                          f"{pct(st.fill_t, 50):.0f} us, llguidance p50 {pct(st.fill_l, 50):.0f} us, "
                          f"diff rows {st.diff_other} (+{st.diff_eos} EOS only)", file=log, flush=True)
                loads.append(os.getloadavg()[0])
                del batch, ex
    load1 = os.getloadavg()

    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()
    L = []
    L.append("# Batch mask step time: tether compute_masks vs llguidance fill_next_token_bitmask_par")
    L.append(f"# date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}; "
             f"wall {time.time() - t_start:.0f} s")
    L.append("# command: PYTHONPATH=src /work/peers_venv/bin/python bench/bench_batch_masks.py "
             + " ".join(sys.argv[1:]))
    L.append(f"# machine: {platform.machine()}, {os.cpu_count()} cores (shared with other work), "
             f"Python {platform.python_version()}, numpy {np.__version__}; load average at start "
             f"{load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, at end {load1[0]:.2f} {load1[1]:.2f} "
             f"{load1[2]:.2f}, 1-min load after each run: min {min(loads):.2f} max {max(loads):.2f}")
    L.append(f"# tether {rev} (JSON options {tad.json_options}; tether's default_threads() here = "
             f"{default_threads()}); llguidance {llg.__version__ if hasattr(llg, '__version__') else '1.9.1'} "
             f"({lad.settings()})")
    L.append(f"# vocab: Gemma 3, {vocab.size} tokens, fingerprint {vocab.fingerprint()} (peers harness Vocab)")
    L.append(f"# pairs: {counts}; a batch of B uses pairs 0..B-1 (mod {len(pairs)}), restart rule; "
             f"{a.steps} steady steps after step 0; {a.repeats} repeats")
    L.append("# times in ms per step for the whole batch (mask fill only); both engines given the same "
             "thread count (tether threads=T, LLExecutor(num_threads=T))")
    L.append("")
    hdr = (f"{'B':>4} {'thr':>3} {'regime':>6} | {'tether p50':>10} {'p90':>8} {'mean':>8} | "
           f"{'llg p50':>8} {'p90':>8} {'mean':>8} | {'ratio p50':>9} {'mean':>6} | "
           f"{'first t':>8} {'first l':>8} | {'cons t':>7} {'cons l':>7} | {'misses':>6}")
    L.append("Per run (one line per repeat):")
    L.append(hdr)
    summary = []
    for (b, th, regime), sts in sorted(results.items()):
        ratios = []
        for st in sts:
            rt, rl = pct(st.fill_t, 50), pct(st.fill_l, 50)
            mt, ml = statistics.fmean(st.fill_t), statistics.fmean(st.fill_l)
            ratios.append(rt / rl)
            L.append(f"{b:>4} {th:>3} {regime:>6} | {ms(rt):>10} {ms(pct(st.fill_t, 90))} {ms(mt)} | "
                     f"{ms(rl)} {ms(pct(st.fill_l, 90))} {ms(ml)} | {rt / rl:9.2f} {mt / ml:6.2f} | "
                     f"{ms(st.first_t)} {ms(st.first_l)} | {ms(statistics.median(st.cons_t)):>7} "
                     f"{ms(statistics.median(st.cons_l)):>7} | {st.misses:>6}")
        allt = [x for st in sts for x in st.fill_t]
        alll = [x for st in sts for x in st.fill_l]
        summary.append((b, th, regime, allt, alll, ratios, sts))
    L.append("")
    L.append("Summary (all repeats pooled; ratio = tether / llguidance; spread = min..max of the "
             "per-repeat p50 ratio):")
    L.append(f"{'B':>4} {'thr':>3} {'regime':>6} | {'tether p50':>10} {'p90':>8} {'mean':>8} | "
             f"{'llg p50':>8} {'p90':>8} {'mean':>8} | {'ratio p50':>9} {'p90':>5} {'mean':>5} | "
             f"{'spread':>11} | {'diff rows':>9} {'EOS-only':>8} {'rows':>7}")
    for b, th, regime, allt, alll, ratios, sts in summary:
        L.append(f"{b:>4} {th:>3} {regime:>6} | {ms(pct(allt, 50)):>10} {ms(pct(allt, 90))} "
                 f"{ms(statistics.fmean(allt))} | {ms(pct(alll, 50))} {ms(pct(alll, 90))} "
                 f"{ms(statistics.fmean(alll))} | {pct(allt, 50) / pct(alll, 50):9.2f} "
                 f"{pct(allt, 90) / pct(alll, 90):5.2f} {statistics.fmean(allt) / statistics.fmean(alll):5.2f} | "
                 f"{min(ratios):5.2f}..{max(ratios):5.2f} | {sum(s.diff_other for s in sts):>9} "
                 f"{sum(s.diff_eos for s in sts):>8} {sum(s.rows for s in sts):>7}")
    kinds: dict[str, int] = {}
    for _, _, _, _, _, _, sts in summary:
        for st in sts:
            for k, v in st.kinds.items():
                kinds[k] = kinds.get(k, 0) + v
    L.append("")
    L.append("Rows whose masks differ (beyond EOS), all runs, by what the differing tokens are:")
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]):
        L.append(f"  {v:>7}  {k}")
    ex = [e for _, _, _, _, _, _, sts in summary for st in sts for e in st.examples]
    L.append("")
    L.append("One example of each kind of disagreement:")
    for e in list(dict.fromkeys(ex))[:30]:
        L.append("  " + e)
    if not ex:
        L.append("  none")
    text = "\n".join(L) + "\n"
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
