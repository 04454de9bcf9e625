"""Conformance of the grammar front ends + ByteParser with shared/data/grammars/manifest.json.

For every grammar the front ends can load: every valid sample is accepted, each of its
proper prefixes is viable (checked byte by byte) and its parse tree has the lexemes as
leaves; an invalid sample of kind
``viable_prefix`` is viable but not accepted; one of kind ``dead`` is not viable.
Expected results are the manifest's, i.e. its reference engine's (llama.cpp for GBNF,
lark for Lark grammars; see ``known_engine_divergences`` there). Grammars that cannot be
loaded are skipped with the reason.
"""

from __future__ import annotations

import importlib
import inspect
import json
from functools import cache
from pathlib import Path

import pytest

from tether.errors import GrammarError, RegexError
from tether.grammar.ir import Grammar
from tether.parser import ByteParser

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grammars"
MANIFEST = DATA / "manifest.json"

if not MANIFEST.exists():
    pytest.skip(f"{MANIFEST} is absent (shared test data)", allow_module_level=True)

ENTRIES = {e["file"]: e for e in json.loads(MANIFEST.read_text())["grammars"]}

# Where our result differs from the manifest's reference engine on purpose: (file, sample
# text) -> why. Kept empty unless a divergence is understood and documented.
KNOWN_DIVERGENCES: dict[tuple[str, str], str] = {
    ("lark/lark-parser/lark.lark", "start: x\nx: /[0-9]+/ -> num\n%import common.WS\n%ignore WS\n"): (
        "greedy lexing: lark.lark's COMMENT (/\\s*/ \"//\" ...) keeps ' /' alive as a lexeme after "
        "'x:', which then dies at '['; Lark's lexer tries the terminals one by one and takes "
        "the whitespace"
    ),
    ("lark/lark-parser/verilog.lark", "module x; endmodule extra"): (
        "keywords: tether lexes 'endmodule' as the keyword and as an IDENTIFIER (the parser "
        "allows both), so 'endmodule extra' can start a module instantiation; Lark gives "
        "the string its precedence over the regex terminal"
    ),
}


def _front_end(fmt: str):  # type: ignore[no-untyped-def]
    fn = getattr(Grammar, f"from_{fmt}", None)
    if fn is None:
        try:
            fn = getattr(importlib.import_module(f"tether.grammar.{fmt}"), f"from_{fmt}")
        except (ImportError, AttributeError):
            return None
    return fn


@cache
def recognizer(file: str) -> ByteParser | str:
    """A ByteParser for the grammar, or the reason it cannot be built."""
    entry = ENTRIES[file]
    if entry.get("requires_postlex"):
        return f"needs a post-lexer ({entry['requires_postlex'].split(' ')[0]}), not a CFG"
    fn = _front_end(entry["format"])
    if fn is None:
        return f"no {entry['format']} front end yet (Grammar.from_{entry['format']})"
    kwargs = {}
    params = inspect.signature(fn).parameters
    if "start" in params:
        kwargs["start"] = entry["start"]
    if "source" in params:
        kwargs["source"] = file
    try:
        grammar = fn((DATA / file).read_text(encoding="utf-8"), **kwargs)
        if grammar.start != entry["start"]:
            grammar.start = entry["start"]
        return ByteParser(grammar)
    except (GrammarError, RegexError, NotImplementedError) as exc:
        first = str(exc).splitlines()[0]
        return f"the front end cannot load it: {type(exc).__name__}: {first}"


def fresh(file: str) -> ByteParser:
    r = recognizer(file)
    if isinstance(r, str):
        pytest.skip(f"{file}: {r}")
    return ByteParser(r.tables, lexer=r.lexer)


def valid_samples(entry: dict) -> list[str]:
    out = list(entry["valid"])
    out += [(DATA / f).read_text(encoding="utf-8") for f in entry.get("valid_files", [])]
    return out


VALID = [
    pytest.param(file, i, id=f"{Path(file).stem}-valid{i}")
    for file, e in ENTRIES.items()
    for i in range(len(valid_samples(e)))
]
INVALID = [
    pytest.param(file, i, id=f"{Path(file).stem}-{e['invalid'][i]['kind']}{i}")
    for file, e in ENTRIES.items()
    for i in range(len(e["invalid"]))
]


