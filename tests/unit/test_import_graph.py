"""The module import graph of ``src/tether``: no import circle, no import upward.

Every ``import``/``from ... import`` of every module is read with ``ast``, function-local
ones included (a lazy import is still a dependency); imports under ``if TYPE_CHECKING:``
are left out of the circle check (they never run). An edge goes to the module named
(``from tether.grammar import bounds`` → ``tether.grammar.bounds``), not to the parent
packages Python also initialises.

The layer order is read from the table in docs/architecture.md, so the page and the
code cannot drift apart.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "tether"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# Packages whose modules must form no circle at all (issue 17 removed theirs).
ACYCLIC = ("tether.grammar", "tether.decoding", "tether.lang", "tether.program")

# Circles tolerated for now: none is left (issue 17 cut the last, in the engine). A circle
# found anywhere in src/tether must lie inside one of these sets, so any circle fails.
KNOWN_CIRCLES: list[set[str]] = []


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest module named by ``name`` (``tether.x.y.SomeClass`` → ``tether.x.y``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(
    source: str, name: str, modules: dict[str, Path], *, is_package: bool = False, type_checking: bool = True
) -> dict[str, int]:
    """The tether modules ``source`` (module ``name``) imports → the first line doing so.
    ``type_checking=False`` leaves out imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(source)
    package = name if is_package else name.rpartition(".")[0]
    skipped: set[int] = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: dict[str, int] = {}

    def add(target: str | None, line: int) -> None:
        if target is not None and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tether":
                    add(_resolve(alias.name, modules), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            if origin.split(".")[0] != "tether":
                continue
            for alias in node.names:  # a submodule by name, else a name in `origin`
                sub = f"{origin}.{alias.name}"
                add(sub if sub in modules else _resolve(origin, modules), node.lineno)
    return found


@functools.cache
def graph(*, type_checking: bool = True) -> dict[str, dict[str, int]]:
    return {
        name: imports_of(path.read_text(), name, MODULES, is_package=path.name == "__init__.py",
                         type_checking=type_checking)
        for name, path in MODULES.items()
    }


def circles(edges: dict[str, dict[str, int]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def layers_from_docs() -> list[str]:
    """The layer names of the table under "## Layers", bottom to top."""
    text = ARCHITECTURE.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def layer_of(module: str, layers: list[str]) -> int:
    """The position of ``module``'s layer; the package itself and ``__main__`` sit on top."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return len(layers)
    assert parts[1] in layers, f"{module}: its layer '{parts[1]}' is not in docs/architecture.md"
    return layers.index(parts[1])


def test_the_reader_sees_lazy_relative_and_submodule_imports() -> None:
    modules = {m: Path() for m in ("tether.a", "tether.a.b", "tether.a.c", "tether.a.d", "tether.e", "tether.f")}
    source = (
        "from typing import TYPE_CHECKING\n"
        "from tether.a import c\n"          # a submodule by name
        "from . import d\n"                 # relative
        "from tether.e import Thing\n"     # a name in a module
        "def f():\n"
        "    import tether.a\n"             # function-local
        "if TYPE_CHECKING:\n"
        "    from tether.f import Other\n"
    )
    found = imports_of(source, "tether.a.b", modules)
    assert set(found) == {"tether.a.c", "tether.a.d", "tether.e", "tether.a", "tether.f"}
    assert found["tether.a"] == 6
    found = imports_of(source, "tether.a.b", modules, type_checking=False)
    assert "tether.f" not in found
    assert circles({"x": {"y": 1}, "y": {"z": 1}, "z": {"x": 1}, "w": {"x": 1}}) == [{"x", "y", "z"}]


def test_no_new_import_circle() -> None:
    found = circles(graph(type_checking=False))
    bad = [c for c in found if any(m.startswith(ACYCLIC) for m in c)]
    assert not bad, f"import circles in {ACYCLIC} (they must have none): {bad}"
    new = [c for c in found if not any(c <= known for known in KNOWN_CIRCLES)]
    assert not new, (
        "new import circles (make one module depend on the other only, e.g. move the "
        f"shared piece into a module both import): {[sorted(c) for c in new]}"
    )


def test_no_import_points_upward() -> None:
    layers = layers_from_docs()
    assert layers[:3] == ["errors", "limits", "tokens"] and "cli" in layers, layers
    top = {m.split(".")[1] for m in MODULES if "." in m and not m.endswith("__main__")}
    assert top <= set(layers), f"layers missing from docs/architecture.md: {sorted(top - set(layers))}"
    bad = []
    for module, targets in graph().items():
        for target, line in targets.items():
            if layer_of(target, layers) > layer_of(module, layers):
                bad.append(f"{MODULES[module]}:{line}: {module} imports {target}, a higher layer")
    assert not bad, "\n".join(bad)
