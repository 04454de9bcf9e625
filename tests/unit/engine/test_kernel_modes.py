"""The kernels give the same masks with numba's JIT off (plain Python): the walk, and the
batch copy of stored masks (``compute_masks`` against the row-by-row loop)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.parametrize(("file", "select"), [
    ("test_engine_masks.py", "list or stop or regex_alt or keyword"),
    ("test_batch_masks.py", "row_by_row or earley or eos_row"),
])
def test_masks_with_jit_disabled(file: str, select: str) -> None:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parents[2] / "src"), env.get("PYTHONPATH", "")]
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(HERE / file), "-k", select],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
