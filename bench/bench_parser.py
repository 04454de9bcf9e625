"""Parser time against input length: linear on right recursion (Leo) and on JSON.

    PYTHONPATH=src python bench/bench_parser.py [--sizes 1000 10000 100000] [--repeat 3]

For each grammar (a right-recursive list, JSON as an IR grammar, and lark's example
``json.lark`` from the shared data through the Lark front end) and input size (in
lexemes) it times
* ``EarleyParser.push`` over the lexeme sequence (terminal ids), and
* ``ByteParser.feed`` over the same text (lexer + parser, byte by byte),
and prints CPU seconds (``time.process_time``: the machine may be shared), microseconds
per lexeme and the ratio to the smallest size
(linear growth keeps µs/lexeme flat). The right-recursive grammar is also run with Leo
items off, at small sizes only, to show the quadratic growth Leo removes. ``--no-gc``
switches Python's cyclic garbage collector off, whose passes over the growing row stack
are what remains of the growth at 100k lexemes.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tether.grammar.ir import NT, Grammar, T, Terminal  # noqa: E402
from tether.grammar.rfc8259 import json_text  # noqa: E402
from tether.parser import ByteParser, EarleyParser, ParserTables  # noqa: E402


def right_recursive() -> Grammar:
    """``list -> item "," list | item``, ``item -> NUMBER``."""
    g = Grammar("list")
    g.add_terminal(Terminal("NUMBER", regex="[0-9]+"))
    g.add_terminal(Terminal("COMMA", literal=","))
    g.add_rule("list", NT("item"), T("COMMA"), NT("list"))
    g.add_rule("list", NT("item"))
    g.add_rule("item", T("NUMBER"))
    return g


def json_grammar() -> Grammar:
    """JSON over lexemes; object members right-recursive, array elements left-recursive."""
    return json_text(members="right", elements="left")


def list_input(n: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i = 0
    while len(out) < n - 1:
        out += [("NUMBER", str(i)), ("COMMA", ",")]
        i += 1
    out.append(("NUMBER", str(i)))
    return out


def json_input(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """A JSON array of small records, about ``n`` lexemes (whitespace not counted)."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = [("LBRACK", "[")]

    def record(k: int) -> None:
        out.extend([("LBRACE", "{"), ("STRING", '"id"'), ("COLON", ":"), ("WS", " ")])
        out.append(("NUMBER", str(k)))
        out.extend([("COMMA", ","), ("WS", " "), ("STRING", '"name"'), ("COLON", ":")])
        out.append(("STRING", f'"item \\u00e9{rng.randrange(1000)}"'))
        out.extend([("COMMA", ","), ("STRING", '"tags"'), ("COLON", ":"), ("LBRACK", "[")])
        for j in range(rng.randrange(1, 4)):
            if j:
                out.append(("COMMA", ","))
            out.append(rng.choice([("TRUE", "true"), ("NULL", "null"), ("NUMBER", "-1.5e3")]))
        out.extend([("RBRACK", "]"), ("COMMA", ","), ("STRING", '"nested"'), ("COLON", ":")])
        out.extend([("LBRACE", "{"), ("STRING", '"ok"'), ("COLON", ":"), ("FALSE", "false")])
        out.extend([("RBRACE", "}"), ("RBRACE", "}")])

    k = 0
    while sum(1 for t, _ in out if t != "WS") < n - 1:
        if k:
            out.extend([("COMMA", ","), ("WS", "\n")])
        record(k)
        k += 1
    out.append(("RBRACK", "]"))
    return out


def shared_json_lark() -> Grammar | None:
    """Lark's example JSON grammar from the shared test data, through the Lark front end
    (None if either is missing)."""
    path = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "grammars"
    path = path / "lark" / "lark-parser" / "json.lark"
    from_lark = getattr(Grammar, "from_lark", None)
    if from_lark is None or not path.exists():
        return None
    return from_lark(path.read_text())  # type: ignore[no-any-return]


def lexeme_ids(bp: ByteParser, lexemes: list[tuple[str, str]]) -> tuple[list[list[int]], bytes]:
    """The input as the terminal-id sets ``push`` takes (found by lexing it once with
    ``bp``, so any grammar for the same text works) and as bytes."""
    text = "".join(x for _, x in lexemes).encode()
    p = ByteParser(bp.tables, lexer=bp.lexer)
    assert p.feed(text) and p.is_accepting(), p.error
    ids = [list(ts) for _, _, ts, scanned in p.lexemes if scanned]
    if len(p.data) > p.lexeme_start:  # the last lexeme, ended by the end of the text
        allowed = p.parser.allowed_terminals()
        ids.append([t for t in p.lexer.accepting(p.state) if t in allowed])
    return ids, text


def time_push(tables: ParserTables, ids: list[list[int]], leo: bool = True) -> float:
    p = EarleyParser(tables, leo=leo)
    t0 = time.process_time()
    for t in ids:
        if not p.push(t):
            raise AssertionError("rejected a valid input")
    dt = time.process_time() - t0
    assert p.is_accepting()
    return dt


def time_bytes(bp: ByteParser, text: bytes) -> float:
    p = ByteParser(bp.tables, lexer=bp.lexer)
    p.feed(text[:200])  # warm the lexer DFA rows
    p = ByteParser(bp.tables, lexer=bp.lexer)
    t0 = time.process_time()
    ok = p.feed(text)
    dt = time.process_time() - t0
    assert ok and p.is_accepting(), p.error
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3, help="best of N (1 for the largest size)")
    ap.add_argument("--no-leo-sizes", type=int, nargs="*", default=[1_000, 2_000, 4_000])
    ap.add_argument("--no-gc", action="store_true", help="disable the cyclic GC while timing")
    args = ap.parse_args()
    if args.no_gc:
        gc.disable()
    print(
        f"python {platform.python_version()} on {platform.machine()}"
        f"{', cyclic GC off' if args.no_gc else ''}"
    )
    print(
        f"{'grammar':<16}{'mode':<14}{'lexemes':>9}{'bytes':>10}{'cpu s':>10}"
        f"{'µs/lexeme':>11}{'vs first':>10}"
    )
    cases = [
        ("right-recursive", right_recursive(), list_input),
        ("json", json_grammar(), json_input),
    ]
    lark_json = shared_json_lark()
    if lark_json is not None:
        cases.append(("json.lark", lark_json, json_input))
    for name, grammar, make in cases:
        bp = ByteParser(grammar)
        tables = bp.tables
        inputs = {n: lexeme_ids(bp, make(n)) for n in args.sizes}
        for mode in ("push", "bytes"):
            base = None
            for n in args.sizes:
                ids, text = inputs[n]
                reps = args.repeat if n < max(args.sizes) else 1
                if mode == "push":
                    dt = min(time_push(tables, ids) for _ in range(reps))
                else:
                    dt = min(time_bytes(bp, text) for _ in range(reps))
                per = dt / len(ids) * 1e6
                base = base or per
                print(
                    f"{name:<16}{mode:<14}{len(ids):>9}{len(text):>10}{dt:>10.3f}"
                    f"{per:>11.2f}{per / base:>10.2f}"
                )
        if name == "right-recursive":
            base = None
            for n in args.no_leo_sizes:
                ids, _ = lexeme_ids(bp, make(n))
                dt = time_push(tables, ids, leo=False)
                per = dt / len(ids) * 1e6
                base = base or per
                print(
                    f"{name:<16}{'push, no Leo':<14}{len(ids):>9}{'':>10}{dt:>10.3f}"
                    f"{per:>11.2f}{per / base:>10.2f}"
                )
    walk_pattern()


