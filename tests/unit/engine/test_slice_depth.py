"""The slice depth search's shortcuts (``walk._node_depth``) keep masks exact.

A state whose lexeme stays alive under every text string of ``k`` bytes takes the
slices of tokens up to ``k`` bytes whole, without walking them; the shortcuts claim
``k = INF`` without a search for ``X·Y`` whose head ``X`` has it (an unanchored
pattern ``.*P.*``) and for ``A & ~F1 & ...`` where some ASCII text byte is in no ``Fi``
(keys besides named and pattern properties). On a vocabulary of words over the bytes
of those keys and patterns, the masks with slices equal the full walk's (``slices=False``)
along random paths, and the depth found is ``INF`` there.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tether.engine import compile
from tether.engine import walk as engine_walk
from tether.grammar.ir import Grammar
from tether.tokens import Vocabulary
from tether.tokens.bitmask import allocate_mask, mask_to_ids

NAMED = {f"{w}_{k}_description": {"type": "string"} for k in range(12)
         for w in ("name", "identifier", "abbreviation")}
SCHEMAS = {
    "pattern_keys": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "id": {"type": "integer"}, **NAMED},
        "patternProperties": {  # a language tag (BCP 47-like): an infinite key set
            "^name_([A-Za-z]{2,3}(-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})(-[A-Za-z]{4})?"
            "(-([A-Za-z]{2}|[0-9]{3}))?(-([0-9A-Za-z]{5,8}|[0-9][0-9A-Za-z]{3}))*$":
            {"type": "string"}},
        "additionalProperties": {"type": "boolean"},
    },
    "unanchored_pattern": {"type": "string",
                           "pattern": "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"},
    "words": {"type": "string", "pattern": "^(?:\\S+\\s+){0,3}\\S+$", "maxLength": 40},
    # a word count in a string, counted (19 * 2 bytes at least), without a length bound
    "word_count": {"type": "string", "pattern": "^(?:\\S+\\s+){0,19}\\S*$"},
    # any text starts a multiple of five characters: INF, with a new derivative at each
    # of five positions, where no shortcut answers and the search runs
    "fives": {"type": "string", "pattern": "^(?:.....)*$"},
    # an ECMA ``.`` refuses U+2028 / U+2029, which text (the slices' alphabet) leaves out
    "ecma_dot": {"type": "string", "pattern": "^.+$"},
}
ALPHABET = b'abcdefmnxyzAZ019_-: {}",!#\\'


def vocabulary(rng: random.Random, n: int = 1500) -> Vocabulary:
    words = {bytes([b]) for b in range(0x20, 0x7F)}
    pieces = [b"name", b"name_", b"_en", b"-US", b"id", b'"', b'":', b'": ', b"2024", b"-05",
              b"true", b"false", b", ", b"{", b"}", b'{"', b'"}', b"!", b"##",
              *(x.encode() for x in ("\u2028", "a\u2029", "\u2027b", "\u2030", "\u2000", "é", "\u20ac"))]
    words.update(pieces)
    while len(words) < n:
        k = rng.randint(2, 12)
        words.add(bytes(rng.choice(ALPHABET) for _ in range(k)))
    return Vocabulary.from_bytes([b"<eos>", *sorted(words)], eos_ids=[0])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masks_with_slices_equal_full_walks(name: str, seed: int) -> None:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    g = Grammar.from_json_schema(SCHEMAS[name], whitespace="flexible")
    sliced = compile(g, vocab, slices=True).matcher()
    full = compile(g, vocab, slices=False).matcher()
    a, b = allocate_mask(vocab.size), allocate_mask(vocab.size)
    for _ in range(40):
        sliced.compute_mask(a)
        full.compute_mask(b)
        assert np.array_equal(a, b), (name, seed)
        ids = [t for t in mask_to_ids(a).tolist() if t not in vocab.eos_ids]
        if not ids:
            break
        t = rng.choice(ids)
        assert sliced.consume(t) and full.consume(t)


class _Searched(Exception):
    pass


class _NoSearch:
    """A stand-in for the constraint's tables: the bounded search would start here."""

    @property
    def dfa(self) -> None:
        raise _Searched


