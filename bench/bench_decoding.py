"""Tokens per second of constrained vs. unconstrained decoding on the same token sequences.

Seed 001's method: first generate, under each JSON schema, a few outputs (the "ground
truth" token sequences); then time *forced decoding* of exactly those sequences in each
mode, so every mode runs the network on the same tokens:

* ``free``         – unconstrained: one model call per token, argmax over the whole vocabulary;
* ``mask``         – constrained: mask from the engine, scores of the allowed tokens, one call per token;
* ``mask+ff``      – plus fast-forward: forced tokens appended without sampling, the forced
                     run evaluated in the next model call;
* ``mask+sel``     – constrained with selective logits (only the allowed rows of the
                     unembedding; backends that offer ``logits_rows``);
* ``mask+ff+sel``  – both.

Reported: tokens, model calls, seconds, tokens/s and the ratio to ``free`` (bar: >= 1.0
on the Character schema). The chosen token is checked against the ground truth in every
mode (the mask must allow it).

    PYTHONPATH=src python bench/bench_decoding.py                       # embedded llama.cpp
    PYTHONPATH=src python bench/bench_decoding.py --backend transformers  # needs torch
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tether.decoding.guide import Guide
from tether.decoding.logits import scores
from tether.decoding.sampling import argmax
from tether.engine import compile as compile_constraint
from tether.grammar import Grammar
from tether.program import generate
from tether.program.generate import canonical_tokenizer

CHARACTER = {
    "$defs": {"Armor": {"enum": ["leather", "chainmail", "plate"], "title": "Armor", "type": "string"}},
    "properties": {
        "name": {"maxLength": 10, "title": "Name", "type": "string"},
        "age": {"title": "Age", "type": "integer"},
        "armor": {"$ref": "#/$defs/Armor"},
        "strength": {"title": "Strength", "type": "integer"},
    },
    "required": ["name", "age", "armor", "strength"],
    "title": "Character",
    "type": "object",
}
CHARACTER_PROMPT = (
    "// JSON description of characters with different names and properties.\n"
    '// Armor can be "leather", "chainmail", or "plate"\n'
    'character1 = {"name": "Gustavo", "age": 30, "armor": "plate", "strength": 10}\n\n'
    "character2 = "
)
DATA = Path(__file__).resolve().parents[1] / "../shared/data/jsonschemabench-dev/schemas"
DEV_SCHEMA = "Github_easy---o10016.json"


def reset(model: Any) -> None:
    if hasattr(model, "reset"):
        model.reset()


def forced_run(model: Any, prompt: list[int], target: list[int], cc: Any | None, *, ff: bool,
               selective: bool) -> tuple[float, int, int, float]:
    """Decode ``target`` after ``prompt`` in one mode; returns (seconds, model calls,
    tokens, seconds spent computing masks)."""
    reset(model)
    model.logits(prompt)  # the prompt is evaluated outside the timed region, in every mode
    calls0 = model.costs.model_calls
    guide = Guide(cc.matcher() if cc is not None else None, model.vocabulary)
    seq = list(prompt)
    i = 0
    mask_s = 0.0
    t0 = time.perf_counter()
    while i < len(target):
        if ff and cc is not None:
            forced = guide.fast_forward()
            k = 0
            while k < len(forced) and i < len(target) and forced[k] == target[i]:
                guide.consume(target[i])
                seq.append(target[i])
                i += 1
                k += 1
            if k:
                continue
        tm = time.perf_counter()
        ids = guide.allowed()
        mask_s += time.perf_counter() - tm
        v = scores(model, seq, ids, selective=selective)
        argmax(v)  # the decoder's choice (the forced token is taken instead)
        t = target[i]
        if ids is not None and not np.any(ids == t):
            raise AssertionError(f"the mask refuses ground-truth token {t} at step {i}")
        if not guide.consume(t):
            raise AssertionError(f"the matcher refuses ground-truth token {t}: {guide.error}")
        seq.append(t)
        i += 1
    dt = time.perf_counter() - t0
    return dt, model.costs.model_calls - calls0, len(target), mask_s


def ground_truth(model: Any, prompt: str, schema: dict, seeds: range, max_tokens: int) -> list[list[int]]:
    out = []
    for s in seeds:
        g = generate(model, prompt, schema, decoder="sample", temperature=0.7, seed=s,
                     max_tokens=max_tokens, close_on_budget=True, healing=False)
        if not g.valid:
            print(f"  (seed {s}: invalid ground truth skipped: {g.error})", file=sys.stderr)
            continue
        out.append(g.tokens)
    return out


def load(backend: str) -> Any:
    from tether.models import load_model

    if backend == "llama":
        return load_model("embedded")
    from tether.models.transformers_model import TransformersModel

    return TransformersModel.embedded()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=["llama", "transformers"], default="llama")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2, help="timed passes per mode (best kept)")
    ap.add_argument("--max-tokens", type=int, default=120)
    ap.add_argument("--dev-schema", default=DEV_SCHEMA)
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args()

    model = load(args.backend)
    vocab = model.vocabulary
    schemas = [("Character", CHARACTER, CHARACTER_PROMPT)]
    dev = DATA / args.dev_schema
    if dev.exists():
        entry = json.loads(dev.read_text())
        schemas.append((f"dev:{entry['id']}", entry["schema"], "A JSON document:\n"))
    else:
        print(f"(dev schema {dev} not found; only Character)", file=sys.stderr)
    has_sel = hasattr(model, "logits_rows")
    modes = [("free", False, False, False), ("mask", True, False, False), ("mask+ff", True, True, False)]
    if has_sel:
        modes += [("mask+sel", True, False, True), ("mask+ff+sel", True, True, True)]
    rows = []
    cal = getattr(model, "calibration", None)
    if cal:  # the measured switch point of selective logits
        print("selective logits, seconds per unembedding (0 = full matrix): "
              + ", ".join(f"{k}: {v * 1e3:.2f} ms" for k, v in sorted(cal.items())))
    print(f"model: {getattr(model, 'name', model)} ({args.backend}); selective logits: "
          f"{'yes, threshold ' + str(getattr(model, 'selective_threshold', '?')) if has_sel else 'not offered by this backend'}")
    for name, schema, prompt_text in schemas:
        cc = compile_constraint(Grammar.from_json_schema(schema), vocab, tokenize=canonical_tokenizer(model))
        prompt = list(model.tokenize(prompt_text, add_bos=True))
        targets = ground_truth(model, prompt_text, schema, range(args.seeds), args.max_tokens)
        if not targets:
            print(f"{name}: no valid ground truth", file=sys.stderr)
            continue
        for t in targets:  # warm caches (masks, numba) so timings measure steady state
            forced_run(model, prompt, t, cc, ff=False, selective=False)
        base = None
        for mode, constrained, ff, sel in modes:
            best = None
            for _ in range(args.repeats):
                tot = [0.0, 0, 0, 0.0]
                for t in targets:
                    dt, calls, n, ms = forced_run(model, prompt, t, cc if constrained else None, ff=ff, selective=sel)
                    tot[0] += dt
                    tot[1] += calls
                    tot[2] += n
                    tot[3] += ms
                if best is None or tot[0] < best[0]:
                    best = tot
            assert best is not None
            tps = best[2] / best[0]
            base = tps if mode == "free" else base
            row = {"schema": name, "mode": mode, "tokens": best[2], "model_calls": best[1],
                   "seconds": round(best[0], 4), "mask_seconds": round(best[3], 4),
                   "tokens_per_s": round(tps, 1),
                   "ratio_vs_free": round(tps / base, 3) if base else None}
            rows.append(row)
            print(f"{name:32s} {mode:12s} tokens={best[2]:4d} calls={best[1]:4d} "
                  f"time={best[0]:7.3f}s (masks {best[3]:6.3f}s)  {tps:7.1f} tok/s  ratio={row['ratio_vs_free']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
