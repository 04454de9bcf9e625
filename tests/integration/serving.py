"""Server processes for the integration tests: `tether serve`, llama-cpp-python's server or
vLLM's OpenAI server (opt-in: ``TETHER_VLLM_PYTHON``) started on a free loopback port,
waited for, and stopped."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(cmd: list[str], ready_url: str, log_path: Path, *, env: dict[str, str] | None = None,
            ready: Callable[[Any], bool] = lambda reply: True, start_s: float = 120.0,
            own_path: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` (this checkout's ``src`` first on PYTHONPATH unless ``own_path``; no API
    keys from the environment unless ``env`` gives them) until ``ready_url`` answers JSON
    that ``ready`` accepts (``start_s`` at most); stop it on leaving."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    if own_path:
        full_env.pop("PYTHONPATH")
    full_env.pop("TETHER_API_KEY", None)
    full_env.pop("OPENAI_API_KEY", None)
    full_env.update(env or {})
    with open(log_path, "wb") as log:  # a file, not a pipe: a full pipe would block the server
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                start_new_session=True)  # vLLM's engine processes stop with it
    try:
        deadline = time.time() + start_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited: {log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as r:
                    body = r.read()  # vLLM's /health answers 200 with no body
                    if ready(json.loads(body) if body.strip() else None):
                        break
            except (OSError, ValueError):
                pass
            if time.time() > deadline:
                pytest.fail(f"the server did not start within {start_s:g} s: "
                            f"{log_path.read_text(errors='replace')[-800:]}")
            time.sleep(0.3)
        yield proc
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()


@contextmanager
def tether_serve(log_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`tether serve *args` on a free port; yields its base URL once /health says ok."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-m", "tether", "serve", "--port", str(port), *args], base + "/health",
                 log_path, env=env, ready=lambda reply: reply.get("status") == "ok"):
        yield base


@contextmanager
def llama_cpp_server(log_path: Path) -> Iterator[str]:
    """llama-cpp-python's OpenAI server on the embedded model (alias ``gemma3-270m``);
    yields its ``/v1`` URL."""
    from tether.models.llama_cpp import embedded_model_path

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with running([sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path()),
                  "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
                  "--model_alias", "gemma3-270m"], url + "/models", log_path):
        yield url


LLAMA_SERVER = os.environ.get("TETHER_LLAMA_SERVER")  # the path of llama.cpp's llama-server binary


@contextmanager
def llama_server(log_path: Path, binary: str) -> Iterator[str]:
    """llama.cpp's own C++ ``llama-server`` on the embedded model; yields its ``/v1`` URL."""
    from tether.models.llama_cpp import embedded_model_path

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    with running([binary, "--model", str(embedded_model_path()), "--host", "127.0.0.1", "--port", str(port),
                  "--ctx-size", "2048", "--threads", "1", "--parallel", "1", "--alias", "gemma3-270m"],
                 url + "/models", log_path):
        yield url


VLLM_PYTHON = os.environ.get("TETHER_VLLM_PYTHON")  # the interpreter of a venv holding vLLM


@contextmanager
def vllm_server(log_path: Path, hf_dir: Path) -> Iterator[str]:
    """vLLM's OpenAI server (its own venv: ``TETHER_VLLM_PYTHON``) on the embedded model
    converted for transformers (``hf_dir``), float32 on the CPU; yields its ``/v1`` URL."""
    assert VLLM_PYTHON
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")}
    # the API server module: ``vllm serve`` looks up a distribution named "vllm", which a
    # CPU packaging (vllm-cpu) does not have
    with running([VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(hf_dir),
                  "--host", "127.0.0.1", "--port", str(port), "--served-model-name", "gemma3-270m",
                  "--dtype", "float32", "--max-model-len", "2048", "--disable-log-stats",
                  # vLLM 0.32 reads disable_any_whitespace from its server config only (the
                  # request field tether sends is ignored there): compact JSON, as tether writes
                  "--structured-outputs-config", '{"backend": "xgrammar", "disable_any_whitespace": true}'],
                 url + "/health", log_path, env=env, start_s=600.0, own_path=True,
                 ready=lambda reply: True):
        yield url + "/v1"