def test_depth_shortcuts_claim_inf() -> None:
    """With the depth of the parts known (``INF``), the shortcuts answer for the whole
    without the bounded search; where neither applies, the search runs."""
    from tether import regex as rx

    body = rx.parse("[ -~]*")  # every ASCII text byte, any length
    tags = rx.parse("name_[a-z]{2,3}(-[A-Z]{2})*")  # infinite; no '!', no '#'
    inf = engine_walk.INF
    cache: dict[object, int] = {body: inf}
    key = rx.intersect(body, rx.complement(tags))
    assert engine_walk._node_depth(_NoSearch(), 0, key, 48, cache) >= inf  # type: ignore[arg-type]
    unanchored = rx.concat(body, rx.parse("[0-9]{4}-[0-9]{2}"), body)
    assert engine_walk._node_depth(_NoSearch(), 0, unanchored, 48, cache) >= inf  # type: ignore[arg-type]
    every = rx.intersect(body, rx.complement(rx.parse("[ -~]*x[ -~]*")))  # 'x' in F: no byte spared
    with pytest.raises(_Searched):
        engine_walk._node_depth(_NoSearch(), 0, rx.intersect(every, rx.complement(rx.parse("[ -~]+"))),
                                48, cache)  # type: ignore[arg-type]


def test_ecma_dot_string_takes_slices_whole() -> None:
    """Inside a string whose ``pattern`` is ECMA ``^.+$`` (no line terminator), every
    text string keeps the lexeme alive: text leaves out U+2028 and U+2029, so the depth
    is ``INF`` and the string's masks take the slices whole instead of walking the trie."""
    vocab = vocabulary(random.Random(0))
    cc = compile(Grammar.from_json_schema(SCHEMAS["ecma_dot"], whitespace="flexible"), vocab)
    m = cc.matcher()
    assert m.consume_bytes(b'"ab')
    depth = engine_walk.lexeme_depth(cc.steps, m._ls, 48, {})
    assert depth >= engine_walk.INF


def test_a_search_that_proves_inf_spares_the_later_positions_theirs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The search that proves a string's depth ``INF`` records the derivatives it met
    between characters: the later positions in the string (five different regex nodes
    here) find their depth in the cache instead of a search each."""
    vocab = vocabulary(random.Random(0))
    cc = compile(Grammar.from_json_schema(SCHEMAS["fives"], whitespace="flexible"), vocab)
    m = cc.matcher()
    searched: list[int] = []
    real = engine_walk.containment_depth
    monkeypatch.setattr(engine_walk, "containment_depth",
                        lambda *a, **k: searched.append(a[2]) or real(*a, **k))
    cache: dict[object, int] = {}
    assert m.consume_bytes(b'"')
    counts = []
    for text in (b"a", b"b", b"c", b"d", b"e", b"f", "\u00e9".encode(), b" ", b"!", b"xy"):
        assert m.consume_bytes(text)
        assert engine_walk.lexeme_depth(cc.steps, m._ls, 48, cache) >= engine_walk.INF
        counts.append(len(searched))
    assert counts[-1] == counts[1] <= 2, counts  # a search or two at first, then none


def test_the_word_count_string_is_searched_deep() -> None:
    """A word-count pattern, counted, makes a new state per position: the search goes
    past the depth that 96 pairs reached (8), so the masks walk only the long tokens."""
    vocab = vocabulary(random.Random(0))
    cc = compile(Grammar.from_json_schema(SCHEMAS["word_count"], whitespace="flexible"), vocab)
    m = cc.matcher()
    assert m.consume_bytes(b'"one two ')
    assert engine_walk.lexeme_depth(cc.steps, m._ls, 48, {}) >= 16


def test_spared_bytes() -> None:
    from tether import regex as rx

    tags = rx.parse("name_[a-z]{2}(-[A-Z]{2})*")
    assert engine_walk._spares_text_byte([tags])  # e.g. '!' is in no tag
    assert not engine_walk._spares_text_byte([tags, rx.parse("[ -~]*")])  # every text byte
    assert engine_walk._bytes_used(rx.complement(tags)) == -1  # a complement: unknown
    assert engine_walk._bytes_used(rx.literal(b"ab" * 5000)) == (1 << ord("a")) | (1 << ord("b"))
