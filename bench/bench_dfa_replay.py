#!/usr/bin/env python3
"""Replay the lexer DFA's row fills of a real workload, cold, in a fresh process.

``record``: runs the peers harness's whole workload (``bench_tree_probe.py whole``, the
schemas kept by ``--only``) on one tree and writes every ``LexerDfa.fill_classes`` call
(which DFA, the state's ``(terminal, node)`` pairs, ``need``, ``extra``) and each DFA's
terminals to a pickle (nodes pickle as their smart-constructor calls, so the replay
rebuilds the interned nodes, with no derivative cached).

``replay``: loads the pickle in a fresh process, builds each DFA anew from its
terminals and makes the same calls in the same order (a state is found by its pairs,
``state_of``, as state numbering may differ between trees), timing the fill calls only
(process CPU). Prints the CPU seconds per round; the first round is the cold one (fresh
nodes: every derivative, class partition and emptiness check computed), later rounds
rebuild the DFAs over warm nodes.

Usage (record once with the peers venv, then replay on each tree, alternating):

    $PEERS_VENV/bin/python bench/bench_dfa_replay.py record TREE OUT.pkl [--only WORDS]
    PYTHONPATH=TREE/src python bench/bench_dfa_replay.py replay OUT.pkl [--rounds N]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def record(tree: str, out: str, only: str | None) -> int:
    sys.path.insert(0, str(HERE))
    import bench_tree_probe as probe

    sys.path.insert(0, str(probe.HARNESS_DIR))
    import peers_bench as pb

    pb.load_adapter_file(f"{tree}/bench/peers_tether.py")
    from tether.regex.dfa import LexerDfa

    inner = LexerDfa.fill_classes
    dfas: dict[int, int] = {}
    terminals: list[Any] = []
    calls: list[Any] = []
    keep: list[Any] = []  # the DFAs recorded stay alive, so their ids stay theirs

    def fill_classes(self: Any, state: int, need: int | None = None, *, extra: int = 0) -> None:
        k = dfas.get(id(self))
        if k is None:
            k = dfas[id(self)] = len(terminals)
            terminals.append((self.nodes, self.max_states))
            keep.append(self)
        calls.append((k, self._states[state], need, extra))
        inner(self, state, need, extra=extra)

    LexerDfa.fill_classes = fill_classes  # type: ignore[method-assign]
    vocab = pb.Vocab(need_tokenizer=True)
    adapter = pb.ADAPTERS["tether"](vocab)
    probe.whole(pb, adapter, vocab, tree, only, False)
    sys.setrecursionlimit(100_000)
    with open(out, "wb") as f:
        pickle.dump((terminals, calls), f, protocol=pickle.HIGHEST_PROTOCOL)
    print(f"{len(calls)} calls over {len(terminals)} DFAs written to {out}")
    return 0


def replay(path: str, rounds: int) -> int:
    import gc

    import tether
    from tether.regex.dfa import LexerDfa

    sys.setrecursionlimit(100_000)
    with open(path, "rb") as f:
        terminals, calls = pickle.load(f)
    print(f"tether from {Path(tether.__file__).parents[1]}: {len(calls)} calls, {len(terminals)} DFAs")
    clock = time.process_time_ns
    for r in range(rounds):
        dfas = [LexerDfa(nodes, max_states=m) for nodes, m in terminals]
        gc.collect()
        gc.disable()
        spent = 0
        for k, pairs, need, extra in calls:
            dfa = dfas[k]
            sid = dfa.state_of(pairs)
            t0 = clock()
            dfa.fill_classes(sid, need, extra=extra)
            spent += clock() - t0
        gc.enable()
        states = sum(d.n_states for d in dfas)
        print(f"  round {r + 1} ({'cold' if r == 0 else 'warm nodes'}): fill_classes {spent / 1e9:.3f} s CPU, "
              f"{states} states")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("tree")
    rec.add_argument("out")
    rec.add_argument("--only")
    rep = sub.add_parser("replay")
    rep.add_argument("path")
    rep.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.what == "record":
        return record(str(Path(args.tree).resolve()), args.out, args.only)
    return replay(args.path, args.rounds)


if __name__ == "__main__":
    sys.exit(main())
