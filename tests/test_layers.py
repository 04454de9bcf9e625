"""Each layer imports only the layers below it (docs/architecture.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tether"

# bottom to top; a module may import its own layer and any layer listed before it
LAYERS = [
    "errors",
    "limits",
    "tokens",
    "regex",
    "grammar",
    "parser",
    "engine",
    "models",
    "decoding",
    "program",
    "lang",
    "compat",
    "integrations",
    "server",
    "cli",
    "__init__",
    "__main__",
]


def layer_of(module: str) -> str:
    parts = module.split(".")
    assert parts[0] == "tether"
    return parts[1].removesuffix(".py") if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    pkg = ".".join(("tether", *path.relative_to(SRC).with_suffix("").parts))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("tether")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this module's package
                base = pkg.split(".")[: -node.level]
                name = ".".join(base + ([node.module] if node.module else []))
                found.append((name, node.lineno))
            elif node.module == "tether":  # `from tether import regex` imports tether.regex
                found += [
                    (f"tether.{a.name}" if a.name in LAYERS else "tether", node.lineno)
                    for a in node.names
                ]
            elif node.module and node.module.startswith("tether"):
                found.append((node.module, node.lineno))
    return found


def test_imports_point_down() -> None:
    bad = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).parts
        own = rel[0].removesuffix(".py")
        if own not in LAYERS:
            bad.append(f"{path}: module is in no layer; add it to LAYERS and docs/architecture.md")
            continue
        for name, line in imports_of(path):
            if name == "tether":
                if own not in ("__init__", "cli", "__main__"):
                    bad.append(f"{path}:{line} imports the top-level package")
                continue
            target = layer_of(name)
            if LAYERS.index(target) > LAYERS.index(own):
                bad.append(f"{path}:{line}: layer '{own}' imports higher layer '{target}'")
    assert not bad, "\n".join(bad)


def test_import_tether_is_light() -> None:
    code = (
        "import sys, tether\n"
        "heavy = [m for m in ('numba', 'torch', 'llama_cpp', 'transformers') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import tether pulled in: {out.stdout.strip()}"
