"""Server processes for the integration tests: `tether serve` or llama-cpp-python's server
started on a free loopback port, waited for, and stopped."""

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
            ready: Callable[[Any], bool] = lambda reply: True) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` (this checkout's ``src`` first on PYTHONPATH; no API keys from the
    environment unless ``env`` gives them) until ``ready_url`` answers JSON that ``ready``
    accepts (120 s at most); stop it on leaving."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    full_env.pop("TETHER_API_KEY", None)
    full_env.pop("OPENAI_API_KEY", None)
    full_env.update(env or {})
    with open(log_path, "wb") as log:  # a file, not a pipe: a full pipe would block the server
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env)
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited: {log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(ready_url, timeout=2) as r:
                    if ready(json.loads(r.read())):
                        break
            except (OSError, ValueError):
                pass
            if time.time() > deadline:
                pytest.fail(f"the server did not start within 120 s: {log_path.read_text(errors='replace')[-800:]}")
            time.sleep(0.3)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
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
