"""Cost of tether's logits processors inside other stacks' generation loops.

For each stack, the same greedy generation runs free and under a JSON Schema; reported:
tokens, seconds, seconds per token, the ratio constrained ÷ free per token, and the time
spent inside the processor per call (p50, max, total) — the part tether adds. The
constrained generation runs twice with one processor: ``cold`` (a new constraint: the
masks of new states are computed, numba kernels warmed by an earlier 4-token call) and
``warm`` (same prompt again: masks come from the constraint's cache). On a CPU the
forward pass dominates; the processor time is what a faster device would expose.

    PYTHONPATH=src python bench/bench_integrations.py                  # llama-cpp-python
    PYTHONPATH=src python bench/bench_integrations.py --stack transformers
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 20},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 10},
                                  "maxItems": 4}},
          "required": ["name", "age", "tags"], "additionalProperties": False}
PROMPT = "A person described as JSON with a name, an age and tags: "


class Timed:
    """Wraps a processor and records the seconds of each call."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.times = inner, []

    def __call__(self, ids: Any, scores: Any) -> Any:
        t0 = time.perf_counter()
        out = self.inner(ids, scores)
        self.times.append(time.perf_counter() - t0)
        return out


def report(stack: str, free: tuple[int, float], constrained: tuple[int, float], timed: Timed,
           text: str, run: str) -> None:
    (nf, tf), (nc, tc) = free, constrained
    calls = sorted(timed.times)
    print(json.dumps({
        "stack": stack, "run": run, "free_tokens": nf, "free_s": round(tf, 3),
        "constrained_tokens": nc, "constrained_s": round(tc, 3),
        "free_s_per_token": round(tf / max(nf, 1), 4),
        "constrained_s_per_token": round(tc / max(nc, 1), 4),
        "ratio_per_token": round((tc / max(nc, 1)) / (tf / max(nf, 1)), 3),
        "processor_ms_p50": round(1000 * statistics.median(calls), 3),
        "processor_ms_max": round(1000 * calls[-1], 3),
        "processor_s_total": round(sum(calls), 3), "processor_calls": len(calls),
        "output": text,
    }))


def bench_llama(max_tokens: int) -> None:
    from llama_cpp import Llama, LogitsProcessorList

    from tether.integrations.llama_cpp import LogitsProcessor
    from tether.models.llama_cpp import default_threads, embedded_model_path

    llm = Llama(model_path=str(embedded_model_path()), n_ctx=1024, n_threads=default_threads(),
                verbose=False)
    llm.create_completion(PROMPT, max_tokens=4, temperature=0)  # load, caches

    def run(**kw: Any) -> tuple[int, float, str]:
        llm.reset()
        kw.setdefault("max_tokens", max_tokens)
        t0 = time.perf_counter()
        out = llm.create_completion(PROMPT, temperature=0, **kw)
        dt = time.perf_counter() - t0
        return out["usage"]["completion_tokens"], dt, out["choices"][0]["text"]

    # the vocabulary index and numba kernels, on another constraint
    run(max_tokens=4, logits_processor=LogitsProcessorList([LogitsProcessor(["ab"], llm)]))
    timed = Timed(LogitsProcessor(SCHEMA, llm))
    runs = [run(logits_processor=LogitsProcessorList([timed]))]
    cold = list(timed.times)
    nf, tf, _ = run(max_tokens=runs[0][0])  # as many tokens, free (no EOS before)
    timed.times.clear()
    runs.append(run(logits_processor=LogitsProcessorList([timed])))
    for name, (nc, tc, text), times in zip(("cold", "warm"), runs, (cold, list(timed.times)), strict=True):
        timed.times = times
        report("llama-cpp-python", (nf, tf), (nc, tc), timed, text, name)


def bench_transformers(max_tokens: int) -> None:
    os.environ.setdefault("TQDM_DISABLE", "1")
    import torch
    import transformers

    from tether.integrations.transformers import LogitsProcessor
    from tether.models.llama_cpp import default_threads
    from tether.models.transformers_model import embedded_hf_dir

    torch.set_num_threads(default_threads())
    d = embedded_hf_dir()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    enc = tok([PROMPT], return_tensors="pt")

    def run(**kw: Any) -> tuple[int, float, str]:
        kw.setdefault("max_new_tokens", max_tokens)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**enc, do_sample=False, **kw)
        dt = time.perf_counter() - t0
        row = out[0, enc["input_ids"].shape[1]:]
        return len(row), dt, tok.decode(row, skip_special_tokens=True)

    # the vocabulary index and numba kernels, on another constraint
    run(max_new_tokens=4, logits_processor=transformers.LogitsProcessorList([LogitsProcessor(["ab"], tok)]))
    timed = Timed(LogitsProcessor(SCHEMA, tok))
    runs = [run(logits_processor=transformers.LogitsProcessorList([timed]))]
    cold = list(timed.times)
    nf, tf, _ = run(max_new_tokens=runs[0][0], min_new_tokens=runs[0][0])  # as many tokens, free
    timed.times.clear()
    runs.append(run(logits_processor=transformers.LogitsProcessorList([timed])))
    for name, (nc, tc, text), times in zip(("cold", "warm"), runs, (cold, list(timed.times)), strict=True):
        timed.times = times
        report("transformers", (nf, tf), (nc, tc), timed, text, name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", choices=["llama", "transformers"], default="llama")
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    {"llama": bench_llama, "transformers": bench_transformers}[args.stack](args.max_tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
