"""The ``tether`` command line.

    tether run FILE.lmql [--model SPEC] [--set NAME=VALUE ...] [--decoder "beam(n=2)"]
    tether check FILE ... [--regex PATTERN] [--start RULE]   (compile only; exit 1 on an error)
    tether serve [--model SPEC] [--host 127.0.0.1] [--port 8000] [--parallel N] [--api-key KEY]
                 [--limit NAME=VALUE ...]      (the OpenAI-compatible server; tether[server])
    tether --version

``run`` prints the interaction trace with the holes highlighted, then every variable,
the distributions of ``distribute`` holes and the costs (model calls, generate calls,
billable tokens). ``--set`` values are Python literals when they parse as one, else
strings; they become the query's arguments. ``--model`` overrides the ``from`` clause.
A missing file is reported as such (exit 2).

``check`` compiles each file by its suffix, never running anything: ``.json`` (a JSON
Schema), ``.gbnf``, ``.lark``, ``.ebnf``/``.kbnf`` (grammars), ``.regex``/``.re`` (one
regex; ``--regex`` gives one inline), ``.lmql`` (a query, compiled only). Each error is
printed with its place (JSON pointer, line and column, regex offset); a file that
compiles gets one summary line (rules, terminals, DFA states). Exit status: 0 when all
compile, 1 when one does not, 2 for a usage error (missing file, unknown suffix).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _print_result(res: Any, *, color: bool, out: Any) -> None:
    dim = (lambda s: f"\x1b[2m{s}\x1b[0m") if color else (lambda s: s)
    for i, r in enumerate(res.results):
        if len(res.results) > 1:
            print(dim(f"── result {i + 1} of {len(res.results)} (log-probability {r.logprob:.2f}) ──"), file=out)
        print(r.render(color=color), file=out)
        print(dim("── variables ──"), file=out)
        for k, v in r.variables.items():
            print(f"  {k} = {v!r}", file=out)
        for name, dist in r.distributions.items():
            print(dim(f"── P({name}) ──"), file=out)
            for val, p in sorted(dist.items(), key=lambda kv: -kv[1]):
                print(f"  {p:7.2%}  {val!r}", file=out)
        bad = r.violations
        if bad:
            print(dim("── constraints not satisfied ──"), file=out)
            for h in bad:
                print(f"  {h.name} = {h.text!r} ({h.stopped})", file=out)
    c = res.costs
    if c is not None:
        print(dim(f"── costs: {c.model_calls} model calls, {c.generate_calls} generate calls, "
                  f"{c.billable_tokens} billable tokens ({c.prompt_tokens} prompt + "
                  f"{c.generated_tokens} generated), {c.evaluated_tokens} tokens evaluated ──"), file=out)


def cmd_run(args: argparse.Namespace) -> int:
    from tether.errors import TetherError  # noqa: PLC0415
    from tether.lang import load_query  # noqa: PLC0415
    from tether.lang.query import resolve_model  # noqa: PLC0415

    values: dict[str, Any] = {}
    for item in args.set or []:
        name, eq, val = item.partition("=")
        if not eq or not name.isidentifier():
            print(f"tether run: --set expects NAME=VALUE, got {item!r}", file=sys.stderr)
            return 2
        values[name] = _value(val)
    path = Path(args.file)
    if not path.is_file():
        print(f"tether run: file not found: {args.file}", file=sys.stderr)
        return 2
    try:
        q = load_query(path, params=list(values))
        with _progress("loading the model"):
            model = resolve_model(args.model, q.qast.model)
        res = q.run(model=model, decoder=args.decoder, seed=args.seed, max_tokens=args.max_tokens, **values)
    except TetherError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the query's own Python code failed: report it, no traceback
        print(f"tether run: the query raised {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        json.dump({"results": [{"prompt": r.prompt, "variables": {k: repr(v) if not isinstance(v, str | int | float | bool | list | dict | type(None)) else v for k, v in r.variables.items()},
                                "distributions": r.distributions} for r in res.results],
                   "costs": vars(res.costs)}, sys.stdout, indent=1, default=repr)
        print()
    else:
        _print_result(res, color=not args.no_color and sys.stdout.isatty(), out=sys.stdout)
    return 0


@contextmanager
def _progress(label: str, total: int | None = None) -> Iterator[Callable[[str], None]]:
    """A transient spinner (``total`` None) or progress bar on stderr while slow work runs;
    yields ``step(what)``, which advances the bar by one and shows ``what``. Drawn only on
    a terminal and when ``rich`` is installed; otherwise ``step`` does nothing."""
    def quiet(what: str) -> None:
        del what

    if not sys.stderr.isatty():
        yield quiet
        return
    try:
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn  # noqa: PLC0415
    except ImportError:
        yield quiet
        return
    console = Console(stderr=True)
    if total is None:
        with console.status(label):
            yield quiet
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def step(what: str) -> None:
            bar.update(task, advance=1, description=f"{label} {what}")

        yield step


# ---------------------------------------------------------------------------- check

#: file suffix -> what ``tether check`` compiles it as
CHECK_KINDS = {".json": "schema", ".gbnf": "gbnf", ".lark": "lark", ".ebnf": "kbnf", ".kbnf": "kbnf",
               ".regex": "regex", ".re": "regex", ".lmql": "query"}
_STATE_CAP = 5_000  # DFA states counted for the summary line (past it: "more than")


@dataclass(frozen=True)
class CheckResult:
    """One checked input: ``ok`` and either its summary line or its error with the place."""

    name: str
    ok: bool
    message: str


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _count_states(nodes: list[Any]) -> str:
    from tether.regex import LexerDfa  # noqa: PLC0415

    n = LexerDfa(nodes, max_states=_STATE_CAP + 2).fill_reachable(limit=_STATE_CAP) if nodes else 0
    return f"more than {_STATE_CAP} lexer DFA states" if n > _STATE_CAP else _n(n, "lexer DFA state")


def _grammar_summary(g: Any) -> str:
    rules = len({r.lhs for r in g.rules})
    states = _count_states([t.to_node() for t in g.terminals.values()])
    return f"{_n(rules, 'rule')}, {_n(len(g.terminals), 'terminal')}, {states} (start '{g.start}')"


def check_text(kind: str, text: str, *, source: str = "", start: str | None = None) -> str:
    """Compile ``text`` as ``kind`` (a value of `CHECK_KINDS`) and return its summary line.

    Nothing is run: a query is parsed and compiled only. Raises a `TetherError` naming
    the place of the first problem.
    """
    from tether.grammar import Grammar  # noqa: PLC0415

    if kind == "schema":  # the compiler reads the JSON text itself (line/column, depth limit)
        return "JSON Schema: " + _grammar_summary(Grammar.from_json_schema(text))
    if kind == "gbnf":
        return "GBNF grammar: " + _grammar_summary(Grammar.from_gbnf(text, start=start or "root", source=source))
    if kind == "lark":
        return "Lark grammar: " + _grammar_summary(Grammar.from_lark(text, start=start or "start", source=source))
    if kind == "kbnf":
        return "EBNF grammar: " + _grammar_summary(Grammar.from_kbnf(text, start=start, source=source))
    if kind == "regex":
        from tether import regex as rx  # noqa: PLC0415

        node = rx.parse(text)
        return f"regex: {_count_states([node])}"
    if kind == "query":
        from tether.lang import load_query  # noqa: PLC0415

        q = load_query(text, filename=source or None)
        holes = sorted(q.program.body.hole_names)
        return f"query '{q.name}': {_n(len(holes), 'hole')}" + (f" ({', '.join(holes)})" if holes else "")
    raise ValueError(f"unknown kind {kind!r}")


def check_file(path: str, *, start: str | None = None) -> CheckResult | None:
    """Check one file by its suffix; None (after a message on stderr) for a usage error."""
    p = Path(path)
    kind = CHECK_KINDS.get(p.suffix.lower())
    if kind is None:
        print(f"tether check: {path}: unknown file kind {p.suffix or '(no suffix)'!r}; expected one of "
              f"{', '.join(sorted(CHECK_KINDS))} (or --regex PATTERN)", file=sys.stderr)
        return None
    if not p.is_file():
        print(f"tether check: file not found: {path}", file=sys.stderr)
        return None
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return CheckResult(path, False, f"not UTF-8 text (byte offset {exc.start})")
    except OSError as exc:
        return CheckResult(path, False, f"cannot read: {exc.strerror or exc}")
    if kind == "regex":
        text = text[:-1] if text.endswith("\n") else text
        text = text[:-1] if text.endswith("\r") else text
    return _checked(path, kind, text, start)


def _checked(name: str, kind: str, text: str, start: str | None) -> CheckResult:
    from tether.errors import TetherError  # noqa: PLC0415

    try:
        return CheckResult(name, True, check_text(kind, text, source=name, start=start))
    except TetherError as exc:
        return CheckResult(name, False, f"{type(exc).__name__}: {exc}")
    except RecursionError:  # a front end that should have bounded its depth: still no traceback
        return CheckResult(name, False, "too deeply nested (a bug: the front end should raise LimitError)")


def cmd_check(args: argparse.Namespace) -> int:
    inputs: list[tuple[str, str | None]] = [(f, None) for f in args.files]
    inputs += [(f"--regex {pattern!r}", pattern) for pattern in args.regex or []]
    if not inputs:
        print("tether check: give a FILE or --regex PATTERN", file=sys.stderr)
        return 2
    usage_error = failed = False
    results: list[CheckResult] = []
    with _progress("checking", total=len(inputs)) as step:
        for name, pattern in inputs:
            step(name)
            r = _checked(name, "regex", pattern, None) if pattern is not None else check_file(name, start=args.start)
            if r is None:
                usage_error = True
                continue
            results.append(r)
            failed |= not r.ok
    for r in results:
        if r.ok:
            print(f"{r.name}: ok: {r.message}")
        else:
            print(f"{r.name}: error: {r.message}", file=sys.stderr)
    return 2 if usage_error else 1 if failed else 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("tether")
    except PackageNotFoundError:
        return "unknown"


def cmd_serve(args: argparse.Namespace) -> int:
    import os  # noqa: PLC0415

    from tether.errors import LimitError  # noqa: PLC0415
    from tether.limits import Limits  # noqa: PLC0415
    from tether.server import SERVER_LIMITS, ServerConfig, serve  # noqa: PLC0415

    lim: Limits = SERVER_LIMITS
    changes: dict[str, int | float] = {}
    for item in args.limit or []:
        name, eq, val = item.partition("=")
        try:
            number = float(val)
        except ValueError:
            number = float("nan")
        if not eq or number != number:
            print(f"tether serve: --limit expects NAME=NUMBER, got {item!r}", file=sys.stderr)
            return 2
        changes[name] = int(number) if number.is_integer() and name != "compile_seconds" else number
    if args.parallel < 1 or args.queue_size < 0 or not 0 < args.port < 65536 \
            or (args.threads_batch is not None and not 1 <= args.threads_batch <= 1024):
        print("tether serve: --parallel must be >= 1, --queue-size >= 0, --port in 1..65535, "
              "--threads-batch in 1..1024", file=sys.stderr)
        return 2
    try:
        lim = lim.replace(**changes)
    except LimitError as exc:
        print(f"tether serve: {exc}", file=sys.stderr)
        return 2
    key = args.api_key if args.api_key is not None else os.environ.get("TETHER_API_KEY") or None
    names = tuple(args.served_model_name or ())
    config = ServerConfig(model=args.model, host=args.host, port=args.port, parallel=args.parallel,
                          queue_size=args.queue_size, api_key=key, limits=lim,
                          max_body_bytes=args.max_body_bytes, request_timeout=args.request_timeout,
                          default_max_tokens=args.default_max_tokens, n_ctx=args.n_ctx,
                          threads_batch=args.threads_batch,
                          batch=not args.no_batch, served_names=names,
                          prefix_cache=not args.no_prefix_cache)
    return serve(config)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tether", description="Language-model programs with typed, constrained holes.")
    p.add_argument("--version", action="version", version=f"tether {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a query program (.lmql) and print its trace and variables")
    r.add_argument("file", help="the query program")
    r.add_argument("--model", help="model: 'embedded', a .gguf path, a transformers directory or an http(s) URL "
                   "(default: the query's from clause, else the embedded model)")
    r.add_argument("--set", action="append", metavar="NAME=VALUE", help="a query argument (repeatable)")
    r.add_argument("--decoder", help="override the decoder clause, e.g. 'sample(n=2, temperature=0.8)'")
    r.add_argument("--seed", type=int, default=None, help="seed for sampling")
    r.add_argument("--max-tokens", type=int, default=None, help="token budget per hole (default 128)")
    r.add_argument("--no-color", action="store_true", help="mark holes with ⟦ ⟧ instead of colour")
    r.add_argument("--json", action="store_true", help="print the results as JSON")
    r.set_defaults(func=cmd_run)
    c = sub.add_parser("check", help="compile a JSON Schema, grammar, regex or query and report errors",
                       description="Compile each FILE by its suffix (.json schema; .gbnf, .lark, .ebnf/.kbnf "
                       "grammar; .regex/.re regex; .lmql query, compiled only) and report every error "
                       "with its place. Exit 0 when all compile, 1 on an error, 2 on a usage error.")
    c.add_argument("files", nargs="*", metavar="FILE", help="files to check")
    c.add_argument("--regex", action="append", metavar="PATTERN", help="check an inline regex (repeatable)")
    c.add_argument("--start", default=None, help="start rule of a grammar (default: root / start / first rule)")
    c.set_defaults(func=cmd_check)
    s = sub.add_parser("serve", help="serve an OpenAI-compatible API (needs tether[server])",
                       description="An OpenAI-compatible server (see docs/server.md).")
    s.add_argument("--model", default="embedded", help="model spec, as for run (default: embedded)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--parallel", type=int, default=4, help="requests decoded at once (default 4)")
    s.add_argument("--queue-size", type=int, default=64, help="requests waiting beyond those; more get 503")
    s.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (also TETHER_API_KEY)")
    s.add_argument("--limit", action="append", metavar="NAME=VALUE",
                   help="a tether.limits.Limits field for requests, e.g. compile_seconds=2 (repeatable)")
    s.add_argument("--max-body-bytes", type=int, default=4 << 20, help="largest request body (default 4 MiB)")
    s.add_argument("--request-timeout", type=float, default=300.0, help="seconds a request may take (default 300)")
    s.add_argument("--default-max-tokens", type=int, default=512, help="max_tokens when a request gives none")
    s.add_argument("--n-ctx", type=int, default=8192, help="llama.cpp context shared by the running sequences")
    s.add_argument("--threads-batch", type=int, default=None, metavar="N",
                   help="llama.cpp threads for steps of several sequences and for prompts "
                   "(default: every core, up to 8; one-sequence steps use the model's n_threads)")
    s.add_argument("--no-batch", action="store_true", help="decode one request at a time (no batching)")
    s.add_argument("--no-prefix-cache", action="store_true",
                   help="no KV-cache reuse across requests (seeded requests then repeat exactly)")
    s.add_argument("--served-model-name", action="append", help="the model id clients use (repeatable)")
    s.set_defaults(func=cmd_serve)
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