def _known(file: str, text: str) -> None:
    why = KNOWN_DIVERGENCES.get((file, text))
    if why:
        pytest.xfail(why)


@pytest.mark.parametrize("file, i", VALID)
def test_valid_sample_and_its_prefixes(file: str, i: int) -> None:
    text = valid_samples(ENTRIES[file])[i]
    _known(file, text)
    p = fresh(file)
    data = text.encode("utf-8")
    for k, b in enumerate(data):
        assert p.feed(bytes([b])), f"prefix of {k + 1} bytes not viable: {p.error}"
    assert p.is_accepting(), f"{text[:80]!r} is viable but not accepted"
    # the parse tree's leaves are the scanned lexemes, in order
    leaves = [(x.start, x.end) for x in p.parse_tree().iter_lexemes()]
    assert leaves == sorted(set(leaves))
    assert {(a, b) for a, b, _, scanned in p.lexemes if scanned} <= set(leaves)
    assert all(leaf[1] <= len(data) for leaf in leaves)


@pytest.mark.parametrize("file, i", INVALID)
def test_invalid_sample(file: str, i: int) -> None:
    sample = ENTRIES[file]["invalid"][i]
    _known(file, sample["text"])
    p = fresh(file)
    ok = p.feed(sample["text"])
    if sample["kind"] == "viable_prefix":
        assert ok, f"should be viable: {p.error}"
        assert not p.is_accepting(), "an incomplete text was accepted"
    else:
        assert sample["kind"] == "dead"
        assert not ok, "a dead text was reported viable"


def test_loading_report() -> None:
    """Every grammar either loads or is skipped for a stated reason (printed with -rs)."""
    reasons = {f: r for f in ENTRIES if isinstance(r := recognizer(f), str)}
    for f, r in reasons.items():
        print(f"skipped {f}: {r}")
    assert all(reasons.values())


# -- the test vectors the manifest lists (grammar text inline, strings with expected kinds) ----

VECTORS = DATA / "vectors"


def _vector_cases() -> list:
    out = []
    llama = json.loads((VECTORS / "llama.cpp-test-grammar-integration.json").read_text())
    for c in llama["cases"]:
        if c["format"] == "gbnf":  # json_schema cases belong to the schema compiler's tests
            kinds = c.get("invalid_kinds") or ["invalid"] * len(c["invalid"])
            strings = [(s, "valid") for s in c["valid"]] + list(
                zip(c["invalid"], kinds, strict=True)
            )
            out.append(pytest.param("gbnf", c["grammar"], strings, id=f"llama.cpp-{c['line']}"))
    lg = json.loads((VECTORS / "llguidance-test-lark.json").read_text())
    for c in lg["cases"]:
        if c["uses_llguidance_extensions"]:  # %json, lazy/stop attributes, ... : front-end tests
            continue
        strings = [(s, "valid") for s in c["valid"]]
        strings += [(s, "viable_prefix") for s in c["invalid_viable_prefix"]]
        strings += [(s, "dead") for s in c["invalid"]]
        out.append(pytest.param("lark", c["grammar"], strings, id=f"llguidance-{c['line']}"))
    return out


@pytest.mark.parametrize("fmt, text, strings", _vector_cases())
def test_vector_case(fmt: str, text: str, strings: list[tuple[str, str]]) -> None:
    fn = _front_end(fmt)
    if fn is None:
        pytest.skip(f"no {fmt} front end yet")
    try:
        bp = ByteParser(fn(text))
    except (GrammarError, RegexError, NotImplementedError) as exc:
        pytest.skip(f"the front end cannot load it: {str(exc).splitlines()[0]}")
    wrong = []
    for s, kind in strings:
        p = ByteParser(bp.tables, lexer=bp.lexer)
        viable = p.feed(s)
        got = "valid" if viable and p.is_accepting() else "viable_prefix" if viable else "dead"
        # "invalid" (kind not recorded) means viable_prefix or dead
        if got != kind and not (kind == "invalid" and got != "valid"):
            wrong.append(f"{s[:60]!r}: expected {kind}, got {got} ({p.error})")
    assert not wrong, "\n".join(wrong)
