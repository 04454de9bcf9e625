"""Shortest completion: bytes after which the matcher accepts, found at the lexeme level.

Oracles: the byte-level breadth-first search (exactly shortest, slow) on small grammars,
the reference recognizer (``tether.parser.accepts``) and ``json.loads`` on JSON-Schema
grammars of the dev benchmark at random viable prefixes of valid instances.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_reference import GRAMMARS  # noqa: E402

from tether.engine import compile, completion  # noqa: E402
from tether.parser import accepts  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / ".." / "shared" / "data" / "jsonschemabench-dev" / "schemas"
SCHEMAS = [
    "Glaiveai2K---calculate_area_5c7d28ea",
    "Glaiveai2K---find_hotels_8ec3215e",
    "Github_easy---o90440",
]


def byte_vocab() -> Vocabulary:
    return Vocabulary.from_bytes([b""] + [bytes([i]) for i in range(256)], eos_ids=[0])


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return byte_vocab()


def _no_byte_search(m, max_states):  # type: ignore[no-untyped-def]
    raise AssertionError("the lexeme-level completion was not used")


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_exactly_shortest_on_small_grammars(vocab: Vocabulary, name: str) -> None:
    build, _, samples = GRAMMARS[name]
    g = build()
    cc = compile(g, vocab)
    for text in samples:
        m = cc.matcher()
        for i in range(len(text) + 1):
            if i:
                assert m.consume_bytes(text[i - 1:i]), m.error
            tail = m.shortest_completion()
            assert accepts(g, text[:i] + tail), (text[:i], tail)
            w = m.copy()
            assert w.consume_bytes(tail) and w.is_accepting()
            exact = b"" if m.is_accepting() else completion._byte_bfs(m, 50_000)
            assert len(tail) == len(exact), (text[:i], tail, exact)


def _viable(cc, text: bytes) -> bytes:  # type: ignore[no-untyped-def]
    """The longest prefix of ``text`` the constraint allows."""
    m = cc.matcher()
    for i in range(len(text)):
        if not m.consume_bytes(text[i:i + 1]):
            return text[:i]
    return text


def _schema_cases(rng: random.Random) -> list[str]:
    names = sorted(p.stem for p in BENCH.glob("*.json"))
    return SCHEMAS + rng.sample(names, 12)


@pytest.mark.skipif(not BENCH.exists(), reason=f"test data missing: {BENCH}")
def test_json_schema_prefixes_close_without_byte_search(vocab: Vocabulary,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.grammar.json_schema import compile_json_schema

    monkeypatch.setattr(completion, "_byte_bfs", _no_byte_search)
    rng = random.Random(7)
    checked = 0
    for name in _schema_cases(rng):
        case = json.loads((BENCH / f"{name}.json").read_text())
        try:
            g = compile_json_schema(case["schema"])
            cc = compile(g, vocab)
        except Exception:  # noqa: BLE001 -- schemas the compiler rejects are not this test's
            continue
        for t in case["tests"]:
            if not t["valid"]:
                continue
            text = _viable(cc, json.dumps(t["data"], separators=(",", ":"),
                                          ensure_ascii=False).encode())
            cuts = sorted({rng.randrange(len(text) + 1) for _ in range(6)})
            m = cc.matcher()
            done = 0
            for c in cuts:
                assert m.consume_bytes(text[done:c]), m.error
                done = c
                tail = m.shortest_completion()
                w = m.copy()
                assert w.consume_bytes(tail) and w.is_accepting(), (name, text[:c], tail)
                out = text[:c] + tail
                json.loads(out)
                assert accepts(g, out), (name, out)
                checked += 1
    assert checked >= 30


@pytest.mark.skipif(not BENCH.exists(), reason=f"test data missing: {BENCH}")
def test_completion_is_cached_per_parser_node(vocab: Vocabulary) -> None:
    from tether.grammar.json_schema import compile_json_schema

    case = json.loads((BENCH / f"{SCHEMAS[0]}.json").read_text())
    cc = compile(compile_json_schema(case["schema"]), vocab)
    m = cc.matcher()
    assert m.consume_bytes(b'{"dimensions":{"ra')
    first = m.shortest_completion()
    assert first == b'":0},"shape":""}'
    comp = completion._completer(cc)
    known = dict(comp.by_node)
    assert m.shortest_completion() == first
    assert comp.by_node == known


def test_joined_lexemes_fall_back_to_an_exact_search(vocab: Vocabulary) -> None:
    """``A B`` with ``A = a+`` and ``B = a`` can never be lexed (greedy ``A`` takes every
    ``a``), so the cheapest lexeme sequence ``aa`` does not check; ``abb`` does."""
    from tether.grammar.ir import Grammar, T, Terminal

    g = Grammar(start="start")
    g.add_terminal(Terminal("A", regex=r"a+"))
    g.add_terminal(Terminal("B", literal="a"))
    g.add_terminal(Terminal("C", literal="bb"))
    g.add_rule("start", T("A"), T("B"))
    g.add_rule("start", T("A"), T("C"))
    cc = compile(g, vocab)
    for prefix, tail in [(b"", b"abb"), (b"a", b"bb"), (b"aaa", b"bb")]:
        m = cc.matcher()
        assert m.consume_bytes(prefix)
        assert m.shortest_completion() == tail
