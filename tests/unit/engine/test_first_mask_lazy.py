"""A constraint's first mask fills only the lexer rows its own walk reads; the rows filled
ahead (extra classes, repeated bytes, literal chains) start with the second mask.

Filling ahead never changes a mask, only when table entries are made: the masks of a
decode are the same with rows ahead from the start, never, or (the default) from the
second mask on, and the first mask makes fewer lexer states than with rows ahead."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tether.engine.compiled import CompiledConstraint
from tether.grammar.ir import Grammar
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, mask_to_ids

KEYS = {f"{w}_{k}": {"type": ["string", "integer"]} for k in range(8)
        for w in ("name", "label", "alias", "identifier")}
SCHEMAS = {
    "keys": {"type": "object", "properties": KEYS, "required": ["name_0"]},
    "closed_keys": {"type": "object", "properties": KEYS, "additionalProperties": False},
    "array": {"type": "array", "items": {"enum": ["alpha", "beta", "gamma", 12, True]}},
    "string": {"type": "string", "pattern": "^[a-z]{2,5}(-[0-9]{2})*$"},
}
ALPHABET = b'abcdefgilmnrstxyz0129_-: {}[]",'


def vocabulary(rng: random.Random, n: int = 1200) -> Vocabulary:
    words = {bytes([b]) for b in range(0x20, 0x7F)}
    words.update([b'{"', b'{"name', b'"name_', b'": ', b'",', b', "', b"label", b"alias",
                  b"_0", b"_1", b'["', b'"]', b"alpha", b"beta", b"  ", b"\n", b"true"])
    while len(words) < n:
        words.add(bytes(rng.choice(ALPHABET) for _ in range(rng.randint(2, 9))))
    return Vocabulary.from_bytes([b"<eos>", *sorted(words)], eos_ids=[0])


def decode(cc: CompiledConstraint, rng: random.Random, ahead: bool | None, steps: int = 30
           ) -> tuple[list[bytes], int]:
    """The masks along a random path (and the lexer states after the first mask); ``ahead``
    None: the default, else rows ahead forced on or off for every mask."""
    m = cc.matcher()
    out = allocate_mask(cc.vocabulary.size)
    masks: list[bytes] = []
    first_states = -1
    for _ in range(steps):
        if ahead is not None:
            cc.steps.rows.ahead = ahead
        m.compute_mask(out)
        if first_states < 0:
            first_states = cc.steps.dfa.n_states
        masks.append(out.tobytes())
        ids = [t for t in mask_to_ids(out).tolist() if t not in cc.vocabulary.eos_ids]
        if not ids:
            break
        assert m.consume(rng.choice(ids))
    return masks, first_states


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("seed", [0, 1])
def test_rows_ahead_change_no_mask(name: str, seed: int) -> None:
    vocab = vocabulary(random.Random(seed))
    g = Grammar.from_json_schema(SCHEMAS[name], whitespace="flexible")
    runs = {}
    for ahead in (None, True, False):  # fresh constraints: no shared tables or caches
        cc = CompiledConstraint(g, vocab)
        assert cc.steps.rows.ahead is False  # nothing ahead before the first mask
        runs[ahead] = decode(cc, random.Random(seed), ahead)
        if ahead is None:
            assert cc.steps.rows.ahead is True  # on from the second mask
    assert runs[None][0] == runs[True][0] == runs[False][0]
    assert runs[None][1] <= runs[True][1]


def test_first_mask_makes_fewer_states_on_many_keys() -> None:
    vocab = vocabulary(random.Random(3))
    g = Grammar.from_json_schema(SCHEMAS["keys"], whitespace="flexible")
    lazy, eager = CompiledConstraint(g, vocab), CompiledConstraint(g, vocab)
    eager.steps.rows.ahead = True
    a, b = allocate_mask(vocab.size), allocate_mask(vocab.size)
    lazy.matcher().compute_mask(a)
    eager.matcher().compute_mask(b)
    assert np.array_equal(a, b)
    # the keys' literal chains and the classes no token of this walk reads wait
    assert lazy.steps.dfa.n_states < eager.steps.dfa.n_states
