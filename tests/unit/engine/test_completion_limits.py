"""Engine bounds: compile under a deadline, Earley rows within ``max_earley_items``, and
the shortest completion within ``completion_states`` / ``completion_bytes`` and in
memory linear in its length (a Lark ``"a"{100000}`` used to take gigabytes to close).
"""

from __future__ import annotations

import resource

import numpy as np
import pytest

from tether.engine import compile as engine_compile
from tether.engine.completion import _byte_bfs, shortest_completion
from tether.errors import ConstraintError, LimitError
from tether.grammar.ir import Grammar
from tether.limits import limits
from tether.parser import ByteParser, accepts
from tether.parser.earley import EarleyParser
from tether.parser.tables import ParserTables
from tether.tokens.vocabulary import Vocabulary


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary.from_bytes([b""] + [bytes([i]) for i in range(256)], eos_ids=[0])


def _tok(b: int) -> int:
    return b + 1


def test_lark_repeat_closes_within_bytes_and_memory(vocab: Vocabulary) -> None:
    n = 100_000
    cc = engine_compile(Grammar.from_lark(f'start: "a"{{{n}}}'), vocab)
    m = cc.matcher()
    assert m.consume(_tok(ord("a")))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tail = m.shortest_completion()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert tail == b"a" * (n - 1)
    # linear in the completion: one parser row per lexeme (quadratic before: > 4 GB)
    assert grown_kib < 600 * 1024, grown_kib
    w = m.copy()
    assert w.consume_bytes(b"a" * 10)  # the matcher is left unchanged


def test_completion_longer_than_completion_bytes_is_a_limit_error(vocab: Vocabulary) -> None:
    cc = engine_compile(Grammar.from_lark('start: "a"{5000}'), vocab)
    m = cc.matcher()
    assert m.consume(_tok(ord("a")))
    with limits(completion_bytes=1000), pytest.raises(LimitError) as exc:
        shortest_completion(m)
    assert exc.value.limit == "completion_bytes" and exc.value.value == 4999
    assert len(shortest_completion(m)) == 4999  # within the default limit


def test_nested_repeat_completion_is_refused_before_expansion(vocab: Vocabulary) -> None:
    # 10^9 bytes: the cost is known from the grammar, nothing is built
    g = Grammar.from_lark('start: b{1000}\nb: c{1000}\nc: "a"{1000}')
    m = engine_compile(g, vocab).matcher()
    with pytest.raises(LimitError) as exc:
        shortest_completion(m)
    assert exc.value.limit == "completion_bytes" and exc.value.value == 10**9


def test_byte_search_stops_at_completion_states(vocab: Vocabulary) -> None:
    g = Grammar.from_regex("[a-z]{30}")
    m = engine_compile(g, vocab).matcher()
    with limits(completion_states=5), pytest.raises(ConstraintError):
        _byte_bfs(m, 5)
    with limits(completion_states=5):  # the lexeme-level search needs no byte search
        assert shortest_completion(m) == b"a" * 30


