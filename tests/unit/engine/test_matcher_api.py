"""Matcher API: consume / rollback / copy / EOS / errors / batch / lookahead."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_reference import json_grammar, list_grammar, regex_grammar, stop_grammar  # noqa: E402

from tether.engine import compile, compute_masks  # noqa: E402
from tether.errors import ConstraintError  # noqa: E402
from tether.parser import accepts  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402

TOKS = [b"", b"", b"1", b"12", b"a", b"ab", b",", b"1,", b",a", b"a1", b"1a", b" ", b"2,3",
        b"", b"12"]


@pytest.fixture
def vocab() -> Vocabulary:
    # 0 and 13 are EOS ids, 1 is special, 14 duplicates 3; 3 padding logits rows
    return Vocabulary.from_bytes(TOKS, eos_ids=[0, 13], special_ids=[1], n_logits=len(TOKS) + 3)


def ids(m, vocab) -> set[int]:
    out = allocate_mask(vocab.size)
    m.compute_mask(out)
    return set(mask_to_ids(out).tolist())


def test_eos_only_at_accepting_states_all_ids(vocab) -> None:
    m = compile(list_grammar(), vocab).matcher()
    assert not ids(m, vocab) & {0, 13}
    assert not m.is_accepting()
    assert not m.consume(0) and "not complete" in m.error
    assert m.consume(3)
    assert {0, 13} <= ids(m, vocab)
    assert 14 in ids(m, vocab) and 3 in ids(m, vocab)  # duplicates both allowed
    assert m.consume(13) and m.is_finished() and m.is_accepting()
    assert ids(m, vocab) == set()
    assert not m.consume(2) and "after end" in m.error


def test_special_and_out_of_range_never_allowed(vocab) -> None:
    m = compile(list_grammar(), vocab).matcher()
    assert 1 not in ids(m, vocab)
    assert not m.consume(1) and "special" in m.error
    assert not m.consume(len(TOKS) + 1) and "out of range" in m.error


def test_rejected_token_leaves_state_and_explains(vocab) -> None:
    m = compile(list_grammar(), vocab).matcher()
    assert m.consume(2)
    before = ids(m, vocab)
    assert not m.consume(10)  # "1a": NUM then WORD with no comma
    assert "rejected" in m.error and "allowed there" in m.error
    assert ids(m, vocab) == before and m.n_tokens == 1
    assert m.consume(6) and m.error is None


def test_rollback_and_copy_are_independent(vocab) -> None:
    cc = compile(list_grammar(), vocab)
    m = cc.matcher()
    seq = [3, 6, 5, 8]  # "12" "," "ab" ",a"
    masks = []
    for t in seq:
        masks.append(ids(m, vocab))
        assert m.consume(t), m.error
    masks.append(ids(m, vocab))
    c = m.copy()
    m.rollback(2)
    assert ids(m, vocab) == masks[2]
    assert ids(c, vocab) == masks[4]
    assert c.consume(6) and not m.consume(6)
    m.rollback(m.n_tokens)
    assert ids(m, vocab) == masks[0]
    with pytest.raises(ValueError, match="cannot roll back"):
        m.rollback(1)


def test_consume_bytes_and_padding(vocab) -> None:
    m = compile(list_grammar(), vocab).matcher()
    assert m.consume_bytes(b"12,ab")
    assert not m.consume_bytes(b",,") and "rejected" in m.error
    assert m.is_accepting()
    m.rollback(1)
    assert not m.is_accepting()
    out = allocate_mask(vocab.n_logits)  # a mask as wide as the logits row is refused
    if out.shape[0] != allocate_mask(vocab.size).shape[0]:
        with pytest.raises(ValueError):
            m.compute_mask(out)


def test_batch_masks(vocab) -> None:
    cc = compile(list_grammar(), vocab)
    a, b = cc.matcher(), cc.matcher()
    assert b.consume(3)
    out = np.zeros((3, allocate_mask(vocab.size).shape[0]), np.uint32)
    compute_masks([a, b], out)
    assert set(mask_to_ids(out[0]).tolist()) == ids(a, vocab)
    assert set(mask_to_ids(out[1]).tolist()) == ids(b, vocab)
    assert not out[2].any()
    with pytest.raises(ValueError):
        compute_masks([a, b, a, b], out)


def test_compile_is_cached_by_content(vocab) -> None:
    assert compile(list_grammar(), vocab) is compile(list_grammar(), vocab)
    with pytest.raises(ConstraintError):
        compile(42, vocab)


def test_grammars_of_one_shape_are_told_apart_by_content(vocab) -> None:
    # the cache hashes only the shape (start, sizes): equal shapes must still compare content
    a, b = regex_grammar("[0-9]+"), regex_grammar("[a-z]+")
    ca, cb = compile(a, vocab), compile(b, vocab)
    assert ca is not cb and ca.grammar is a and cb.grammar is b
    assert compile(regex_grammar("[a-z]+"), vocab) is cb
    # a grammar changed after its compile is compiled again (the key is a snapshot)
    g = regex_grammar("[0-9]+")
    c1 = compile(g, vocab)
    from dataclasses import replace

    g.terminals = {n: replace(t, regex="[xy]+", node=None) for n, t in g.terminals.items()}
    c2 = compile(g, vocab)
    assert c2 is not c1


def byte_vocab() -> Vocabulary:
    toks = [b""] + [bytes([i]) for i in range(256)] + [b'{"', b'":', b"true", b"null", b'"}']
    return Vocabulary.from_bytes(toks, eos_ids=[0])


def test_forced_bytes_and_fast_forward() -> None:
    v = byte_vocab()
    g = regex_grammar(r'\{"name": "[a-z]+", "ok": (true|false)\}')
    m = compile(g, v).matcher()
    assert m.forced_bytes() == b'{"name": "'
    ff = m.fast_forward()
    assert b"".join(v.tokens[t] for t in ff) == b'{"name": "'[: len(b"".join(v.tokens[t] for t in ff))]
    for t in ff:
        assert m.consume(t)
    assert m.consume_bytes(b'{"name": "'[len(b"".join(v.tokens[t] for t in ff)):])
    assert m.forced_bytes() == b""
    assert m.consume_bytes(b"ab")
    assert m.forced_bytes() == b""  # more letters or the quote
    assert m.consume_bytes(b'"')
    assert m.forced_bytes() == b', "ok": '


def test_shortest_completion_closes_outputs() -> None:
    v = byte_vocab()
    for g, prefix in [(json_grammar(), b'{"a": [1, {"b'), (list_grammar(), b"12,"),
                      (regex_grammar(r"(ab)+c{3}"), b"aba"), (stop_grammar(), b"ab;x")]:
        m = compile(g, v).matcher()
        assert m.consume_bytes(prefix), m.error
        tail = m.shortest_completion()
        assert accepts(g, prefix + tail), (prefix, tail)
        assert m.consume_bytes(tail) and m.is_accepting()
        assert m.shortest_completion() == b""


def test_is_finished_only_when_nothing_can_follow() -> None:
    v = byte_vocab()
    m = compile(regex_grammar(r"ab?"), v).matcher()
    assert m.consume_bytes(b"a")
    assert m.is_accepting() and not m.is_finished()
    assert m.consume_bytes(b"b")
    assert m.is_finished()
