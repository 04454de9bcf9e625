#!/usr/bin/env python3
"""Dump the grammars the JSON Schema compiler builds, to compare two trees of tether.

The compiler's output must not change when its inside does (a speed-up, a clean-up): for
every schema of the JSONSchemaBench dev sample (``shared/data/jsonschemabench-dev``) and
of the JSON-Schema-Test-Suite (``shared/data/json-schema-test-suite``), under several
option sets (the peers harness's, the default, any property order, pretty, closed and
bounded numbers), this writes one line per compile: its key and a digest of the
grammar's canonical text (start, rules in order, terminals in order with every field,
the structure of each terminal's regex node, ignore, warnings), or of the error it
raised. Run it once per tree (``PYTHONPATH=TREE/src``) and compare the two files:

    PYTHONPATH=/path/a/src python bench/json_schema_grammar_dump.py dump a.txt
    PYTHONPATH=/path/b/src python bench/json_schema_grammar_dump.py dump b.txt
    python bench/json_schema_grammar_dump.py diff a.txt b.txt

``dump --full DIR`` also writes each grammar's canonical text under ``DIR`` (to read a
difference). Regex nodes are written by structure, not by their process-local ids:
alternations and intersections list their operands' digests sorted, so two trees that
build the same interned nodes in another order still dump the same text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BENCH = DATA / "jsonschemabench-dev"
SUITE = DATA / "json-schema-test-suite"

OPTION_SETS: dict[str, dict[str, Any]] = {
    "peers": {"whitespace": "flexible", "property_order": "schema"},
    "default": {},
    "any": {"whitespace": "flexible", "property_order": "any"},
    "pretty": {"whitespace": "pretty"},
    "closed": {"closed": True, "bounded_numbers": True},
}


def node_digest(node: Any, memo: dict[int, str]) -> str:
    """A digest of the structure of an interned regex node (independent of uids)."""
    from tether.regex import ast as rx_ast

    stack = [node]
    while stack:
        n = stack[-1]
        if id(n) in memo:
            stack.pop()
            continue
        pending = [a for a in _children(n) if id(a) not in memo]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        parts = [memo[id(a)] if isinstance(a, rx_ast.Node) else repr(a) for a in _flat_args(n)]
        if n.kind in (rx_ast.K_ALT, rx_ast.K_AND):
            parts.sort()
        text = f"{n.kind}({','.join(parts)})"
        memo[id(n)] = hashlib.sha1(text.encode()).hexdigest()[:20]
    return memo[id(node)]


def _flat_args(n: Any) -> list[Any]:
    out: list[Any] = []
    for a in n.args:
        if isinstance(a, tuple):
            out.extend(a)
        else:
            out.append(a)
    return out


def _children(n: Any) -> list[Any]:
    from tether.regex import ast as rx_ast

    return [a for a in _flat_args(n) if isinstance(a, rx_ast.Node)]


def canonical(g: Any, memo: dict[int, str]) -> str:
    lines = [f"start {g.start}"]
    lines += [repr(r) for r in g.rules]
    for name, t in g.terminals.items():
        fields = (t.name, t.regex, t.literal, t.flavor, t.ignore_case, t.lazy, t.stop, t.max_len, t.expr)
        node = "-" if t.node is None else node_digest(t.node, memo)
        lines.append(f"terminal {name} {fields!r} node={node}")
    lines.append(f"ignore {g.ignore!r}")
    lines += [f"warning {w}" for w in g.warnings]
    return "\n".join(lines) + "\n"


def _remote_loader(uri: str) -> Any:
    prefix = "http://localhost:1234/"
    if uri.startswith(prefix):
        path = SUITE / "remotes" / uri[len(prefix):]
        if path.exists():
            return json.loads(path.read_text())
    return None


def cases() -> list[tuple[str, Any, dict[str, Any]]]:
    """(key, schema, extra options) for every schema of both corpora."""
    out: list[tuple[str, Any, dict[str, Any]]] = []
    for f in sorted((BENCH / "schemas").glob("*.json")):
        out.append((f"bench/{f.stem}", json.loads(f.read_text())["schema"], {}))
    for draft in ("draft2020-12", "draft7"):
        base = SUITE / "tests" / draft
        extra: dict[str, Any] = {"resolve_remote": _remote_loader}
        if draft == "draft7":
            extra["draft"] = "draft7"
        for f in sorted(base.rglob("*.json")):
            for i, group in enumerate(json.loads(f.read_text())):
                out.append((f"suite/{draft}/{f.relative_to(base).with_suffix('')}/{i}", group["schema"], extra))
    return out


def dump(out_path: str, full: str | None, only: str | None) -> int:
    import tether
    from tether.grammar.ir import Grammar

    print(f"tether from {tether.__file__}", file=sys.stderr)
    memo: dict[int, str] = {}
    lines = []
    for key, schema, extra in cases():
        for oname, opts in OPTION_SETS.items():
            if only and oname not in only.split(","):
                continue
            try:
                text = canonical(Grammar.from_json_schema(schema, **opts, **extra), memo)
            except Exception as exc:  # noqa: BLE001 -- the error is part of the output compared
                text = f"error {type(exc).__name__}: {exc}\n"
            digest = hashlib.sha256(text.encode()).hexdigest()[:24]
            lines.append(f"{key} {oname} {digest}")
            if full:
                p = Path(full) / oname / (key.replace("/", "__") + ".txt")
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(text)
    Path(out_path).write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} grammars dumped to {out_path}", file=sys.stderr)
    return 0


def diff(a: str, b: str) -> int:
    la = dict(line.rsplit(" ", 1) for line in Path(a).read_text().splitlines())
    lb = dict(line.rsplit(" ", 1) for line in Path(b).read_text().splitlines())
    differ = sorted(k for k in la.keys() | lb.keys() if la.get(k) != lb.get(k))
    for k in differ[:50]:
        print(f"differs: {k}")
    print(f"{len(la)} / {len(lb)} grammars, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out")
    d.add_argument("--full", help="also write each grammar's canonical text under this folder")
    d.add_argument("--only", help="comma-separated option sets (default: all)")
    c = sub.add_parser("diff")
    c.add_argument("a")
    c.add_argument("b")
    args = ap.parse_args()
    sys.setrecursionlimit(100_000)
    if args.cmd == "dump":
        return dump(args.out, args.full, args.only)
    return diff(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
