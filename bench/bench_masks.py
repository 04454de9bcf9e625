#!/usr/bin/env python3
"""Token-mask benchmark: tether next to llguidance, xgrammar and outlines-core, one run.

Runs the shared peers harness (``../shared/tools/peers_bench/peers_bench.py``) with
tether plugged in (``bench/peers_tether.py``) on the 300 dev schemas of
``../shared/data/jsonschemabench-dev`` and the Gemma 3 vocabulary (262,144 tokens).
Each engine runs in its own single-threaded worker and forces the same canonical
tokenization of one valid instance per schema; the harness records compile time, time
to first mask (TTFM = compile + first mask), per-token mask times and acceptance.

tether runs twice: ``tether`` with the peers' JSON semantics (flexible whitespace,
properties in schema order: llguidance, xgrammar and outlines-core all enforce that order)
and ``tether_any`` with ``property_order="any"``, which no peer offers (larger grammars).

This script prints, per engine: schemas compiled, TTFM p50/p90, per-token mask
p50/p99/max, worker memory (RSS after init and peak over the run), then the bars
(tether's per-token p50 and p99 <= 2x llguidance's, TTFM p50 <= 3x), the parity figures
on the schemas tether and llguidance both compile and accept (mask p50 / p99, TTFM p50,
step mean, whole workload, consume p50, compile sum; tether / llguidance) with the
slowest 10 of them, and tether's slowest 10 schemas.

Usage (needs the peers venv: ``bash ../shared/tools/peers_bench/setup_peers_venv.sh
$PEERS_VENV`` plus ``$PEERS_VENV/bin/pip install numba``):

    $PEERS_VENV/bin/python bench/bench_masks.py                     # full: 300 schemas
    $PEERS_VENV/bin/python bench/bench_masks.py --per-category 3     # smoke run
    $PEERS_VENV/bin/python bench/bench_masks.py --report-only RESULT.json
    $PEERS_VENV/bin/python bench/bench_masks.py --spread R1.json R2.json ...   # one tree, runs

The harness file has one f-string that Python 3.11 rejects (nested double quotes); this
script runs a patched copy (that line fixed, and the worker's RSS recorded per task)
from a temporary directory, leaving the shared file untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
HARNESS = SHARED / "tools" / "peers_bench" / "peers_bench.py"
DATA = SHARED / "data" / "jsonschemabench-dev"
ADAPTER = REPO / "bench" / "peers_tether.py"
ENGINES = "tether,tether_any,llguidance,xgrammar,outlines_core"


def patched_harness(dst: Path) -> Path:
    src = HARNESS.read_text()
    try:  # older copies had an f-string that Python 3.11 rejects (nested double quotes)
        compile(src, str(HARNESS), "exec")
    except SyntaxError:
        src = src.replace('setup_peers_venv.sh "$PEERS_VENV"', "setup_peers_venv.sh '$PEERS_VENV'")
    old = "        return msg\n\n    def kill(self):"
    new = ("        if isinstance(msg, dict) and self.proc is not None:\n"
           "            msg['rss_mb'] = _rss_mb(self.proc.pid)\n"
           "        return msg\n\n    def kill(self):")
    if old in src:
        src = src.replace(old, new, 1)
    out = dst / "peers_bench.py"
    out.write_text(src)
    return out


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def f(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def report(raw: dict) -> str:
    lines = []
    lines.append(f"machine: {raw.get('machine')}; load at end {raw.get('loadavg_end')}")
    lines.append(f"schemas: {raw.get('n_schemas')}; vocab {raw.get('vocab_size')} tokens; "
                 f"rerun: {raw.get('rerun')}")
    stats = {}
    lines.append("")
    lines.append("| engine | compiled | accepted | TTFM p50 ms | TTFM p90 ms | mask p50 µs | "
                 "mask p99 µs | mask max µs | RSS init MB | RSS peak MB |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for eng, er in raw["engines"].items():
        rs = [r for r in er.get("results", []) if not r["id"].startswith(("regex:", "cfg:"))]
        ok = [r for r in rs if r.get("status") == "ok"]
        ttfm = [r["ttfm_ms"] for r in ok]
        masks = [x for r in ok for i in r.get("instances", []) for x in i["mask_us"]]
        acc = sum(1 for r in ok if r.get("instances")
                  and all(i["status"] == "accepted" for i in r["instances"]))
        rss = [r.get("rss_mb", 0.0) for r in er.get("results", []) if r.get("rss_mb")]
        s = stats[eng] = {
            "compiled": len(ok), "n": len(rs), "accepted": acc,
            "ttfm50": pct(ttfm, 50), "ttfm90": pct(ttfm, 90),
            "m50": pct(masks, 50), "m99": pct(masks, 99), "mmax": max(masks) if masks else None,
            "rss0": rss[0] if rss else None, "rssmax": max(rss) if rss else None,
        }
        lines.append(f"| {eng} | {s['compiled']}/{s['n']} | {acc} | {f(s['ttfm50'], 2)} | "
                     f"{f(s['ttfm90'], 2)} | {f(s['m50'])} | {f(s['m99'])} | {f(s['mmax'], 0)} | "
                     f"{f(s['rss0'], 0)} | {f(s['rssmax'], 0)} |")
    for eng in ("tether", "tether_any"):
        if eng not in stats or "llguidance" not in stats:
            continue
        t, g = stats[eng], stats["llguidance"]
        lines.append("")
        lines.append(f"{eng} / llguidance"
                     + (" (the bars: same JSON semantics as llguidance)" if eng == "tether" else
                        " (any property order, which llguidance does not offer: for information)"))
        for key, name, bar in (("m50", "per-token mask p50", 2), ("m99", "per-token mask p99", 2),
                               ("ttfm50", "TTFM p50", 3)):
            if t[key] is None or g[key] is None:
                lines.append(f"- {name}: n/a")
                continue
            r = t[key] / g[key]
            lines.append(f"- {name}: {eng} {t[key]:.2f} vs llguidance {g[key]:.2f} -> "
                         f"{r:.2f}x (bar <= {bar}x: {'PASS' if r <= bar else 'FAIL'})")
    lines += parity(raw)
    er = raw["engines"].get("tether")
    if er:
        rs = [r for r in er.get("results", []) if not r["id"].startswith(("regex:", "cfg:"))]
        bad = [r for r in rs if r.get("status") != "ok" or any(
            i["status"] != "accepted" for i in r.get("instances", []))]
        lines.append("")
        lines.append(f"tether failures ({len(bad)}):")
        for r in bad[:40]:
            why = r.get("error") or ", ".join(i["status"] for i in r.get("instances", []))
            lines.append(f"  {r['id']}: {r.get('status')} {str(why)[:160]}")
        ok = [r for r in rs if r.get("status") == "ok"]

        def total(r: dict) -> float:
            return r["ttfm_ms"] + sum(sum(i["mask_us"]) for i in r.get("instances", [])) / 1000

        lines.append("")
        lines.append("tether slowest 10 schemas (TTFM + all masks, ms):")
        for r in sorted(ok, key=total, reverse=True)[:10]:
            ms = [x for i in r.get("instances", []) for x in i["mask_us"]]
            lines.append(f"  {r['id']}: total {total(r):.1f}  compile {r['compile_ms']:.1f}  "
                         f"first mask {r['first_mask_us'] / 1000:.1f}  tokens {len(ms)}  "
                         f"mask p50 {f(pct(ms, 50))} µs  max {f(max(ms) if ms else None, 0)} µs")
    return "\n".join(lines)


def _good(er: dict) -> dict[str, dict]:
    """Schemas compiled with every instance accepted, by id."""
    return {r["id"]: r for r in er.get("results", [])
            if not r["id"].startswith(("regex:", "cfg:")) and r.get("status") == "ok"
            and r.get("instances") and all(i["status"] == "accepted" for i in r["instances"])}


def _figures(rs: list[dict]) -> dict[str, float | None]:
    masks = [x for r in rs for i in r["instances"] for x in i["mask_us"]]
    steps = [m + a for r in rs for i in r["instances"]
             for m, a in zip(i["mask_us"], i["advance_us"], strict=False)]
    moves = [x for r in rs for i in r["instances"] for x in i["advance_us"]]
    whole = sum(r["compile_ms"] + sum(i["loop_wall_ms"] for i in r["instances"]) for r in rs)
    return {"mask p50 µs": pct(masks, 50), "mask p99 µs": pct(masks, 99),
            "TTFM p50 ms": pct([r["ttfm_ms"] for r in rs], 50),
            "step mean µs": sum(steps) / len(steps) if steps else None,
            "whole workload s": whole / 1000,
            "consume p50 µs": pct(moves, 50),
            "compile sum s": sum(r["compile_ms"] for r in rs) / 1000}


def _common_figures(raw: dict) -> tuple[list[str], dict, dict, dict, dict]:
    """The schemas tether and llguidance both compile and accept, each engine's results
    by id, and each engine's ``_figures`` over those schemas."""
    eng = raw["engines"]
    t, g = _good(eng["tether"]), _good(eng["llguidance"])
    common = sorted(set(t) & set(g))
    return common, t, g, _figures([t[k] for k in common]), _figures([g[k] for k in common])


