"""The walk kernels give the same masks with numba's JIT off (plain Python)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_masks_with_jit_disabled() -> None:
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parents[2] / "src"), env.get("PYTHONPATH", "")]
    )
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(HERE / "test_engine_masks.py"), "-k", "list or stop or regex_alt or keyword"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
