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

    PYTHONPATH=src python bench/bench_typed_outputs.py                 # 20 seeds, max_tokens 200
    PYTHONPATH=src python bench/bench_typed_outputs.py --seeds 5 --max-tokens 40 --character-only
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import jsonschema

from tether.errors import TetherError
from tether.models import load_model
from tether.program import generate

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
    valid = False
    if g.value is not None:
        try:
            jsonschema.validate(g.value, schema)
            valid = True
        except jsonschema.ValidationError:
            valid = False
    return valid, g.finish_reason == "stop", len(g.tokens)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--schemas", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--configs", default="before,after")
    ap.add_argument("--character-only", action="store_true", help="the Character schema alone")
    ap.add_argument("--decoders", default="argmax,T=1", help="argmax, T=1 or both")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed (to split a run across processes)")
    args = ap.parse_args()
    model = load_model("embedded")
    cases = [("Character", CHARACTER)] + ([] if args.character_only else dev_schemas(args.schemas))
    print(f"{len(cases)} schemas, {args.seeds} seeds at T=1 + argmax, max_tokens={args.max_tokens}")
    for cname in args.configs.split(","):
        config = CONFIGS[cname]
        for decoder, seeds in (("argmax", [None]), ("T=1", list(range(args.seed_start, args.seed_start + args.seeds)))):
            if decoder not in args.decoders.split(","):
                continue
            rows = []
            t0 = time.perf_counter()
            char_valid = []
            for name, schema in cases:
                for seed in seeds:
                    valid, stopped, n_tok = run_one(model, name, schema, config, seed=seed,
                                                    max_tokens=args.max_tokens)
                    rows.append((valid, stopped, n_tok))
                    if name == "Character":
                        char_valid.append(valid)
            n = len(rows)
            print(f"{cname:6s} {decoder:6s}: valid {sum(r[0] for r in rows)}/{n} "
                  f"({100 * sum(r[0] for r in rows) / n:.0f}%), stop {sum(r[1] for r in rows)}/{n}, "
                  f"tokens mean {statistics.mean(r[2] for r in rows):.1f}; "
                  f"Character valid {sum(char_valid)}/{len(char_valid)} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)


if __name__ == "__main__":
    main()
