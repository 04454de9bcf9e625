"""Differential: tether's regex masks against llguidance's on the Rust regex test corpus.

Cases of ``shared/data/regex/rust-regex-fullmatch-derived.json`` whose haystack the
regex matches whole (Unicode, UTF-8, case-sensitive), that both engines compile, are
forced along the haystack's longest-match tokenization on a small random vocabulary (all
~380 cases in a few seconds); at
every step the masks are compared as sets of token bytes, EOS apart. Classes:

``forced_bytes``
    tether alone allows a proper prefix of llguidance's forced bytes (llguidance allows
    forced text only as its tokenizer splits it; see test_manifest_vs_llguidance).
``dialect``
    tether reads patterns in Python's ``re`` dialect, llguidance in Rust's: where
    Python's ``re.fullmatch`` disagrees with the corpus (Rust) on the haystack (POSIX
    classes such as ``[[:upper:]]`` are plain sets in Python), the languages differ and
    the differences on that case are counted here.

Anything else fails. Cases tether cannot compile (Rust-only syntax) are skipped.
"""

from __future__ import annotations

import json
import random
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

llg = pytest.importorskip("llguidance", reason="llguidance (the 'dev' extra) is not installed")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "engine"))
from engine_reference import greedy_tokenize, random_vocab, regex_grammar  # noqa: E402
from llg_compare import DATA, make_side, walk  # noqa: E402

from tether.engine import compile  # noqa: E402
from tether.errors import GrammarError, RegexError  # noqa: E402

CORPUS = DATA / "regex" / "rust-regex-fullmatch-derived.json"


def cases() -> list[dict]:
    if not CORPUS.exists():
        return []
    return [c for c in json.loads(CORPUS.read_text())["cases"]
            if c.get("fullmatch") and c.get("unicode", True) and c.get("utf8", True)
            and not c.get("case_insensitive") and isinstance(c["regex"], str)]


def python_agrees(rx: str, haystack: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # "possible nested set"
            return re.fullmatch(rx, haystack) is not None
    except re.error:
        return False


def compare_case(c: dict) -> Counter:
    out: Counter = Counter()
    rx, hay = c["regex"], c["haystack"]
    try:
        data = hay.encode("utf-8")
    except UnicodeEncodeError:
        return out
    try:
        tg = regex_grammar(rx)
        lg = llg.LLMatcher.grammar_from_regex(rx)
        if llg.LLMatcher.validate_grammar(lg):
            out["skipped: llguidance cannot compile"] += 1
            return out
        vocab = random_vocab(data + b"ab", random.Random(rx), n=50)
        cc = compile(tg, vocab)
        cc.matcher()
    except (GrammarError, RegexError, ValueError):
        out["skipped: tether cannot compile"] += 1
        return out
    side = make_side(vocab, lambda b: greedy_tokenize(vocab, b))
    dialect = not python_agrees(rx, hay)
    bad = []
    for step, _ours, _theirs in walk(side, cc, lg, greedy_tokenize(vocab, data)):
        out["steps"] += 1
        if step.same and not step.refused:
            continue
        if dialect:
            out["dialect"] += len(step.tether_only) + len(step.llg_only) + 1
            continue
        for t in step.tether_only:
            tb = vocab.tokens[t]
            if step.ff.startswith(tb) and len(tb) < len(step.ff):
                out["forced_bytes"] += 1
            else:
                bad.append(f"tether only {tb!r}")
        bad += [f"llguidance only {vocab.tokens[t]!r}" for t in step.llg_only]
        if step.eos_tether != step.eos_llg:
            bad.append(f"EOS tether {step.eos_tether}, llguidance {step.eos_llg}")
        if step.refused:
            bad.append(step.refused)
        if bad:
            raise AssertionError(f"{rx!r} on {data!r}, step {step.step} after {step.prefix!r}: {bad}")
    out["cases"] += 1
    return out


ALL = cases()


def test_regex_corpus() -> None:
    if not ALL:
        pytest.skip(f"{CORPUS} is missing")
    total: Counter = Counter()
    for c in ALL:
        total += compare_case(c)
    assert total["cases"] >= 200, dict(total)


if __name__ == "__main__":
    total: Counter = Counter()
    for c in ALL:
        try:
            total += compare_case(c)
        except AssertionError as exc:
            total["FAILED"] += 1
            print(str(exc)[:300])
    print(dict(total))