def walk_pattern(n: int = 100_000) -> None:
    """What the mask engine does at a lexeme boundary inside a token-trie walk: push a
    lexeme, look at the row, pop; repeated (one-entry row cache hit) or alternating
    between two lexemes (a rebuild every time)."""
    tables = ParserTables.from_grammar(json_grammar())
    ids = tables.terminal_ids
    p = EarleyParser(tables)
    for name in ("LBRACK", "LBRACE", "STRING", "COLON", "LBRACK", "NUMBER"):
        assert p.push(ids[name])
    comma, close = ids["COMMA"], ids["RBRACK"]
    title = "walk pattern, json after " + "[{" + '"k":[1'
    print(f"\n{title:<44}{'calls':>9}{'µs/call':>10}")
    for label, seq in (
        ("push + allowed_terminals + pop, same lexeme", [comma, comma]),
        ("push + allowed_terminals + pop, alternating", [comma, close]),
    ):
        t0 = time.process_time()
        for i in range(n):
            p.push(seq[i & 1])
            p.allowed_terminals()
            p.pop()
        dt = time.process_time() - t0
        print(f"{label:<44}{n:>9}{dt / n * 1e6:>10.2f}")
    t0 = time.process_time()
    for _ in range(n):
        p.row_key()
    dt = time.process_time() - t0
    print(f"{'row_key (memoized)':<44}{n:>9}{dt / n * 1e6:>10.2f}")


if __name__ == "__main__":
    main()
