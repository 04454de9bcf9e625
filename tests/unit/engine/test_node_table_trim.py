"""The regex layer's intern table stays bounded across constraints (``regex.interning``).

A trim drops the nodes that only the table (and the memos it empties) holds: nodes still
held stay interned (built again, the same object), uids stay unique, and a constraint
compiled before a trim decodes and masks exactly as one compiled after it. Compiling many
distinct constraints, each dropped after use, keeps the table near its limit instead of
growing with every one.
"""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

import tether.engine as te
from tether.engine.compiled import CompiledConstraint
from tether.grammar import Grammar
from tether.grammar.ir import T, Terminal
from tether.regex import ast, interning, parse
from tether.tokens.vocabulary import Vocabulary

_TOKENS = ([bytes([b]) for b in range(32, 127)]
           + [b"ab", b"abc", b"12", b"345", b"xyz", b'"', b'":', b"true", b"<eos>"])
VOCAB = Vocabulary.from_bytes(_TOKENS, eos_ids=[len(_TOKENS) - 1])


def _regex_grammar(pattern: str) -> Grammar:
    g = Grammar(start="start")
    g.add_terminal(Terminal("RX", regex=pattern))
    g.add_rule("start", T("RX"))
    return g


def _pattern(rng: random.Random) -> str:
    a, b = rng.randint(1, 30), rng.randint(31, 60)
    word = "".join(rng.choice("abcxyz") for _ in range(rng.randint(2, 9)))
    return f"(?:{word}|[0-9]{{{rng.randint(2, 12)}}})[a-z]{{{a},{b}}}(?:x|y|[0-9]+)*"


def _decode(cc: CompiledConstraint, rng: random.Random, steps: int) -> list[bytes]:
    """Masks along a random path of allowed tokens (as bytes, to compare)."""
    m = cc.matcher()
    out = np.zeros((VOCAB.size + 31) // 32, np.uint32)
    masks = []
    for _ in range(steps):
        m.compute_mask(out)
        masks.append(out.tobytes())
        allowed = [t for t in range(VOCAB.size - 1) if out[t >> 5] >> (t & 31) & 1]
        if not allowed:
            break
        assert m.consume(rng.choice(allowed)), m.error
    return masks


def test_held_nodes_stay_interned_and_unheld_ones_go() -> None:
    held = parse("held-[a-f]{3,7}q")
    parse("dropped-[g-k]{3,7}q")  # held by the regex layer's pattern memo only
    before = interning.table_size()
    uids_before = max(n.uid for n in ast._table.values())
    kept = interning.trim()
    assert kept == interning.table_size() < before
    assert parse("held-[a-f]{3,7}q") is held  # rebuilt: the node still held
    dropped = parse("dropped-[g-k]{3,7}q")
    assert dropped.uid > uids_before  # built anew, with a fresh uid
    uids = [n.uid for n in ast._table.values()]
    assert len(set(uids)) == len(uids)
    for key, n in ast._table.items():
        assert key == (n.kind, n.args)


def test_trim_below_the_threshold_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interning, "TABLE_LIMIT", interning.table_size() + 1000)
    monkeypatch.setattr(interning, "_trim_at", 0)
    assert interning.trim_if_over() is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_masks_are_the_same_across_a_trim(seed: int) -> None:
    rng = random.Random(seed)
    pattern = _pattern(rng)
    path_seed = rng.randrange(1 << 30)
    old = CompiledConstraint(_regex_grammar(pattern), VOCAB)
    first = _decode(old, random.Random(path_seed), 12)  # some of its tables filled
    interning.trim()
    again = _decode(old, random.Random(path_seed), 40)  # the rest filled after the trim
    fresh = _decode(CompiledConstraint(_regex_grammar(pattern), VOCAB), random.Random(path_seed), 40)
    assert again[:len(first)] == first
    assert again == fresh
    assert len(fresh) > 1


def test_compile_cache_survives_a_trim() -> None:
    g = _regex_grammar("cache-[a-c]{2,40}(?:12|345)")
    cc = te.compile(g, VOCAB)
    before = _decode(cc, random.Random(5), 30)
    interning.trim()
    assert te.compile(g, VOCAB) is cc
    assert _decode(cc, random.Random(5), 30) == before