def parity(raw: dict) -> list[str]:
    """Issue 16's figures: on the schemas tether and llguidance both compile and accept,
    tether / llguidance for mask p50 and p99, TTFM p50, the step (mask + consume) mean and
    the whole workload (compile + every step's loop, wall), each engine's own timings."""
    eng = raw["engines"]
    if "tether" not in eng or "llguidance" not in eng:
        return []
    common, t, g, ft, fg = _common_figures(raw)
    if not common:
        return []
    lines = ["", f"parity (issue 16): the {len(common)} schemas both tether and llguidance "
             "compile and accept", "| figure | tether | llguidance | tether / llguidance |",
             "|---|---:|---:|---:|"]
    for name, x in ft.items():
        y = fg[name]
        ratio = f"{x / y:.2f}" if x is not None and y else "-"
        lines.append(f"| {name} | {f(x, 2)} | {f(y, 2)} | {ratio} |")

    def total(r: dict) -> float:
        return r["compile_ms"] + sum(i["loop_wall_ms"] for i in r["instances"])

    lines.append("")
    lines.append("slowest 10 of those for tether (compile + loop, ms; llguidance beside):")
    for k in sorted(common, key=lambda k: total(t[k]), reverse=True)[:10]:
        ms = [x for i in t[k]["instances"] for x in i["mask_us"]]
        lines.append(f"  {k}: tether {total(t[k]):.1f} (compile {t[k]['compile_ms']:.1f}, "
                     f"{len(ms)} tokens, mask max {max(ms) / 1000:.1f} ms)  "
                     f"llguidance {total(g[k]):.1f}")
    return lines


