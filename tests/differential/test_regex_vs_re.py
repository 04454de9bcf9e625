"""tether.regex against Python's ``re`` (the oracle), on real JSON Schema patterns,
the rust-lang/regex vectors, the JSON-Schema-Test-Suite ECMA cases, and random patterns.

Every pattern ``re`` accepts must either compile and agree with ``re`` on every text
tried, or be rejected with a ``RegexError``: never silently differ. Texts: members
sampled from our own automaton (so positives are exercised), one-character mutations of
them, the strings of the schemas' test instances, naughty strings, and invalid UTF-8
(which a str pattern can never match).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
import warnings
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import RegexError
from tether.regex import Node, matches, parse, random_member, search

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "property"))
from regex_strategies import (  # noqa: E402
    SMALL_ALPHABET,
    assertion_patterns,
    ecma_patterns,
    invalid_utf8,
    patterns,
    texts,
)

DATA = Path(__file__).resolve().parents[2] / "../shared/data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared test data not found at {DATA}")

FIXED_TEXTS = [
    "", "a", "A", "z", "0", "9", "-1", "1.5e10", " ", "\n", "\r\n", "\t", "é", "É", "😀",
    "中文", "٣", "\u2028", "\u00a0", "ab\n", "true", "null", "http://x.y/z?q=1#f",
    "2024-01-31T12:00:00Z", "user@example.com", "#fff", "v1.2.3", "_x", "a b", "../",
]
INVALID_UTF8 = [b"\xff", b"\xc3", b"a\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]


def _walk(x: object, out: list[str]) -> None:
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "pattern" and isinstance(v, str):
                out.append(v)
            elif k == "patternProperties" and isinstance(v, dict):
                out.extend(v)
            _walk(v, out)
    elif isinstance(x, list):
        for v in x:
            _walk(v, out)


def _strings(x: object, out: set[str]) -> None:
    if isinstance(x, str):
        out.add(x)
    elif isinstance(x, dict):
        for k, v in x.items():
            out.add(k)
            _strings(v, out)
    elif isinstance(x, list):
        for v in x:
            _strings(v, out)


@cache
def schema_patterns() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(pattern, instance strings of the files it occurs in), sorted by pattern."""
    found: dict[str, set[str]] = {}
    files = sorted((DATA / "jsonschemabench-dev" / "schemas").glob("*.json"))
    for f in files:
        doc = json.loads(f.read_text())
        pats: list[str] = []
        _walk(doc["schema"], pats)
        inst: set[str] = set()
        for t in doc.get("tests", []):
            _strings(t.get("data"), inst)
        for p in pats:
            found.setdefault(p, set()).update(s for s in inst if len(s) < 200)
    for f in sorted((DATA / "json-schema-test-suite" / "tests").rglob("*.json")):
        for group in json.loads(f.read_text()):
            pats = []
            _walk(group["schema"], pats)
            inst = set()
            for t in group["tests"]:
                _strings(t["data"], inst)
            for p in pats:
                found.setdefault(p, set()).update(inst)
    return tuple((p, tuple(sorted(s))[:150]) for p, s in sorted(found.items()))


def _compile_re(pattern: str, flags: int = 0) -> re.Pattern[str] | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return re.compile(pattern, flags)
        except re.error:
            return None


def _texts_for(nodes: list[Node], extra: tuple[str, ...], seed: str) -> list[str]:
    rng = random.Random(seed)
    out = set(FIXED_TEXTS) | set(extra)
    for node in nodes:
        for _ in range(12):
            m = random_member(node, rng, max_len=30)
            if m is None:
                break
            t = m.decode("utf-8")
            out.add(t)
            if t:
                i = rng.randrange(len(t))
                out.add(t[:i] + t[i + 1 :])
                out.add(t[:i] + rng.choice("a0 \n-é😀_.") + t[i:])
                out.add(t + "\n")
    return sorted(out)


