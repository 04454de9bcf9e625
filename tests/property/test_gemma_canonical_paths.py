"""On the real Gemma 3 vocabulary (262,144 tokens): valid samples' canonical paths are
allowed, and allowed tokens can be completed.

For the grammar manifest's valid samples, the JSON-Schema-Test-Suite's valid instances
(draft 2020-12, written in tether's output policy with ``dumps_for``) and the dev
schemas' valid instances (``json.dumps``, ``whitespace="flexible"``,
``property_order="any"``):

* the canonical tokenization (llama.cpp's) is allowed at every step, and EOS at the end;
* at every step, ``K`` allowed tokens drawn at random can be completed: the token plus
  the engine's shortest completion is a sentence tether's reference ``ByteParser``
  accepts, and for JSON Schema grammars without warnings a valid instance (``jsonschema``)
  unless it repeats a key: additional (unnamed) keys are not kept distinct by the
  grammar, so ``{"": 0, "": 0}`` can count twice toward ``minProperties`` (a known gap).

Instances the grammar's policy excludes (``ByteParser`` rejects the text: the documented
false negatives of the suite's baseline) are not this test's business and are skipped.
The default run takes a deterministic sample; the full sets are ``slow``.
"""

from __future__ import annotations

import json
import random
import sys
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "differential"))
from llg_compare import DATA, gemma_side  # noqa: E402

from tether.engine import compile  # noqa: E402
from tether.errors import ConstraintError, GrammarError, RegexError, SchemaError  # noqa: E402
from tether.grammar.ir import Grammar  # noqa: E402
from tether.parser import ByteParser  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402

pytestmark = pytest.mark.model
K = 2
MANIFEST = DATA / "grammars" / "manifest.json"
SUITE = DATA / "json-schema-test-suite"
DEV = DATA / "jsonschemabench-dev" / "schemas"


@pytest.fixture(scope="module")
def side():  # type: ignore[no-untyped-def]
    s = gemma_side()
    if isinstance(s, str):
        pytest.skip(s)
    return s


class _Repeated(Exception):
    pass


REPEATED = object()


def _no_repeats(kv: list) -> dict:
    if len({k for k, _ in kv}) < len(kv):
        raise _Repeated
    return dict(kv)


def _loads(text: bytes):  # type: ignore[no-untyped-def]
    try:
        # numbers in decimals: big and fractional values keep the digits written
        return json.loads(text, object_pairs_hook=_no_repeats, parse_float=Decimal)
    except _Repeated:
        return REPEATED


def exactly_valid(validator):  # type: ignore[no-untyped-def]
    """``validator.is_valid`` with ``multipleOf`` decided in decimals (as the schema
    compiler does), not in binary floats (``0.6`` is a multiple of ``0.0001``)."""
    from fractions import Fraction

    def ok(value) -> bool:  # type: ignore[no-untyped-def]
        try:
            errors = list(validator.iter_errors(value))
        except Exception:  # noqa: BLE001 - Decimal vs float, ECMA-only regex syntax: undecided
            return True
        for e in errors:
            if e.validator == "multipleOf" and isinstance(e.instance, (int, float, Decimal)):
                q = Fraction(str(e.instance)) / Fraction(str(e.validator_value))
                if q.denominator == 1:
                    continue
            return False
        return True

    return ok


def walk_path(side, g: Grammar, cc, data: bytes, rng: random.Random, validate=None) -> None:  # type: ignore[no-untyped-def]
    """Force ``data``'s canonical tokens; check completions of ``K`` allowed tokens per step."""
    v = side.vocab
    ids = side.tokenize(data)
    bp = ByteParser(g)
    m = cc.matcher()
    out = allocate_mask(v.size)
    done = b""
    for i, t in enumerate([*ids, None]):
        m.compute_mask(out)
        allowed = mask_to_ids(out).tolist()
        if t is None:
            assert all(out[e >> 5] >> (e & 31) & 1 for e in v.eos_ids), f"EOS refused after {done[-60:]!r}"
        else:
            assert out[t >> 5] >> (t & 31) & 1, f"step {i}: {v.tokens[t]!r} refused after {done[-60:]!r}"
        for u in rng.sample(allowed, min(K, len(allowed))):
            if u in v.eos_ids:
                assert ByteParser(bp.tables, lexer=bp.lexer).feed(done) and m.is_accepting()
                continue
            w = m.copy()
            assert w.consume(u), w.error
            try:
                tail = w.shortest_completion()
            except ConstraintError:  # the search is bounded; a miss is not a counterexample
                continue
            text = done + v.tokens[u] + tail
            p = ByteParser(bp.tables, lexer=bp.lexer)
            assert p.feed(text) and p.is_accepting(), f"step {i}: {v.tokens[u]!r} completes to {text[-80:]!r}"
            if validate is not None:
                value = _loads(text)
                if value is REPEATED:
                    continue  # a repeated key: the grammar cannot keep arbitrary extra keys distinct
                assert validate(value), f"step {i}: {text[-120:]!r} is not a valid instance"
        if t is None:
            break
        assert m.consume(t), m.error
        done += v.tokens[t]


# -- the grammar manifest ----------------------------------------------------------------------

def _manifest() -> list[tuple[str, dict]]:
    if not MANIFEST.exists():
        return []
    return [(e["file"], e) for e in json.loads(MANIFEST.read_text())["grammars"]
            if not e.get("requires_postlex")]


