"""Cost of tether's logits processors inside other stacks' generation loops.

For each stack, the same greedy generation runs free and under a JSON Schema; reported:
tokens, seconds, seconds per token, the ratio constrained ÷ free per token, and the time
spent inside the processor per call (p50, max, total) — the part tether adds. The
constrained generation runs twice with one processor: ``cold`` (a new constraint: the
masks of new states are computed, numba kernels warmed by an earlier 4-token call) and
``warm`` (same prompt again: masks come from the constraint's cache). On a CPU the
forward pass dominates; the processor time is what a faster device would expose.

``--stack transformers`` runs, in the same process on the same model, tether's processor
and, where installed, XGrammar's (``xgrammar.contrib.hf.LogitsProcessor``) and
llguidance's (llguidance ships no transformers processor: a ten-line bench-local one over
``LLMatcher`` + ``llguidance.torch`` bitmask fill/apply, batch 1). Each engine gets the
same JSON Schema, compact JSON (no whitespace between tokens). ``setup_ms``: building the
engine's tokenizer index (XGrammar, llguidance; tether's vocabulary is built by the
warm-up call before) and compiling the schema, once per process.

``--stack batch`` times the mask computation of one serving step for 32, 64, 128 and 256
requests (``--rows``) on the Gemma vocabulary, each request a different document valid
under the schema, rows at staggered offsets: per step, each row's new tokens are consumed
(tether: `requests.BatchConstraints.sync`; llguidance: ``consume_token`` per row), then
every row's mask is written — tether row by row (``tether/rows``: ``compute_mask`` per
row, the path before ``compute_masks`` was threaded) and in one `tether.engine.compute_masks`
call per thread count of ``--threads`` (``tether/threads=N``), llguidance with
``llguidance.numpy.fill_next_token_bitmask_par`` over an ``LLExecutor(num_threads=N)``.
Two passes each over the same documents with new matchers: ``cold`` (tether: a new
compiled constraint, its mask cache empty) and ``warm`` (the cache filled by the cold
pass). Reported per step: the whole step and the mask part alone, and the ratio of each
engine's mean mask time to ``tether/rows``'s. Only the tokenizer is loaded (from the
converted folder, else from the GGUF).

    PYTHONPATH=src python bench/bench_integrations.py                  # llama-cpp-python
    PYTHONPATH=src python bench/bench_integrations.py --stack transformers [--engines tether,xgrammar]
    PYTHONPATH=src python bench/bench_integrations.py --stack batch [--rows 32,64 --threads 1,2]
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
           text: str, run: str, **extra: Any) -> None:
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
        "first_call_ms": round(1000 * timed.times[0], 3) if timed.times else None, **extra,
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


def _xgrammar_processor(tok: Any, width: int) -> Any:
    import xgrammar
    from xgrammar.contrib.hf import LogitsProcessor as XgrProcessor

    info = xgrammar.TokenizerInfo.from_huggingface(tok, vocab_size=width)
    compiled = xgrammar.GrammarCompiler(info).compile_json_schema(
        json.dumps(SCHEMA), any_whitespace=False, separators=(",", ":"))
    return lambda: XgrProcessor(compiled)


LLG_DEFAULTS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


def _llguidance_processor(tok: Any, width: int) -> Any:
    import llguidance
    import llguidance.hf
    import llguidance.torch

    lltok = llguidance.hf.from_tokenizer(tok, n_vocab=width)
    grammar = llguidance.LLMatcher.grammar_from_json_schema(SCHEMA, defaults=LLG_DEFAULTS)

    class LlgProcessor:
        """Batch 1: consume the last token (after the first call), fill and apply the mask."""

        def __init__(self) -> None:
            self.matcher = llguidance.LLMatcher(lltok, grammar)
            self.bitmask = llguidance.torch.allocate_token_bitmask(1, lltok.vocab_size)
            self.started = False

        def __call__(self, ids: Any, scores: Any) -> Any:
            if self.started:
                self.matcher.consume_token(int(ids[0, -1]))
            self.started = True
            llguidance.torch.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
            llguidance.torch.apply_token_bitmask_inplace(scores, self.bitmask)
            return scores

    return LlgProcessor


def _tether_processor(tok: Any, width: int) -> Any:
    from tether.integrations.transformers import LogitsProcessor

    return lambda: LogitsProcessor(SCHEMA, tok)


ENGINES = {"tether": _tether_processor, "xgrammar": _xgrammar_processor,
           "llguidance": _llguidance_processor}


def bench_transformers(max_tokens: int, engines: list[str]) -> None:
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
    width = int(model.config.vocab_size)
    enc = tok([PROMPT], return_tensors="pt")

    def run(**kw: Any) -> tuple[int, float, str]:
        kw.setdefault("max_new_tokens", max_tokens)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(**enc, do_sample=False, **kw)
        dt = time.perf_counter() - t0
        row = out[0, enc["input_ids"].shape[1]:]
        return len(row), dt, tok.decode(row, skip_special_tokens=True)

    # numba kernels and the vocabulary index, on another constraint
    t0 = time.perf_counter()
    warmup = LogitsProcessor(["ab"], tok)  # tether's vocabulary (from the tokenizer) and index
    print(json.dumps({"stack": "transformers", "engine": "tether",
                      "vocabulary_ms": round(1000 * (time.perf_counter() - t0), 3)}))
    run(max_new_tokens=4, logits_processor=transformers.LogitsProcessorList([warmup]))
    setup_ms: dict[str, float] = {}
    for engine in engines:
        try:
            t0 = time.perf_counter()
            make = ENGINES[engine](tok, width)  # XGrammar, llguidance: tokenizer info + grammar
            first = make()  # tether: the schema's compile (the vocabulary was built above)
            setup_ms[engine] = round(1000 * (time.perf_counter() - t0), 3)
        except ImportError as e:
            print(json.dumps({"stack": "transformers", "engine": engine, "skipped": str(e)}))
            continue
        run(max_new_tokens=2, logits_processor=transformers.LogitsProcessorList([first]))  # warm the library
        t0 = time.perf_counter()
        timed = Timed(make())
        construct = [time.perf_counter() - t0]
        runs = [run(logits_processor=transformers.LogitsProcessorList([timed]))]
        cold = list(timed.times)
        nf, tf, _ = run(max_new_tokens=runs[0][0], min_new_tokens=runs[0][0])  # as many tokens, free
        t0 = time.perf_counter()
        timed = Timed(make())  # a new processor (XGrammar's is single-use), same constraint
        construct.append(time.perf_counter() - t0)
        runs.append(run(logits_processor=transformers.LogitsProcessorList([timed])))
        for name, (nc, tc, text), times, c in zip(("cold", "warm"), runs, (cold, list(timed.times)),
                                                  construct, strict=True):
            t = Timed(None)
            t.times = times
            report(f"transformers/{engine}", (nf, tf), (nc, tc), t, text, name,
                   construct_ms=round(1000 * c, 3), setup_ms=setup_ms.get(engine))


def _documents(n: int) -> list[str]:
    names = ["Ada", "Bo", "Cyrano de B.", "Dee", "Émile", "Fay"]
    return [json.dumps({"name": f"{names[i % 6]} {i}", "age": (i * 37) % 121,
                        "tags": [f"t{j}x{i}" for j in range(i % 5)]},
                       separators=(",", ":"), ensure_ascii=False) for i in range(n)]


def _tokenizer() -> Any:
    """The embedded model's tokenizer: from the converted folder when there is one, else
    read from the GGUF (no weights converted: the batch bench needs the tokenizer only)."""
    import transformers

    from tether.models.llama_cpp import embedded_model_path
    from tether.models.transformers_model import EMBEDDED_HF_DIR

    if (EMBEDDED_HF_DIR / "tokenizer_config.json").exists():
        return transformers.AutoTokenizer.from_pretrained(EMBEDDED_HF_DIR)
    gguf = embedded_model_path()
    return transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def bench_batch(sizes: list[int], steps: int, threads: list[int]) -> None:
    from tether.engine import compute_masks
    from tether.engine.compiled import CompiledConstraint
    from tether.integrations.requests import BatchConstraints
    from tether.integrations.transformers import hf_vocabulary
    from tether.program.outputs import output_spec
    from tether.tokens.bitmask import allocate_mask

    tok = _tokenizer()
    vocab = hf_vocabulary(tok)
    grammar = output_spec(SCHEMA).grammar
    warm = CompiledConstraint(output_spec(["ab"]).grammar, vocab).matcher()  # numba kernels loaded
    compute_masks([warm, warm.copy()], allocate_mask(vocab.size, batch=2), threads=2)
    machine = {"cpus": os.cpu_count(), "load1": round(os.getloadavg()[0], 2)}
    print(json.dumps({"stack": "batch", "machine": machine, "steps": steps,
                      "vocabulary": vocab.size}))
    try:
        import llguidance
        import llguidance.hf
        import llguidance.numpy
    except ImportError as e:
        llguidance = None
        print(json.dumps({"stack": "batch", "engine": "llguidance", "skipped": str(e)}))
    else:
        lltok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab.size)
        llgrammar = llguidance.LLMatcher.grammar_from_json_schema(SCHEMA, defaults=LLG_DEFAULTS)

    for rows in sizes:
        docs = [tok.encode(d, add_special_tokens=False) for d in _documents(rows)]
        offsets = [i % 7 for i in range(rows)]  # staggered: rows at different states each step

        def tokens_at(i: int, step: int, docs: list[list[int]] = docs,
                      offsets: list[int] = offsets) -> list[int]:
            doc = docs[i]
            return doc[: min(offsets[i] + step, len(doc))]

        def tether_pass(cc: CompiledConstraint, mode: int, rows: int = rows,
                        tokens_at: Any = tokens_at) -> tuple[list[float], list[float]]:
            """One pass: per step, each row's new tokens consumed (``BatchConstraints.sync``),
            then every row's mask: ``mode`` 0 the row-by-row ``compute_mask`` loop, else one
            ``compute_masks`` call on ``mode`` threads. Returns (step seconds, mask seconds)."""
            batch = BatchConstraints(vocab, lambda _output: cc)
            lists: list[list[int]] = [[] for _ in range(rows)]
            for i in range(rows):
                batch.add(i, {"json": SCHEMA}, lists[i])
            matchers = [batch.rows[i].matcher for i in range(rows)]
            out = allocate_mask(vocab.size, batch=rows)
            steps_s, masks_s = [], []
            for step in range(steps):
                for i in range(rows):
                    lists[i][:] = tokens_at(i, step)
                t = time.perf_counter()
                batch.sync()
                t1 = time.perf_counter()
                if mode == 0:
                    for i, m in enumerate(matchers):
                        m.compute_mask(out[i])
                else:
                    compute_masks(matchers, out, threads=mode)
                t2 = time.perf_counter()
                steps_s.append(t2 - t)
                masks_s.append(t2 - t1)
            assert not any(r.error for r in batch.rows.values()), [r.error for r in batch.rows.values()]
            return steps_s, masks_s

        def llg_pass(executor: Any, rows: int = rows, tokens_at: Any = tokens_at
                     ) -> tuple[list[float], list[float]]:
            matchers = [llguidance.LLMatcher(lltok, llgrammar) for _ in range(rows)]
            bitmask = llguidance.numpy.allocate_token_bitmask(rows, lltok.vocab_size)
            pairs = [(m, i) for i, m in enumerate(matchers)]
            consumed = [0] * rows
            steps_s, masks_s = [], []
            for step in range(steps):
                t = time.perf_counter()
                for i, m in enumerate(matchers):
                    toks = tokens_at(i, step)
                    for tk in toks[consumed[i]:]:
                        m.consume_token(tk)
                    consumed[i] = len(toks)
                t1 = time.perf_counter()
                llguidance.numpy.fill_next_token_bitmask_par(executor, pairs, bitmask)
                t2 = time.perf_counter()
                steps_s.append(t2 - t)
                masks_s.append(t2 - t1)
                assert not any(m.is_error() for m in matchers), [m.get_error() for m in matchers]
            return steps_s, masks_s

        results: dict[tuple[str, str], float] = {}

        def summary(engine: str, run: str, timed: tuple[list[float], list[float]], rows: int = rows,
                    results: dict[tuple[str, str], float] = results, **extra: Any) -> None:
            ms = sorted(1000 * t for t in timed[0])
            mk = sorted(1000 * t for t in timed[1])
            results[(engine, run)] = statistics.fmean(mk)
            print(json.dumps({"stack": "batch", "engine": engine, "run": run, "rows": rows,
                              "steps": len(ms), "ms_per_step_p50": round(statistics.median(ms), 3),
                              "ms_per_step_mean": round(statistics.fmean(ms), 3),
                              "ms_per_step_max": round(ms[-1], 3),
                              "mask_ms_p50": round(statistics.median(mk), 3),
                              "mask_ms_mean": round(statistics.fmean(mk), 3), **extra}))

        for mode in [0, *threads]:
            name = "tether/rows" if mode == 0 else f"tether/threads={mode}"
            cc = CompiledConstraint(grammar, vocab)  # its own mask cache: a cold pass, then warm
            for run in ("cold", "warm"):
                summary(name, run, tether_pass(cc, mode))
        if llguidance is not None:
            for n in threads:
                executor = llguidance.LLExecutor(num_threads=n)
                for run in ("cold", "warm"):  # llguidance keeps no mask cache across matchers
                    summary(f"llguidance/threads={n}", run, llg_pass(executor))
        for run in ("cold", "warm"):
            base = results[("tether/rows", run)]
            ratios = {k[0]: round(v / base, 3) for k, v in results.items() if k[1] == run}
            print(json.dumps({"stack": "batch", "rows": rows, "run": run,
                              "mask_mean_over_tether_rows": ratios}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", choices=["llama", "transformers", "batch"], default="llama")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--engines", default="tether,xgrammar,llguidance",
                    help="transformers: which processors (those not installed are skipped)")
    ap.add_argument("--rows", default="32,64,128,256", help="batch: requests per step (a list)")
    ap.add_argument("--steps", type=int, default=24, help="batch: steps per pass")
    ap.add_argument("--threads", default="1,2", help="batch: thread counts (tether's compute_masks "
                    "and llguidance's executor)")
    args = ap.parse_args()
    if args.stack == "llama":
        bench_llama(args.max_tokens)
    elif args.stack == "transformers":
        bench_transformers(args.max_tokens, [e for e in args.engines.split(",") if e])
    else:
        bench_batch([int(r) for r in args.rows.split(",")], args.steps,
                    [int(t) for t in args.threads.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
