"""The documentation site: ``mkdocs build --strict`` passes, and every runnable example
of the pages below runs.

A ```` ```python```` block is runnable when the line before its fence is the HTML comment
``<!-- run -->`` (no model needed) or ``<!-- run: model -->`` (needs the embedded model;
those run under the ``model`` marker). The comment does not show on the site. The blocks
of one page run in order in one namespace, so a later block uses names an earlier one
made; the plain blocks of a page also run on their own, without the model.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# the pages whose examples are tested (the pages written with the site)
PAGES = ["index.md", "getting-started.md", "tour.md", "grammars.md", "decoding.md", "cli.md", "migrating.md",
         "outlines-style.md",
         "streaming.md"]

_BLOCK = re.compile(r"^<!-- run(?P<model>: model)? -->\n```python\n(?P<code>.*?)^```$", re.M | re.S)


def runnable_blocks(page: str) -> list[tuple[bool, str, int]]:
    """(needs the model, code, line) for each runnable block of ``page``, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(bool(m.group("model")), m.group("code"), text.count("\n", 0, m.start()) + 2)
            for m in _BLOCK.finditer(text)]


def _run(page: str, blocks: list[tuple[bool, str, int]]) -> None:
    # a real module (dataclasses and pickling look classes up in sys.modules)
    module = types.ModuleType(f"docs_{page.replace('-', '_').removesuffix('.md')}")
    sys.modules[module.__name__] = module
    try:
        for _, code, line in blocks:
            try:
                exec(compile(code, f"docs/{page}:{line}", "exec"), module.__dict__)  # noqa: S102 (our own docs)
            except Exception as exc:  # name the block in the failure
                raise AssertionError(f"docs/{page}, block at line {line} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        del sys.modules[module.__name__]


def test_marked_blocks_are_counted() -> None:
    counts = {p: len(runnable_blocks(p)) for p in PAGES}
    assert all((DOCS / p).exists() for p in PAGES)
    # every marker is followed by a python fence (a marker on anything else is a mistake)
    for p in PAGES:
        text = (DOCS / p).read_text(encoding="utf-8")
        assert text.count("<!-- run") == counts[p], p
    assert sum(counts.values()) >= 20, counts


@pytest.mark.parametrize("page", PAGES)
def test_examples_without_model(page: str) -> None:
    blocks = [b for b in runnable_blocks(page) if not b[0]]
    if not blocks:
        pytest.skip(f"docs/{page} has no runnable block that works without the model")
    _run(page, blocks)


@pytest.mark.model
@pytest.mark.parametrize("page", PAGES)
def test_examples_with_model(page: str) -> None:
    blocks = runnable_blocks(page)
    if not any(b[0] for b in blocks):
        pytest.skip(f"docs/{page} has no example on the model")
    _run(page, blocks)


def _mkdocs() -> list[str] | None:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "mkdocs"]


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    cmd = _mkdocs()
    if cmd is None:
        pytest.skip("mkdocs / mkdocs-material are not installed (pip install -e '.[dev]')")
    out = tmp_path / "site"
    r = subprocess.run([*cmd, "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
                       env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-4000:]
    pages = [p for p in out.rglob("index.html") if "assets" not in p.parts and "search" not in p.parts]
    assert len(pages) >= 8
    assert (out / "reference" / "index.html").exists()
    shutil.rmtree(out, ignore_errors=True)
