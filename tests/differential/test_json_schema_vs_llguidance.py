"""Differential: tether's JSON-Schema masks against llguidance's, on the dev schemas.

tether: ``Grammar.from_json_schema(schema, whitespace="flexible", property_order="any")``;
llguidance: ``grammar_from_json_schema(schema)`` with its defaults (flexible whitespace),
retried with ``coerce_one_of`` where it refuses ``oneOf`` (tether reads an overlapping
``oneOf`` as ``anyOf`` too, with a warning). Each valid instance of a schema both compile
is forced as ``json.dumps(instance)`` along its canonical Gemma 3 tokenization (a random
small vocabulary without the model); at every step the masks are compared as sets of
token bytes, EOS apart, and every token one engine allows alone must be in a class:

tether only (where tether is more permissive; on up to ``CHECKED`` tokens per step and class
and ``BUDGET`` per instance and class, tether's shortest completion after the token must be
a valid instance per ``jsonschema``, ``oneOf`` read as ``anyOf`` as both engines do here):

``key_order``
    the token writes object-key text, or a ``,`` announcing another property: tether
    takes properties in any order and extra properties anywhere; llguidance writes the
    required properties first, then the others, in schema order, extras last.
``del_in_string``
    U+007F unescaped in a string: valid JSON (only U+0000-U+001F must be escaped);
    llguidance's strings exclude it.
``solidus_escape``
    ``\\/`` in a string without constraints: valid JSON; llguidance does not write it.
``unicode_escape``
    a ``\\uXXXX`` escape in a string without constraints: valid JSON; llguidance writes
    ``\\u`` only for control characters (``\\u0041`` is refused).
``ecma_space``
    U+FEFF where a pattern asks for ``\\s``: ECMA-262's ``\\s`` (the dialect JSON Schema
    names) matches it, Rust's Unicode ``\\s`` does not.
``forced_bytes``
    a proper prefix of llguidance's forced bytes, which llguidance allows only as its
    tokenizer splits them (see test_manifest_vs_llguidance).
``valid_completion``
    any other token tether alone allows, provided its completion is a valid instance
    (checked on every such token within the budget; where the grammar has warnings other
    than ``oneOf`` read as ``anyOf`` or the large-object ``property_order`` relaxation,
    such a token fails the test; for ``ecma_space`` U+FEFF is validated as a space, since
    ``jsonschema`` matches patterns with Python's Unicode ``\\s``). Seen: a draft-04/06/07
    ``$ref`` whose siblings llguidance applies (the draft ignores them), a property that
    is an extra of another ``anyOf`` branch whose required properties llguidance wants
    first, a quoted e-mail local part (RFC 5321) that llguidance's format excludes.

llguidance only (where tether's output policy is narrower, docs/json_schema.md; on the
same sample, tether's ``ByteParser`` must reject prefix + token):

``ws_bound``
    a whitespace run longer than ``max_whitespace`` (16): tether bounds every gap so a
    model cannot loop on whitespace; llguidance's gaps are unbounded.
``number_form``
    a fraction or exponent tether does not write: integers are written without them
    (``1.0`` is ``1``), bounded numbers positionally.
``escape_form``
    a string escape outside the canonical escaping of a constrained string (pattern,
    format, length, enum): tether accepts the canonical form only there.
``ecma_space``
    U+FEFF (or U+0085) where a pattern uses ``\\s``/``\\S``: ECMA-262's ``\\s`` matches
    U+FEFF and not U+0085, Rust's Unicode ``\\s`` the other way round.
``hostname_hyphens``
    ``--`` in positions 3-4 of a domain label (e-mail, hostname): tether's RFC 1123
    hostname keeps them for IDNA A-labels (RFC 5891), llguidance's allows them.
``leap_second``
    a seconds field ``6x`` in a date-time before 23:59: tether's RFC 3339 format allows
    second 60 only at 23:59 (a leap second), llguidance's regex at any minute.

Instances llguidance refuses (a key out of schema order, most often) are compared up to
that token. The default run takes ``SAMPLE`` schemas; the full run is ``slow``.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

llg = pytest.importorskip("llguidance", reason="llguidance (the 'dev' extra) is not installed")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "engine"))
from engine_reference import greedy_tokenize, random_vocab  # noqa: E402
from json_context import WS, Scanner  # noqa: E402
from llg_compare import DATA, Side, gemma_side, make_side, walk  # noqa: E402

from tether.engine import compile  # noqa: E402
from tether.errors import ConstraintError, SchemaError  # noqa: E402
from tether.grammar.ir import Grammar  # noqa: E402
from tether.parser import ByteParser  # noqa: E402

SCHEMAS = DATA / "jsonschemabench-dev" / "schemas"
if not SCHEMAS.is_dir():
    pytest.skip(f"{SCHEMAS} is absent (shared test data)", allow_module_level=True)

SAMPLE = 15
CHECKED = 2  # tokens per step and class given the costly check
BUDGET = 12  # costly checks per instance and class
MAX_TOKENS = 250  # longer instances are cut (default run)
MAX_WS = 16
OPTIONS = {"whitespace": "flexible", "property_order": "any"}


ECMA_ONLY_SPACE = "\ufeff"  # in ECMA-262's \s, not in Unicode White_Space (Rust's \s)
RUST_ONLY_SPACE = "\x85"  # the other way round
LEAP = re.compile(rb"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:$")


def _chars(ctx: Scanner, tb: bytes) -> str:
    return tb.decode("utf-8", "replace") if ctx.in_string else ""


def tether_only_class(step, ctx: Scanner, tb: bytes) -> str:  # type: ignore[no-untyped-def]
    if step.ff and step.ff.startswith(tb) and len(tb) < len(step.ff):
        return "forced_bytes"
    if ctx.in_key or (ctx.expect_key and tb.lstrip(WS)[:1] == b'"'):
        return "key_order"  # inside a key, or opening one
    ev = ctx.copy().feed(tb, record=True).events
    if ev & {"key", "key_start", "object_comma"}:
        return "key_order"
    if "del" in ev:
        return "del_in_string"
    if "escape_/" in ev:
        return "solidus_escape"
    if "escape_u" in ev:
        return "unicode_escape"
    if ctx.in_string and (ECMA_ONLY_SPACE in _chars(ctx, tb) or b"\xef\xbb\xbf".startswith(tb)):
        return "ecma_space"
    return "valid_completion"


def llg_only_class(step, ctx: Scanner, tb: bytes) -> str | None:  # type: ignore[no-untyped-def]
    sc = ctx.copy().feed(tb, record=True)
    if sc.max_ws_run > MAX_WS:
        return "ws_bound"
    if "number_form" in sc.events or ("number" in sc.events and ctx.num):
        return "number_form"
    if any(e.startswith("escape_") for e in sc.events):
        return "escape_form"
    if ctx.in_string and (ECMA_ONLY_SPACE in _chars(ctx, tb) or RUST_ONLY_SPACE in _chars(ctx, tb)):
        return "ecma_space"
    if ctx.in_string and tb[:1] == b"6" and LEAP.search(step.prefix):
        return "leap_second"
    if ctx.in_string and b"@" in ctx.text:
        label = re.split(rb"[@.]", ctx.text + tb)[-1] if b"." not in tb else b""
        if b"--" in tb and label[2:4] == b"--":
            return "hostname_hyphens"
    return None


def _any_of(x):  # type: ignore[no-untyped-def]
    """``x`` with every ``oneOf`` read as ``anyOf`` (as both engines compile it here)."""
    if isinstance(x, dict):
        return {("anyOf" if k == "oneOf" else k): _any_of(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_any_of(v) for v in x]
    return x


_FIRST: dict[int, np.ndarray] = {}


def first_nonws(side: Side) -> np.ndarray:
    """Per token: its first byte that is not JSON whitespace (-1 if none)."""
    got = _FIRST.get(id(side))
    if got is None:
        got = np.array([(t.lstrip(WS)[:1] or b"\xff")[0] if t.lstrip(WS) else -1
                        for t in side.vocab.tokens], dtype=np.int32)
        _FIRST[id(side)] = got
    return got


def compile_pair(doc: dict):  # type: ignore[no-untyped-def]
    try:
        tg = Grammar.from_json_schema(doc["schema"], **OPTIONS)
    except SchemaError as exc:
        return f"tether: {str(exc).splitlines()[0]}"
    src = json.dumps(doc["schema"])
    lg = llg.LLMatcher.grammar_from_json_schema(src)
    err = llg.LLMatcher.validate_grammar(lg)
    if err and "oneOf" in err:
        lg = llg.LLMatcher.grammar_from_json_schema(src, defaults={"coerce_one_of": True})
        err = llg.LLMatcher.validate_grammar(lg)
    if err:
        return f"llguidance: {err.splitlines()[0]}"
    return tg, lg


def compare_schema(f: Path, side: Side, tokenize, max_tokens: int | None = MAX_TOKENS) -> Counter:  # type: ignore[no-untyped-def]
    doc = json.loads(f.read_text())
    out: Counter = Counter()
    pair = compile_pair(doc)
    if isinstance(pair, str):
        out["skipped: " + pair.split(":")[0]] += 1
        return out
    tg, lg = pair
    cc = compile(tg, side.vocab)
    bp = ByteParser(tg)
    cls = jsonschema.validators.validator_for(doc["schema"], default=jsonschema.Draft202012Validator)
    # completions are validated where tether claims exactness: no warnings but oneOf-as-anyOf
    exact = all(w.startswith(("oneOf at", "property_order='any'")) for w in tg.warnings)
    validator = cls(_any_of(doc["schema"])) if exact else None
    v = side.vocab
    problems: list[str] = []
    for n, t in enumerate(doc["tests"]):
        if not t["valid"]:
            continue
        ids = tokenize(json.dumps(t["data"]).encode())[:max_tokens]
        out["instances"] += 1
        budget: Counter = Counter()
        rng = random.Random(f"{f.name}:{n}")
        for step, ours, _theirs in walk(side, cc, lg, ids):
            out["steps"] += 1
            if step.refused.startswith("tether"):
                problems.append(f"instance {n}: {step.refused}")
            elif step.refused:
                out["llguidance refuses the instance"] += 1
            if step.same:
                continue
            out["steps differing"] += 1
            if step.eos_tether != step.eos_llg:
                problems.append(f"instance {n} step {step.step}: EOS tether {step.eos_tether}, "
                                f"llguidance {step.eos_llg} after {step.prefix[-50:]!r}")
            ctx = Scanner().feed(step.prefix)
            by: dict[str, list[int]] = {}
            only = np.asarray(step.tether_only, dtype=np.int64)
            if ctx.in_key:  # every token goes on writing (or ends) the key
                keyed = np.ones(len(only), bool)
            elif ctx.expect_key:  # tokens opening a key
                keyed = first_nonws(side)[only] == ord('"')
            else:
                keyed = np.zeros(len(only), bool)
            if keyed.any():
                out["key_order"] += int(keyed.sum())
                by["key_order"] = only[keyed].tolist()
            for tok in only[~keyed].tolist():
                c = tether_only_class(step, ctx, v.tokens[tok])
                out[c] += 1
                by.setdefault(c, []).append(tok)
            for c, toks in by.items():  # tether's extra tokens complete to valid instances
                if c == "forced_bytes" or (budget[c] >= BUDGET and c != "valid_completion"):
                    continue
                if c == "valid_completion" and validator is None:
                    problems.append(f"instance {n} step {step.step} after {step.prefix[-50:]!r}: "
                                    f"tether only {[v.tokens[x] for x in toks[:5]]} (no class, and "
                                    "the grammar's warnings leave no exactness to check)")
                    continue
                k = CHECKED if c != "valid_completion" else max(CHECKED, BUDGET - budget[c])
                for tok in rng.sample(toks, min(k, len(toks))):
                    budget[c] += 1
                    w = ours.copy()
                    assert w.consume(tok), w.error
                    try:
                        text = step.prefix + v.tokens[tok] + w.shortest_completion()
                    except ConstraintError:
                        out["completion not found (not checked)"] += 1
                        continue
                    if c == "ecma_space":  # Python's re (jsonschema) reads \s as Unicode does
                        text = text.replace("\ufeff".encode(), b" ")
                    try:
                        value = json.loads(text)
                    except ValueError:
                        problems.append(f"{c}: {text[-80:]!r} (completion after "
                                        f"{v.tokens[tok]!r}) is not JSON")
                        continue
                    if validator is not None and not validator.is_valid(value):
                        problems.append(f"{c}: {text[-80:]!r} (completion after "
                                        f"{v.tokens[tok]!r}) is not a valid instance")
            by = {}
            for tok in step.llg_only:
                c = llg_only_class(step, ctx, v.tokens[tok])
                if c is None:
                    problems.append(f"instance {n} step {step.step} after {step.prefix[-50:]!r}: "
                                    f"llguidance only {v.tokens[tok]!r} (no class)")
                    continue
                out[c] += 1
                by.setdefault(c, []).append(tok)
            for c, toks in by.items():  # tether's policy excludes them
                if budget[c] >= BUDGET:
                    continue
                for tok in rng.sample(toks, min(CHECKED, len(toks))):
                    budget[c] += 1
                    p = ByteParser(bp.tables, lexer=bp.lexer)
                    if p.feed(step.prefix + v.tokens[tok]):
                        problems.append(f"{c}: tether's reference keeps {v.tokens[tok]!r} after "
                                        f"{step.prefix[-50:]!r} viable, its mask does not")
    assert not problems, f"{f.name}:\n" + "\n".join(problems[:15])
    return out


def sample_files(k: int | None) -> list[Path]:
    files = sorted(SCHEMAS.glob("*.json"))
    random.Random(11).shuffle(files)
    return files if k is None else files[:k]


def _random_side(f: Path):  # type: ignore[no-untyped-def]
    doc = json.loads(f.read_text())
    alphabet = b"".join(json.dumps(t["data"]).encode() for t in doc["tests"] if t["valid"])
    vocab = random_vocab(alphabet[:3000] + b' \n{}[]":,', random.Random(f.name), n=150)
    return make_side(vocab, lambda b: greedy_tokenize(vocab, b)), vocab


@pytest.mark.parametrize("f", sample_files(SAMPLE), ids=lambda f: f.stem[:40])
def test_dev_schemas_random_vocab(f: Path) -> None:
    side, vocab = _random_side(f)
    compare_schema(f, side, lambda b: greedy_tokenize(vocab, b), max_tokens=80)


@pytest.mark.model
@pytest.mark.parametrize("f", sample_files(SAMPLE), ids=lambda f: f.stem[:40])
def test_dev_schemas_gemma(f: Path) -> None:
    side = gemma_side()
    if isinstance(side, str):
        pytest.skip(side)
    print(f.name, dict(compare_schema(f, side, side.tokenize)))


@pytest.mark.slow
@pytest.mark.model
def test_all_dev_schemas_gemma() -> None:
    side = gemma_side()
    if isinstance(side, str):
        pytest.skip(side)
    total: Counter = Counter()
    failures = []
    for f in sample_files(None):
        try:
            total += compare_schema(f, side, side.tokenize, max_tokens=None)
        except AssertionError as exc:
            failures.append(str(exc)[:600])
    print(dict(total))
    assert not failures, "\n\n".join(failures[:10])


if __name__ == "__main__":  # summary counts on Gemma: python ... [k]
    side = gemma_side()
    assert not isinstance(side, str), side
    k = int(sys.argv[1]) if len(sys.argv) > 1 else None
    total = Counter()
    for f in sample_files(k):
        try:
            c = compare_schema(f, side, side.tokenize, max_tokens=None)
            total += c
            print(f.name, dict(c), flush=True)
        except AssertionError as exc:
            total["FAILED schemas"] += 1
            print("FAILED", str(exc)[:1500], flush=True)
    print("TOTAL", dict(total))