@pytest.mark.parametrize("file, entry", _manifest(), ids=[Path(f).stem for f, _ in _manifest()])
def test_manifest_samples(side, file: str, entry: dict) -> None:  # type: ignore[no-untyped-def]
    text = (DATA / "grammars" / file).read_text(encoding="utf-8")
    try:
        g = (Grammar.from_gbnf(text, start=entry["start"]) if entry["format"] == "gbnf"
             else Grammar.from_lark(text, start=entry["start"]))
    except (GrammarError, RegexError) as exc:
        pytest.skip(f"tether cannot load it: {str(exc).splitlines()[0]}")
    cc = compile(g, side.vocab)
    rng = random.Random(file)
    samples = list(entry["valid"]) + [(DATA / "grammars" / f).read_text(encoding="utf-8")
                                      for f in entry.get("valid_files", [])]
    for s in samples:
        ref = ByteParser(g)
        if not (ref.feed(s) and ref.is_accepting()):
            continue  # a lexeme-policy divergence from the reference engine, listed (with its
            # reason) in tests/conformance/test_grammar_manifest.py: not this test's business
        walk_path(side, g, cc, s.encode("utf-8"), rng)


# -- JSON-Schema-Test-Suite --------------------------------------------------------------------

def _remote(uri: str):  # type: ignore[no-untyped-def]
    prefix = "http://localhost:1234/"
    if uri.startswith(prefix) and (SUITE / "remotes" / uri[len(prefix):]).exists():
        return json.loads((SUITE / "remotes" / uri[len(prefix):]).read_text())
    return None


def _suite_files(step: int) -> list[Path]:
    base = SUITE / "tests" / "draft2020-12"
    return sorted(base.rglob("*.json"))[::step] if base.is_dir() else []


def check_suite_file(side, path: Path) -> int:  # type: ignore[no-untyped-def]
    import jsonschema

    from tether.grammar.json_schema import compile_json_schema, dumps_for

    checked = 0
    for gi, group in enumerate(json.loads(path.read_text())):
        try:
            g = compile_json_schema(group["schema"], resolve_remote=_remote)
        except (SchemaError, RecursionError):
            continue
        bp = ByteParser(g)
        cc = compile(g, side.vocab)
        validate = None
        # jsonschema matches patterns with Python's re, not ECMA-262 (\d, \s, \c differ)
        if not g.warnings and '"pattern' not in json.dumps(group["schema"]):
            try:
                val = jsonschema.Draft202012Validator(group["schema"])
                val.is_valid(None)
                validate = exactly_valid(val)
            except Exception:  # noqa: BLE001 - remote refs etc.: grammar check only
                validate = None
        for t in group["tests"]:
            if not t["valid"]:
                continue
            try:
                data = dumps_for(group["schema"], t["data"]).encode("utf-8")
            except (ValueError, TypeError, UnicodeEncodeError):
                continue
            p = ByteParser(bp.tables, lexer=bp.lexer)
            if not (p.feed(data) and p.is_accepting()):
                continue  # excluded by the output policy (documented false negatives)
            walk_path(side, g, cc, data, random.Random(f"{path.name}:{gi}"), validate)
            checked += 1
    return checked


def test_json_schema_suite_sample(side) -> None:  # type: ignore[no-untyped-def]
    files = _suite_files(12)
    if not files:
        pytest.skip(f"{SUITE} is missing")
    assert sum(check_suite_file(side, f) for f in files) >= 20


@pytest.mark.slow
def test_json_schema_suite_all(side) -> None:  # type: ignore[no-untyped-def]
    files = _suite_files(1)
    if not files:
        pytest.skip(f"{SUITE} is missing")
    assert sum(check_suite_file(side, f) for f in files) >= 500


# -- dev schemas (flexible whitespace, any property order) -------------------------------------

def check_dev_schema(side, f: Path, max_bytes: int = 3000) -> int:  # type: ignore[no-untyped-def]
    import jsonschema

    doc = json.loads(f.read_text())
    try:
        g = Grammar.from_json_schema(doc["schema"], whitespace="flexible", property_order="any")
    except SchemaError:
        return 0
    cc = compile(g, side.vocab)
    validate = None
    if not g.warnings:
        cls = jsonschema.validators.validator_for(doc["schema"], default=jsonschema.Draft202012Validator)
        validate = exactly_valid(cls(doc["schema"]))
    n = 0
    for i, t in enumerate(doc["tests"]):
        if t["valid"]:
            data = json.dumps(t["data"]).encode()
            if len(data) <= max_bytes:
                walk_path(side, g, cc, data, random.Random(f"{f.name}:{i}"), validate)
                n += 1
    return n


def test_dev_schema_sample(side) -> None:  # type: ignore[no-untyped-def]
    if not DEV.is_dir():
        pytest.skip(f"{DEV} is missing")
    files = sorted(DEV.glob("*.json"))
    random.Random(3).shuffle(files)
    assert sum(check_dev_schema(side, f, max_bytes=1500) for f in files[:8]) >= 5


@pytest.mark.slow
def test_all_dev_schema_instances(side) -> None:  # type: ignore[no-untyped-def]
    if not DEV.is_dir():
        pytest.skip(f"{DEV} is missing")
    failures = []
    for f in sorted(DEV.glob("*.json")):
        try:
            check_dev_schema(side, f, max_bytes=100_000)
        except AssertionError as exc:
            failures.append(f"{f.name}: {str(exc)[:300]}")
    assert not failures, "\n".join(failures)