def spread(raws: list[dict]) -> list[str]:
    """Issue 16's ratios over several runs of one tree (each run's own common schemas):
    per figure, every run's tether / llguidance, their median and range. One run of the
    harness gives each engine its own window of the machine, and on a shared 2-core
    machine the ratios of one tree moved by up to 0.2 between runs."""
    per: dict[str, list[float]] = {}
    for raw in raws:
        _, _, _, ft, fg = _common_figures(raw)
        for name, x in ft.items():
            y = fg[name]
            if x is not None and y:
                per.setdefault(name, []).append(x / y)
    lines = [f"tether / llguidance over {len(raws)} runs: each run, then median [min..max]"]
    for name, rs in per.items():
        runs = " ".join(f"{r:.2f}" for r in rs)
        lines.append(f"  {name:18s} {runs}   median {statistics.median(rs):.2f} "
                     f"[{min(rs):.2f}..{max(rs):.2f}]")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default=ENGINES)
    ap.add_argument("--per-category", type=int, default=30, help="30 = all 300 dev schemas")
    ap.add_argument("--engine-budget-s", type=float, default=3600)
    ap.add_argument("--compile-timeout", type=float, default=10)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "masks"))
    ap.add_argument("--report-only", default=None)
    ap.add_argument("--spread", nargs="+", metavar="RESULT.json",
                    help="the parity ratios of several runs of one tree (no run)")
    a, rest = ap.parse_known_args()
    if a.report_only:
        print(report(json.loads(Path(a.report_only).read_text())))
        return
    if a.spread:
        print("\n".join(spread([json.loads(Path(r).read_text()) for r in a.spread])))
        return
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        h = patched_harness(Path(tmp))
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        cmd = [sys.executable, str(h), "--adapter-file", str(ADAPTER), "--engines", a.engines,
               "--data-dir", str(DATA), "--per-category", str(a.per_category),
               "--engine-budget-s", str(a.engine_budget_s), "--compile-timeout",
               str(a.compile_timeout), "--out", a.out, *rest]
        print("running:", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, env=env, cwd=tmp)
    print(report(json.loads(Path(a.out + ".json").read_text())))


if __name__ == "__main__":
    main()
