"""The numba trie walk sets exactly the tokens the plain-Python reference allows.

Random small vocabularies (duplicates, prefixes, NUL bytes, specials) and random DFA
tables whose rows start UNKNOWN and are filled on demand (sometimes by reallocating
the table). The same checks run again in a subprocess with ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
from reference import DEAD, UNKNOWN, allowed_tokens  # noqa: E402

from tether.tokens import TokenTrie, Vocabulary, allocate_mask, fill_mask, mask_to_ids  # noqa: E402

ALPHABET = b"ab\x00\xff"  # few distinct bytes: many shared prefixes and duplicates

token_bytes = st.binary(min_size=0, max_size=6).map(
    lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)
)


@st.composite
def vocab_and_dfa(draw):  # type: ignore[no-untyped-def]
    tokens = draw(st.lists(token_bytes, min_size=1, max_size=40))
    special = draw(st.sets(st.integers(0, len(tokens) - 1), max_size=3))
    n_states = draw(st.integers(1, 6))
    full = np.full((n_states, 256), DEAD, np.int32)
    for s in range(n_states):
        for b in ALPHABET:
            full[s, b] = draw(st.integers(-1, n_states - 1))
    start = draw(st.integers(-1, n_states - 1))
    realloc = draw(st.booleans())
    return tokens, special, full, start, realloc


def check_one(tokens, special, full, start, realloc) -> None:  # type: ignore[no-untyped-def]
    vocab = Vocabulary.from_bytes(tokens, special_ids=special)
    trie = TokenTrie.from_vocabulary(vocab)
    # A lazy lexer has a row (maybe UNKNOWN) for every state it has named so far; when a
    # filled row names new states the table grows, and the old array is stale.
    lazy = {"table": np.full((max(start, 0) + 1 if realloc else len(full), 256), UNKNOWN, np.int32)}

    def fill_row(state: int):  # type: ignore[no-untyped-def]
        table = lazy["table"]
        need = max(int(full[state].max()), state) + 1
        if need > len(table):
            bigger = np.full((need, 256), UNKNOWN, np.int32)
            bigger[: len(table)] = table
            lazy["table"] = table = bigger
        table[state] = full[state]
        return table if realloc else None

    mask = allocate_mask(vocab.size)
    mask[:] = 0xFFFFFFFF  # must be cleared by fill_mask
    fill_mask(trie, lazy["table"], start, mask, fill_row)
    got = set(mask_to_ids(mask).tolist())
    want = allowed_tokens(tokens, vocab.special_ids, lambda s: full[s], start)
    assert got == want, (tokens, start)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vocab_and_dfa())
def test_walk_matches_reference(case) -> None:  # type: ignore[no-untyped-def]
    check_one(*case)


@settings(max_examples=200, deadline=None)
@given(st.lists(token_bytes, min_size=1, max_size=40))
def test_trie_round_trip(tokens: list[bytes]) -> None:
    """Every non-empty token is found at a node holding its id; ``end`` bounds subtrees."""
    vocab = Vocabulary.from_bytes(tokens)
    trie = TokenTrie.from_vocabulary(vocab)
    for t, data in enumerate(tokens):
        if data:
            node = trie.find(data)
            assert node > 0 and trie.depth[node] == len(data)
            assert t in trie.tokens_at(node)
    for p in range(1, trie.n_nodes):
        q = p + 1
        while q < trie.n_nodes and trie.depth[q] > trie.depth[p]:
            q += 1
        assert trie.end[p] == q
    assert trie.n_nodes == 1 + len({t[:k] for t in tokens for k in range(1, len(t) + 1)})


def test_walk_without_jit() -> None:
    """The kernel source run as plain Python (NUMBA_DISABLE_JIT=1) passes the same checks."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "src"), env.get("PYTHONPATH")]))
    code = (
        "import sys, os; sys.path.insert(0, os.path.dirname(sys.argv[1]))\n"
        "from numba.core import config; assert config.DISABLE_JIT\n"
        "from tether.tokens import _kernels; import types\n"
        "assert isinstance(_kernels.walk_trie, types.FunctionType), type(_kernels.walk_trie)\n"
        "import test_trie_walk as m\n"
        "m.test_walk_matches_reference(); m.test_trie_round_trip()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code, __file__], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


if __name__ == "__main__":
    pytest.main([__file__])
