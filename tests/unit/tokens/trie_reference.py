"""A plain-Python TokenTrie builder: the layout of ``tether.tokens.trie`` by definition.

A dict trie, walked in preorder with children in byte order; a node holds the lowest id
whose bytes end there, ``dup_next`` chains equal tokens in ascending id order, ``end`` is
one past the node's last descendant. Special and empty tokens are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def reference_arrays(tokens: list[bytes], special: Iterable[int] = ()) -> dict[str, Any]:
    skip = set(special)
    root: dict[str, Any] = {"kids": {}, "ids": []}
    for i, data in enumerate(tokens):
        if not data or i in skip:
            continue
        node = root
        for b in data:
            node = node["kids"].setdefault(b, {"kids": {}, "ids": []})
        node["ids"].append(i)
    byte: list[int] = []
    token: list[int] = []
    depth: list[int] = []
    end: list[int] = []
    dup_next = [-1] * len(tokens)
    stack: list[tuple[int, int, dict[str, Any], int]] = [(0, 0, root, -1)]  # byte, depth, node, slot
    pending: list[tuple[int, int]] = []  # (slot, depth) of nodes whose subtree is open
    while stack:
        b, d, node, _ = stack.pop()
        while pending and pending[-1][1] >= d:
            end[pending.pop()[0]] = len(byte)
        slot = len(byte)
        byte.append(b)
        depth.append(d)
        end.append(-1)
        ids = node["ids"]
        token.append(ids[0] if ids else -1)
        for a, c in zip(ids, ids[1:], strict=False):
            dup_next[a] = c
        pending.append((slot, d))
        for kb in sorted(node["kids"], reverse=True):
            stack.append((kb, d + 1, node["kids"][kb], slot))
    while pending:
        end[pending.pop()[0]] = len(byte)
    return {"byte": byte, "token": token, "depth": depth, "end": end, "dup_next": dup_next,
            "max_depth": max(depth), "n_nodes": len(byte), "vocab_size": len(tokens)}


def trie_arrays(trie: Any) -> dict[str, Any]:
    """The same fields of a TokenTrie, as lists (dtypes checked by the caller)."""
    return {"byte": trie.byte.tolist(), "token": trie.token.tolist(), "depth": trie.depth.tolist(),
            "end": trie.end.tolist(), "dup_next": trie.dup_next.tolist(),
            "max_depth": trie.max_depth, "n_nodes": trie.n_nodes, "vocab_size": trie.vocab_size}