def check_against_re(pattern: str, flavor: str, oracle: re.Pattern[str], extra: tuple[str, ...]) -> None:
    """Assert full and search semantics agree with ``oracle`` (raises RegexError if we
    reject the pattern)."""
    full = parse(pattern, flavor=flavor)  # type: ignore[arg-type]
    found = search(pattern, flavor=flavor)  # type: ignore[arg-type]
    for text in _texts_for([full, found], extra, pattern):
        assert matches(full, text) == (oracle.fullmatch(text) is not None), (pattern, flavor, text, "fullmatch")
        assert matches(found, text) == (oracle.search(text) is not None), (pattern, flavor, text, "search")
    for bad in INVALID_UTF8:
        assert not matches(full, bad) and not matches(found, bad), (pattern, bad)


# --- ECMA-262 → Python translation (for the oracle) -------------------------------------

_ECMA_WORD = "A-Za-z0-9_"
_ECMA_BOUNDARY = f"(?:(?<=[{_ECMA_WORD}])(?![{_ECMA_WORD}])|(?<![{_ECMA_WORD}])(?=[{_ECMA_WORD}]))"
_ECMA_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"


def ecma_to_python(p: str) -> str | None:
    """A Python pattern with the ECMA-262 meaning of ``p``, or None when a construct has
    no simple spelling (then the pattern is checked in Python flavor only)."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\":
            if i + 1 >= len(p):
                return None
            e = p[i + 1]
            i += 2
            if e in "dDwWsS":
                if in_class:
                    if e.isupper():
                        return None
                    out.append({"d": "0-9", "w": "A-Za-z0-9_", "s": _ECMA_SPACE}[e])
                else:
                    body = {"d": "0-9", "w": "A-Za-z0-9_", "s": _ECMA_SPACE}[e.lower()]
                    out.append(f"[{'^' if e.isupper() else ''}{body}]")
            elif e == "u" and p[i : i + 1] == "{":
                return None
            elif e == "u":
                h = p[i : i + 4]
                if len(h) < 4 or 0xD800 <= int(h, 16) <= 0xDFFF:
                    return None
                out.append("\\u" + h)
                i += 4
            elif e in "pPckAZzaeEgGhHiIjJlLmMoOqQUNyY" or e.isdigit() and e != "0":
                return None
            elif e == "0":
                out.append("\\x00")
            elif e in "bB" and not in_class:  # ASCII word boundary; \B also on ""
                out.append(_ECMA_BOUNDARY if e == "b" else f"(?!{_ECMA_BOUNDARY})")
            else:
                out.append("\\" + e)
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[":
                return None
            out.append(c)
        elif c == "[":
            if p[i + 1 : i + 2] == "]" or p[i + 1 : i + 3] == "^]":
                return None
            in_class = True
            out.append(c)
            if p[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
        elif c == ".":
            out.append("[^\\n\\r\\u2028\\u2029]")
        elif c == "$":
            out.append("\\Z")
        elif c == "{" and p[i + 1 : i + 2] == ",":
            return None
        elif p.startswith("(?<", i) and p[i + 3 : i + 4] not in "=!":
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


# --- JSON Schema patterns ------------------------------------------------------------------


@cache
def pattern_outcomes() -> dict[str, str]:
    """Per pattern: 'agree', 'rejected: <reason>' (clear RegexError), or 're rejects'."""
    out = {}
    for pattern, extra in schema_patterns():
        oracle = _compile_re(pattern)
        if oracle is None:
            out[pattern] = "re rejects"
            continue
        try:
            check_against_re(pattern, "python", oracle, extra)
            out[pattern] = "agree"
        except RegexError as e:
            out[pattern] = f"rejected: {e.reason}"
    return out


@needs_data
def test_json_schema_patterns_agree_with_re_or_are_rejected_clearly() -> None:
    outcomes = pattern_outcomes()
    counts: dict[str, int] = {}
    for v in outcomes.values():
        key = v.split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    print(f"\nJSON Schema patterns (python flavor vs re): {len(outcomes)} distinct, {counts}")
    assert len(outcomes) >= 150, "expected the shared data's ~190 distinct patterns"
    assert counts.get("agree", 0) >= 0.95 * (len(outcomes) - counts.get("re rejects", 0))


@needs_data
def test_json_schema_patterns_in_ecma_flavor_agree_with_translated_re() -> None:
    checked = skipped = 0
    for pattern, extra in schema_patterns():
        translated = ecma_to_python(pattern)
        oracle = None if translated is None else _compile_re(translated)
        if oracle is None:
            skipped += 1
            continue
        check_against_re(pattern, "ecma", oracle, extra)
        checked += 1
    print(f"\nJSON Schema patterns (ecma flavor vs translated re): {checked} checked, {skipped} not translatable")
    assert checked >= 150


@needs_data
@pytest.mark.parametrize("draft", ["draft2020-12", "draft7"])
def test_json_schema_test_suite_pattern_cases(draft: str) -> None:
    """Schemas made only of ``pattern`` (ECMA-262 search semantics) on string instances."""
    root = DATA / "json-schema-test-suite" / "tests" / draft
    n = 0
    for f in [root / "pattern.json", root / "optional" / "ecmascript-regex.json"]:
        for group in json.loads(f.read_text()):
            schema = {k: v for k, v in group["schema"].items() if k != "$schema"}
            if schema.pop("type", "string") != "string" or set(schema) != {"pattern"}:
                continue
            node = search(schema["pattern"], flavor="ecma")
            for t in group["tests"]:
                if isinstance(t["data"], str):
                    assert matches(node, t["data"]) == t["valid"], (schema, t)
                    n += 1
    assert n >= 20


# --- rust-lang/regex vectors -----------------------------------------------------------------


@needs_data
def test_rust_regex_fullmatch_vectors_where_re_agrees() -> None:
    doc = json.loads((DATA / "regex" / "rust-regex-fullmatch-derived.json").read_text())
    used = 0
    for case in doc["cases"]:
        if not case.get("unicode", True) or not case.get("utf8", True) or "haystack" not in case:
            continue
        pattern, text = case["regex"], case["haystack"]
        if not isinstance(pattern, str):
            continue
        flags = re.IGNORECASE if case.get("case_insensitive") else 0
        oracle = _compile_re(pattern, flags)
        if oracle is None:
            continue
        if (oracle.fullmatch(text) is not None) != case["fullmatch"]:
            continue  # Rust and Python semantics differ here; not applicable
        try:
            node = parse(pattern, ignore_case=bool(flags))
        except RegexError:
            continue  # counted by the pattern tests; rejection is allowed, silence is not
        assert matches(node, text) == case["fullmatch"], (case["file"], case["name"], pattern, text)
        used += 1
    print(f"\nrust-lang/regex vectors applicable and checked: {used}")
    assert used >= 200


# --- random patterns ------------------------------------------------------------------------


def _random_pattern_check(p: str, ts: list[str], bad: bytes) -> None:
    oracle = _compile_re(p)
    if oracle is None:
        with pytest.raises(RegexError):
            parse(p)
        return
    try:
        full, found = parse(p), search(p, flavor="python")
    except RegexError as e:
        if "too many distinct lookbehind classes" in str(e):
            return  # a documented limit (11 blocks), reached only by piling up lookbehinds
        raise
    rng = random.Random(p)
    ts = list(ts)
    for node in (full, found):
        for _ in range(4):
            m = random_member(node, rng, max_len=10)
            if m is not None:
                ts.append(m.decode())
    for s in ts:
        assert matches(full, s) == (oracle.fullmatch(s) is not None), (p, s, "fullmatch")
        assert matches(found, s) == (oracle.search(s) is not None), (p, s, "search")
    assert not matches(full, bad) and not matches(found, bad)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(patterns(), st.lists(texts, max_size=6), invalid_utf8)
def test_random_patterns_agree_with_re(p: str, ts: list[str], bad: bytes) -> None:
    _random_pattern_check(p, ts, bad)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(patterns(), st.lists(texts, max_size=8), invalid_utf8)
def test_random_patterns_agree_with_re_long(p: str, ts: list[str], bad: bytes) -> None:
    _random_pattern_check(p, ts, bad)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ecma_patterns(), st.lists(texts, max_size=6))
def test_random_ecma_patterns_agree_with_translated_re(p: str, ts: list[str]) -> None:
    translated = ecma_to_python(p)
    oracle = None if translated is None else _compile_re(translated)
    if oracle is None:
        return  # no simple Python spelling (e.g. \\S inside a class)
    full, found = parse(p, flavor="ecma"), search(p, flavor="ecma")
    rng = random.Random(p)
    ts = list(ts)
    for node in (full, found):
        for _ in range(4):
            m = random_member(node, rng, max_len=10)
            if m is not None:
                ts.append(m.decode())
    for s in ts:
        assert matches(full, s) == (oracle.fullmatch(s) is not None), (p, translated, s, "fullmatch")
        assert matches(found, s) == (oracle.search(s) is not None), (p, translated, s, "search")


# --- assertions inside lookarounds (exact or refused) ------------------------------------------

SMALL_TEXTS = ["".join(p) for n in range(5) for p in itertools.product(SMALL_ALPHABET, repeat=n)]


def _assertion_check(p: str, counts: dict[str, int] | None = None) -> None:
    """Full and search semantics agree with ``re`` on every text of up to 4 characters
    over the small alphabet, or tether refuses the pattern with a RegexError at an offset."""
    oracle = _compile_re(p)
    if oracle is None:
        with pytest.raises(RegexError):
            parse(p)
        return
    try:
        full, found = parse(p), search(p, flavor="python")
    except RegexError as e:
        assert e.offset >= 0 or "lookbehind classes" in str(e), (p, str(e))
        if counts is not None:
            counts["refused"] = counts.get("refused", 0) + 1
        return
    for s in SMALL_TEXTS:
        assert matches(full, s) == (oracle.fullmatch(s) is not None), (p, s, "fullmatch")
        assert matches(found, s) == (oracle.search(s) is not None), (p, s, "search")
    if counts is not None:
        counts["exact"] = counts.get("exact", 0) + 1


@pytest.mark.parametrize(
    "pattern",
    [
        r"(?!a$).*", r"(?=a$).*", r"(?!a\Z).*", r"(?!^)b", r"(?=^)a", r"x(?!$)", r"a(?=$)\n?",
        r"(?!.*$)", r"(?=(?!a$))a", r"(?!\Aa)[ab]", r"(?=.\Z)..?", r"$^", r"^$", r"a$\n?^",
        r"(?m)(?!^b).*", r"(?m)a(?=$)\nb", r"(?s)(?!.*a$).*", r"(?i)(?!A$).", r"(?=\b)a\b",
        r"(?!\B).*", r"(?=(?<=a)b)?.*", r"(?<!a)(?!b$).+", r"(?:(?!a$).){2}", r"(?=a|b$).",
    ],
)
def test_anchors_and_boundaries_inside_lookarounds_agree_with_re(pattern: str) -> None:
    _assertion_check(pattern)


def test_negative_lookahead_with_dollar_refuses_a_text_ending_there() -> None:
    node = parse(r"(?!a$).*")
    assert not matches(node, "a") and matches(node, "ab") and matches(node, "b")
    dotall = parse(r"(?s)(?!a$).*")
    assert matches(dotall, "a\nb") and not matches(dotall, "a")
    assert not matches(dotall, "a\n")  # Python's "$" also holds before a final newline
    assert re.fullmatch(r"(?s)(?!a$).*", "a\n") is None


def test_search_of_dollar_then_caret_matches_before_a_final_newline() -> None:
    assert re.search("$^", "\n") and matches(search("$^", flavor="python"), "\n")


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(assertion_patterns())
def test_random_assertion_patterns_agree_with_re(p: str) -> None:
    _assertion_check(p)


@pytest.mark.slow
def test_random_assertion_patterns_agree_with_re_long() -> None:
    counts: dict[str, int] = {}

    @settings(max_examples=4000, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(assertion_patterns())
    def run(p: str) -> None:
        _assertion_check(p, counts)

    run()
    print(f"\nassertion patterns: {counts}")
