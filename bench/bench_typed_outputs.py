"""Do typed outputs finish? Valid share and tokens used, generation defaults vs the old ones.

For the Character schema (seed 001) and 20 schemas of ``../shared/data/jsonschemabench-dev``
(spread evenly over the sorted files whose schema is at most 2,500 characters, so that
it fits the prompt), this runs ``generate`` on the embedded model at argmax and over
``--seeds`` seeds at T=1, in two configurations:

* ``before``: the earlier generation defaults, spelled out: ``close_on_budget=False``,
  ``strict=False`` (the spec-faithful schema language: open objects, unbounded numbers),
  ``stop_outside=False`` (the mask alone decides when a complete value ends);
* ``after``: today's defaults (closing within the budget, closed objects, bounded numbers,
  forbidden tokens counting as the end of a complete value).

``stop`` counts outputs the model ended; an output closed on the budget is valid but
ends with ``finish_reason="length"``.

Reported per configuration and decoder: the share of outputs that are valid (the value
parses and validates against the schema with ``jsonschema``), the share that ended with
``finish_reason="stop"``, and the mean tokens used.

``--guidance``: the same prompts, schemas, seeds and ``max_tokens`` through Guidance's
``json()`` on the same GGUF file (llama-cpp-python), for comparison. Guidance runs in its
own interpreter (``--guidance-python``, default ``$GUIDANCE_PYTHON`` or this one; it needs
``guidance``, ``llama-cpp-python`` and ``jsonschema``, and no tether), fed the cases on
stdin. Seeds seed numpy's global generator, which Guidance's sampler draws from; its tokens
are the model's tokenization of the output text (Guidance reports no finish reason, so
``stop`` there counts outputs that parse as JSON).

    PYTHONPATH=src python bench/bench_typed_outputs.py                 # 20 seeds, max_tokens 200
    PYTHONPATH=src python bench/bench_typed_outputs.py --seeds 5 --max-tokens 40 --character-only
    PYTHONPATH=src python bench/bench_typed_outputs.py --guidance --guidance-python /path/to/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema  # (no tether import at the top: the Guidance worker runs without tether)

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
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "jsonschemabench-dev" / "schemas"
CONFIGS: dict[str, dict[str, Any]] = {
    "before": {"close_on_budget": False, "strict": False, "stop_outside": False},
    "after": {},
}


def dev_schemas(count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` schemas spread evenly over the sorted dev files whose schema is at most
    2,500 characters (each file holds the schema under ``"schema"``, with its tests)."""
    short = []
    for p in sorted(DATA.glob("*.json")):
        doc = json.loads(p.read_text())
        schema = doc.get("schema") if isinstance(doc, dict) and isinstance(doc.get("schema"), dict) else doc
        if len(json.dumps(schema)) <= 2500:
            short.append((p.stem, schema))
    step = max(1, len(short) // max(count, 1))
    return short[::step][:count]


def prompt_for(name: str, schema: dict[str, Any]) -> str:
    if name == "Character":
        return "A role-playing game character as JSON:\n"
    return f"A JSON document valid against this JSON Schema:\n{json.dumps(schema)}\nDocument:\n"


def run_one(model: Any, name: str, schema: dict[str, Any], config: dict[str, Any], *,
            seed: int | None, max_tokens: int) -> tuple[bool, bool, int]:
    from tether.errors import TetherError
    from tether.program import generate

    kwargs: dict[str, Any] = dict(config, max_tokens=max_tokens)
    if seed is None:
        kwargs["decoder"] = "argmax"
    else:
        kwargs.update(decoder="sample", temperature=1.0, seed=seed)
    try:
        g = generate(model, prompt_for(name, schema), schema, **kwargs)
    except TetherError as exc:  # a schema the compiler refuses counts as not valid
        print(f"  {name}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
        return False, False, 0
    valid = g.value is not None and is_valid(g.value, schema)
    return valid, g.finish_reason == "stop", len(g.tokens)


def is_valid(value: Any, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(value, schema)
    except (jsonschema.ValidationError, jsonschema.SchemaError):
        return False
    return True


def guidance_worker(gguf: str, max_tokens: int) -> None:
    """Under an interpreter with Guidance: read ``{"cases", "runs"}`` on stdin, print one
    JSON line ``[valid, parsed, tokens]`` per (case, seed) run, in order."""
    import guidance
    import numpy as np
    from guidance.models import LlamaCpp

    job = json.load(sys.stdin)
    lm0 = LlamaCpp(gguf, echo=False, n_ctx=4096, verbose=False, enable_monitoring=False)
    llama = lm0._interpreter.engine.model_obj  # the tokenizer that counts the output's tokens
    for name, schema, prompt in job["cases"]:
        for seed in job["seeds"]:
            if seed is not None:
                np.random.seed(seed)
            try:
                lm = lm0 + prompt + guidance.json(name="out", schema=schema, max_tokens=max_tokens,
                                                  temperature=0.0 if seed is None else 1.0)
                text = lm["out"]
            except Exception as exc:  # noqa: BLE001 -- a schema Guidance refuses counts as not valid
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr, flush=True)
                print(json.dumps([False, False, 0]), flush=True)
                continue
            try:
                value, parsed = json.loads(text), True
            except ValueError:
                value, parsed = None, False
            n_tok = len(llama.tokenize(text.encode(), add_bos=False, special=False))
            print(json.dumps([parsed and is_valid(value, schema), parsed, n_tok]), flush=True)


def run_guidance(cases: list[tuple[str, dict[str, Any]]], seeds: list[int | None], *, python: str,
                 max_tokens: int) -> list[tuple[bool, bool, int]]:
    """(valid, parsed, tokens) per (case, seed), from `guidance_worker` in ``python``."""
    from tether.models.llama_cpp import embedded_model_path

    job = {"cases": [(n, s, prompt_for(n, s)) for n, s in cases], "seeds": seeds}
    out = subprocess.run([python, __file__, "--guidance-worker", "--gguf", str(embedded_model_path()),
                          "--max-tokens", str(max_tokens)], input=json.dumps(job), capture_output=True,
                         text=True, check=False)
    for line in out.stderr.splitlines():
        if line.startswith("  "):
            print(line, flush=True)
    if out.returncode != 0:
        raise SystemExit(f"the Guidance worker failed ({python}):\n{out.stderr[-2000:]}")
    return [tuple(json.loads(line)) for line in out.stdout.splitlines() if line.startswith("[")]  # type: ignore[misc]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--schemas", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--configs", default="before,after")
    ap.add_argument("--character-only", action="store_true", help="the Character schema alone")
    ap.add_argument("--decoders", default="argmax,T=1", help="argmax, T=1 or both")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed (to split a run across processes)")
    ap.add_argument("--guidance", action="store_true", help="also run Guidance's json() (see the docstring)")
    ap.add_argument("--guidance-python", default=os.environ.get("GUIDANCE_PYTHON", sys.executable),
                    help="an interpreter with guidance, llama-cpp-python and jsonschema")
    ap.add_argument("--guidance-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--gguf", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.guidance_worker:
        guidance_worker(args.gguf, args.max_tokens)
        return
    cases = [("Character", CHARACTER)] + ([] if args.character_only else dev_schemas(args.schemas))
    print(f"{len(cases)} schemas, {args.seeds} seeds at T=1 + argmax, max_tokens={args.max_tokens}")
    configs = [c for c in args.configs.split(",") if c] + (["guidance"] if args.guidance else [])
    model = None
    if any(c != "guidance" for c in configs):
        from tether.models import load_model

        model = load_model("embedded")
    for cname in configs:
        for decoder, seeds in (("argmax", [None]), ("T=1", list(range(args.seed_start, args.seed_start + args.seeds)))):
            if decoder not in args.decoders.split(","):
                continue
            t0 = time.perf_counter()
            if cname == "guidance":
                rows = run_guidance(cases, seeds, python=args.guidance_python, max_tokens=args.max_tokens)
            else:
                rows = [run_one(model, name, schema, CONFIGS[cname], seed=seed, max_tokens=args.max_tokens)
                        for name, schema in cases for seed in seeds]
            char_valid = [r[0] for r in rows[: len(seeds)]] if cases and cases[0][0] == "Character" else []
            n = len(rows)
            print(f"{cname:6s} {decoder:6s}: valid {sum(r[0] for r in rows)}/{n} "
                  f"({100 * sum(r[0] for r in rows) / n:.0f}%), stop {sum(r[1] for r in rows)}/{n}, "
                  f"tokens mean {statistics.mean(r[2] for r in rows):.1f}; "
                  f"Character valid {sum(char_valid)}/{len(char_valid)} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)


if __name__ == "__main__":
    main()
