#!/usr/bin/env python3
"""Time the lexer DFA's lazy row fills inside the peers harness's whole workload.

Runs ``bench_tree_probe.py whole`` on one tree (``TREE/bench/peers_tether.py`` puts
``TREE/src`` first on the path) with ``LexerDfa.fill_classes`` wrapped: prints the
process CPU seconds spent inside it, the number of calls and of states created, beside
the whole run's numbers. ``--profile FILE`` writes a cProfile of the fill calls only
(the profiler is on inside them), for a per-function breakdown of the fill path.

Usage (the peers venv, alternating trees):

    $PEERS_VENV/bin/python bench/bench_lexer_fill.py /path/to/tree [--only WORDS] [--profile OUT]
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tree")
    ap.add_argument("--only", help="schemas whose id contains one of these comma-separated words")
    ap.add_argument("--profile", help="write a cProfile of the fill calls here")
    args = ap.parse_args()
    tree = str(Path(args.tree).resolve())
    sys.path.insert(0, str(HERE))
    import bench_tree_probe as probe

    sys.path.insert(0, str(probe.HARNESS_DIR))
    import peers_bench as pb

    pb.load_adapter_file(f"{tree}/bench/peers_tether.py")
    import tether
    from tether.regex.dfa import LexerDfa

    if not tether.__file__ or not tether.__file__.startswith(tree):
        print(f"tether imported from {tether.__file__}, not from {tree}", file=sys.stderr)
        return 2
    inner = LexerDfa.fill_classes
    prof = cProfile.Profile() if args.profile else None
    acc = {"ns": 0, "calls": 0, "states": 0}
    clock = time.process_time_ns

    def fill_classes(self: Any, state: int, need: int | None = None, *, extra: int = 0) -> None:
        n0 = len(self._states)
        t0 = clock()
        if prof is not None:
            prof.enable()
        try:
            inner(self, state, need, extra=extra)
        finally:
            if prof is not None:
                prof.disable()
            acc["ns"] += clock() - t0
            acc["calls"] += 1
            acc["states"] += len(self._states) - n0

    LexerDfa.fill_classes = fill_classes  # type: ignore[method-assign]
    vocab = pb.Vocab(need_tokenizer=True)
    adapter = pb.ADAPTERS["tether"](vocab)
    probe.whole(pb, adapter, vocab, tree, args.only, False)
    print(f"  fill_classes: {acc['ns'] / 1e9:.2f} s CPU in {acc['calls']} calls, "
          f"{acc['states']} states created")
    if prof is not None:
        prof.dump_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
