"""The ``tether`` command line.

    tether run FILE.lmql [--model SPEC] [--set NAME=VALUE ...] [--decoder "beam(n=2)"]
    tether serve ...        (the OpenAI-compatible server, when installed)

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tether", description="Language-model programs with typed, constrained holes.")
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
    s = sub.add_parser("serve", help="serve an OpenAI-compatible API (needs tether[server])")
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(func=_delegate("tether.server", "serve"))
    args = p.parse_args(argv)
    return int(args.func(args) or 0)


def _delegate(module: str, what: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        import importlib  # noqa: PLC0415

        mod = importlib.import_module(module)
        fn = getattr(mod, "main", None)
        if fn is None:
            print(f"tether {what}: not available in this build ({module} has no main())", file=sys.stderr)
            return 2
        return int(fn(args.rest) or 0)

    return run


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
