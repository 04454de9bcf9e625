"""The ``tether`` command line.

    tether run FILE.lmql [--model SPEC] [--set NAME=VALUE ...] [--decoder "beam(n=2)"]
    tether serve [--model SPEC] [--host 127.0.0.1] [--port 8000] [--parallel N] [--api-key KEY]
                 [--limit NAME=VALUE ...]      (the OpenAI-compatible server; tether[server])
    tether --version

``run`` prints the interaction trace with the holes highlighted, then every variable,
the distributions of ``distribute`` holes and the costs (model calls, generate calls,
billable tokens). ``--set`` values are Python literals when they parse as one, else
strings; they become the query's arguments. ``--model`` overrides the ``from`` clause.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
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
    try:
        q = load_query(args.file, params=list(values))
        model = resolve_model(args.model, q.qast.model)
        res = q.run(model=model, decoder=args.decoder, seed=args.seed, max_tokens=args.max_tokens, **values)
    except FileNotFoundError as exc:
        print(f"tether run: {exc}", file=sys.stderr)
        return 2
    except TetherError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        json.dump({"results": [{"prompt": r.prompt, "variables": {k: repr(v) if not isinstance(v, str | int | float | bool | list | dict | type(None)) else v for k, v in r.variables.items()},
                                "distributions": r.distributions} for r in res.results],
                   "costs": vars(res.costs)}, sys.stdout, indent=1, default=repr)
        print()
    else:
        _print_result(res, color=not args.no_color and sys.stdout.isatty(), out=sys.stdout)
    return 0


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
    if args.parallel < 1 or args.queue_size < 0 or not 0 < args.port < 65536:
        print("tether serve: --parallel must be >= 1, --queue-size >= 0, --port in 1..65535", file=sys.stderr)
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
                          batch=not args.no_batch, served_names=names)
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
    s.add_argument("--no-batch", action="store_true", help="decode one request at a time (no batching)")
    s.add_argument("--served-model-name", action="append", help="the model id clients use (repeatable)")
    s.set_defaults(func=cmd_serve)
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