def test_shortest_completion_reads_completion_states(vocab: Vocabulary, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tether.engine import completion

    seen: list[int] = []
    monkeypatch.setattr(completion, "_candidates", lambda m: iter(()))
    monkeypatch.setattr(completion, "_byte_bfs", lambda m, k: seen.append(k) or b"")
    m = engine_compile(Grammar.from_regex("ab"), vocab).matcher()
    with limits(completion_states=7):
        shortest_completion(m)
    assert seen == [7]


def test_earley_items_bounded_in_the_parser() -> None:
    g = Grammar.from_lark('start: s\ns: s s | "a"')
    with limits(max_earley_items=200):
        tables = ParserTables.from_grammar(g)
    assert tables.max_items == 200
    p = EarleyParser(tables)
    a = tables.terminal_ids[next(iter(g.terminals))]
    with pytest.raises(LimitError) as exc:
        for _ in range(200):
            assert p.push([a])
    assert exc.value.limit == "max_earley_items"
    assert exc.value.place.startswith("lexeme ")


def test_earley_items_bound_is_read_at_compile_time() -> None:
    g = Grammar.from_lark('start: s\ns: s s | "a"')
    tables = ParserTables.from_grammar(g)  # default limit
    with limits(max_earley_items=10):
        bp = ByteParser(tables)
        assert bp.feed(b"a" * 30)  # the tables' own bound applies, not the current one


def test_compile_runs_under_the_deadline(vocab: Vocabulary) -> None:
    text = "\n".join(f'r{i} ::= "x"{{2}} r{i + 1} | "y"' for i in range(300)) + '\nr300 ::= "z"'
    with limits(compile_seconds=1e-6), pytest.raises(LimitError) as exc:
        Grammar.from_gbnf(text, start="r0")
    assert exc.value.limit == "compile_seconds"
    g = Grammar.from_gbnf(text, start="r0")
    with limits(compile_seconds=1e-6), pytest.raises(LimitError) as exc2:
        engine_compile(Grammar.from_choices([f"c{i}" for i in range(50)] + [str(id(g))]), vocab)
    assert exc2.value.limit == "compile_seconds"


@pytest.mark.parametrize("n", [10_000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_many_choices_compile_and_mask_exactly(vocab: Vocabulary, n: int) -> None:
    words = [f"w{i}x{i % 7}" for i in range(n)]
    cc = engine_compile(Grammar.from_choices(words), vocab)
    out = np.zeros(cc.n_words, np.uint32)
    for w in (words[0], words[n // 3], words[-1]):
        m = cc.matcher()
        data = w.encode()
        for i in range(len(data) + 1):
            m.compute_mask(out)
            allowed = {t - 1 for t in range(1, 257) if out[t >> 5] >> (t & 31) & 1}
            prefix = data[:i]
            expect = {c.encode()[i] for c in words if c.encode().startswith(prefix) and len(c) > i}
            assert allowed == expect, (w, i)
            assert bool(out[0] & 1) == (prefix.decode() in set(words))
            if i < len(data):
                assert m.consume(_tok(data[i]))


@pytest.mark.parametrize("front", ["gbnf", "lark"])
def test_alternation_of_10000_literals_is_exact(vocab: Vocabulary, front: str) -> None:
    words = [f"k{i}q" for i in range(10_000)]
    if front == "gbnf":
        g = Grammar.from_gbnf("root ::= " + " | ".join(f'"{w}"' for w in words))
    else:
        g = Grammar.from_lark("start: " + " | ".join(f'"{w}"' for w in words))
    cc = engine_compile(g, vocab)
    out = np.zeros(cc.n_words, np.uint32)
    m = cc.matcher()
    m.compute_mask(out)
    assert {t - 1 for t in range(1, 257) if out[t >> 5] >> (t & 31) & 1} == {ord("k")}
    assert m.consume_bytes(b"k123")
    m.compute_mask(out)
    allowed = {t - 1 for t in range(1, 257) if out[t >> 5] >> (t & 31) & 1}
    assert allowed == set(b"0123456789q")
    assert accepts(g, b"k9999q") and not accepts(g, b"k10000q")


def test_long_sequence_of_new_nodes_keeps_few_parsers() -> None:
    # every position of "a"{n} is a new parser node; deep nodes keep only their origin and
    # are rebuilt on demand (multi-byte tokens make the walk ask for them inside a token)
    n = 3000
    toks = [b"", b"a", b"aa", b"aaa", b"aaaaaaa", b"b"]
    vocab = Vocabulary.from_bytes(toks, eos_ids=[0])
    cc = engine_compile(Grammar.from_lark(f'start: "a"{{{n}}}'), vocab)
    m = cc.matcher()
    out = np.zeros(cc.n_words, np.uint32)
    done = 0
    while done < n:
        m.compute_mask(out)
        allowed = {t for t in range(len(toks)) if out[t >> 5] >> (t & 31) & 1}
        expect = {t for t in (1, 2, 3, 4) if len(toks[t]) <= n - done}
        assert allowed == expect, done
        t = 4 if n - done >= 7 else 1
        assert m.consume(t)
        done += len(toks[t])
    m.compute_mask(out)
    assert out[0] & 1 and not out[0] & 0b111110
    kept = sum(p is not None for p in cc.steps._node_parser)
    assert len(cc.steps._node_parser) > n // 2 and kept < n // 20
    assert len(cc.steps._recent) <= 32  # the copies of new deep nodes are bounded too


def test_deep_nodes_no_longer_recent_are_rebuilt_from_kept_ancestors() -> None:
    # a decode of "a"s leaves the transitions by "b" unknown at every position; a second
    # decode by "b"s needs them from nodes of the first no longer among the recent copies
    n = 400
    toks = [b"", b"a", b"b", b"ab"]
    vocab = Vocabulary.from_bytes(toks, eos_ids=[0])
    cc = engine_compile(Grammar.from_lark(f'start: x{{{n}}}\nx: "a" | "b"'), vocab)
    first = cc.matcher()
    for _ in range(n):
        assert first.consume(1)
    assert first.is_accepting()
    rebuilt = []
    parser_at = cc.steps.parser_at

    def counted(node: int) -> object:
        rebuilt.append(node)
        return parser_at(node)

    cc.steps.parser_at = counted  # type: ignore[method-assign]
    second = cc.matcher()
    out = np.zeros(cc.n_words, np.uint32)
    for done in range(n):
        second.compute_mask(out)
        allowed = {t for t in range(len(toks)) if out[t >> 5] >> (t & 31) & 1}
        assert allowed == ({1, 2, 3} if n - done >= 2 else {1, 2}), done
        assert second.consume(2)
    assert second.is_accepting()
    assert len(rebuilt) > n // 2  # the path under test: deep nodes, rebuilt


def test_earley_limit_at_decode_time_is_a_sticky_error_not_an_exception(vocab: Vocabulary) -> None:
    g = Grammar.from_lark('start: s\ns: s s | "a"')
    with limits(max_earley_items=300):
        cc = engine_compile(g, vocab)
    m = cc.matcher()
    out = np.zeros(cc.n_words, dtype=np.uint32)
    stopped = False
    for _ in range(400):  # the ambiguous grammar's Earley sets grow with every "a"
        m.compute_mask(out)
        if not m.consume(_tok(ord("a"))):
            stopped = True
            break
    assert stopped, "the item limit was never reached"
    assert "max_earley_items" in (m.error or "")
    m.compute_mask(out)  # never raises past the limit either
    m.is_accepting()