def test_table_stays_bounded_across_distinct_constraints(monkeypatch: pytest.MonkeyPatch) -> None:
    headroom = 1000
    monkeypatch.setattr(interning, "TABLE_LIMIT", 2 * headroom)
    kept = interning.trim()  # what the process holds now: the next trim comes past kept + headroom
    rng = random.Random(7)
    made0 = next(ast._uids)
    peak = 0
    for _ in range(150):
        cc = CompiledConstraint(_regex_grammar(_pattern(rng)), VOCAB)
        _decode(cc, rng, 8)
        peak = max(peak, interning.table_size())
        del cc
    made = next(ast._uids) - made0
    assert made > 4 * headroom  # without trims the table would end that much larger
    assert peak < kept + 2 * headroom  # a trim keeps the held nodes (one constraint's at most)


def test_threads_decode_alike_while_trims_happen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads compiling and decoding distinct constraints while the table is trimmed
    under them (a small limit: a trim at almost every compile) get the masks a
    sequential run gets, and the nodes held across the trims stay the interned ones: a
    trim removes no node in use (an earlier trim that emptied the table and refilled it
    let a thread build a second copy of a node in use meanwhile)."""
    rng = random.Random(13)
    jobs = [(_pattern(rng), rng.randrange(1 << 30)) for _ in range(24)]
    expected = {p: _decode(CompiledConstraint(_regex_grammar(p), VOCAB), random.Random(s), 20)
                for p, s in jobs}
    monkeypatch.setattr(interning, "TABLE_LIMIT", 2)
    monkeypatch.setattr(interning, "_trim_at", 0)
    got: dict[str, list[bytes]] = {}
    errors: list[BaseException] = []

    def work(part: list[tuple[str, int]]) -> None:
        try:
            for p, s in part:
                got[p] = _decode(CompiledConstraint(_regex_grammar(p), VOCAB), random.Random(s), 20)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    held = {p: parse(p) for p, _ in jobs[:4]}  # a trim keeps them: built again, the same
    threads = [threading.Thread(target=work, args=(jobs[i::3],)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert got == expected
    for p, node in held.items():
        interning._COMPILED.clear()  # parse again, not from the pattern memo
        assert parse(p) is node
    assert ast.literal(b"") is ast.EPSILON and ast.concat(ast.EPSILON, ast.EMPTY) is ast.EMPTY


def test_the_json_schema_records_survive_a_trim() -> None:
    """A trim empties the JSON Schema compiler's records of texts' nodes (they hold
    nodes) and the memos of the makers that record them, so a text made again is
    recorded again; the records made at import stay."""
    from tether.grammar.json_schema.nodes import recorded
    from tether.grammar.json_schema.numbers import INTEGER, NUMBER
    from tether.grammar.json_schema.string_keywords import ANY_BODY, length_body

    body = length_body(3, 9)
    assert recorded(body) is parse(body)
    interning.trim()
    for text in (INTEGER, NUMBER, ANY_BODY):
        assert recorded(text) is parse(text)
    again = length_body(3, 9)
    assert again == body and recorded(again) is parse(again)
    g = Grammar.from_json_schema({"type": "object", "properties": {"a": {"maxLength": 4}}},
                                 whitespace="flexible")
    assert _decode(CompiledConstraint(g, VOCAB), random.Random(3), 30)


def test_removed_nodes_are_freed_without_a_collection() -> None:
    """A star's derivative holds the star (a cycle through the derivative cache); the
    sweep empties the removed nodes' caches, so they go with their last reference, the
    gc off."""
    import gc
    import weakref

    from tether.regex import derivative

    star = parse("(?:cyc[a-z]le)*q")
    for b in b"cyclexq":
        derivative(star, b)
    ref = weakref.ref(star)
    del star
    enabled = gc.isenabled()
    gc.disable()
    try:
        interning.trim()
        assert ref() is None
    finally:
        if enabled:
            gc.enable()
