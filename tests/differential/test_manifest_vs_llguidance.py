"""Differential: tether's masks against llguidance's on the grammar manifest.

Every grammar of ``shared/data/grammars/manifest.json`` that both load (Lark grammars as
they are; GBNF through tether's GBNF front end and llguidance's ``gbnf_to_lark``) is
forced along the canonical tokenization of each valid sample (llama.cpp's for the Gemma 3
vocabulary, longest match for the small random vocabularies). At every step the masks
are compared as sets of token *bytes* (llguidance keeps one id per byte string), EOS
apart. Every token allowed by one engine only must belong to one of these classes, each
checked on the token (not just counted):

``ignore_edges``
    ``%ignore`` text before the first lexeme or after the last: tether (like Lark and its
    reference ``ByteParser``) allows it, llguidance does not. Check: the token starts with
    ignored text and only ignored text precedes it, or it ends with ignored text and what
    precedes that text completes the sentence.
``forced_bytes``
    where the grammar forces a byte string, llguidance (``compute_ff_bytes``) allows only
    the tokens its tokenizer would use for it; tether allows every token with a valid
    completion, so also the shorter prefixes (``r``, ``rf`` when ``rfc>`` is forced).
    Check: the token is a proper prefix of llguidance's forced bytes at that step.
``gbnf_greedy_lexing``
    GBNF: tether reads GBNF at the character level, as llama.cpp (the manifest's
    reference for GBNF) does; ``gbnf_to_lark`` makes rules that derive only characters
    into lexemes, which llguidance's lexer extends greedily, so a text where such a rule
    ends before its longest match (``int (`` with ``int`` an identifier in c.gbnf) is not
    in llguidance's language. Check (on up to ``CHECKED`` tokens per step): tether's
    ``ByteParser`` keeps prefix + token viable while llguidance, fed byte by byte, refuses
    it, or refuses the sentence tether's shortest completion makes of it.
``dot_newline``
    common.lark's ``ESCAPED_STRING`` (``_STRING_INNER: /.*?/``): llguidance lets ``.``
    match a newline, Lark (Python ``re`` without DOTALL) and tether do not. Check: a
    llguidance-only token holding a newline, inside a string (odd number of unescaped
    quotes before it), that tether's ``ByteParser`` rejects.
``recorded_divergence``
    samples the manifest records llguidance rejecting (``engine_results``; e.g.
    arithmetic.gbnf, where ``ws ::= [ \\t\\n]*`` swallows the final newline in
    llguidance's greedy lexer): differences not in the classes above are counted there.

Anything else fails the test, with the step, the prefix and the tokens.
"""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

llg = pytest.importorskip("llguidance", reason="llguidance (the 'dev' extra) is not installed")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "engine"))
from engine_reference import greedy_tokenize, random_vocab  # noqa: E402
from llg_compare import DATA, Side, gemma_side, llg_accepts, make_side, walk  # noqa: E402

from tether.engine import compile  # noqa: E402
from tether.errors import ConstraintError, GrammarError, RegexError  # noqa: E402
from tether.grammar.ir import Grammar  # noqa: E402
from tether.parser import ByteParser  # noqa: E402

MANIFEST = DATA / "grammars" / "manifest.json"
if not MANIFEST.exists():
    pytest.skip(f"{MANIFEST} is absent (shared test data)", allow_module_level=True)

CHECKED = 12  # tokens per step given the (costly) completion check
ENTRIES = {e["file"]: e for e in json.loads(MANIFEST.read_text())["grammars"]}


def samples(entry: dict) -> list[str]:
    return list(entry["valid"]) + [(DATA / "grammars" / f).read_text(encoding="utf-8")
                                   for f in entry.get("valid_files", [])]


@cache
def load(file: str) -> tuple[Grammar, object] | str:
    """(tether grammar, llguidance grammar), or why the pair cannot be built."""
    e = ENTRIES[file]
    text = (DATA / "grammars" / file).read_text(encoding="utf-8")
    if e.get("requires_postlex"):
        return "needs a post-lexer"
    try:
        if e["format"] == "gbnf":
            tg = Grammar.from_gbnf(text, start=e["start"])
            lark = llg.gbnf_to_lark.gbnf_to_lark(text)
        else:
            tg = Grammar.from_lark(text, start=e["start"])
            lark = text
    except (GrammarError, RegexError, NotImplementedError) as exc:
        return f"tether cannot load it: {str(exc).splitlines()[0]}"
    try:
        lg = llg.LLMatcher.grammar_from_lark(lark)
        msg = llg.LLMatcher.validate_grammar(lg)
        if msg:
            return f"llguidance cannot load it: {msg.splitlines()[0]}"
    except Exception as exc:  # noqa: BLE001 - any build failure of the peer is a skip
        return f"llguidance cannot load it: {str(exc).splitlines()[0]}"
    return tg, lg


def _ignored(g: Grammar) -> bytes:
    """Bytes the grammar's ``%ignore`` terminals consist of (whitespace only here)."""
    out = b""
    for name in g.ignore:
        t = g.terminals[name]
        for ch in b" \t\r\n\x0b\x0c":
            node = t.to_node()
            from tether import regex as rx

            if rx.matches(node, bytes([ch])):
                out += bytes([ch])
    return out


def _in_string(prefix: bytes) -> bool:
    n, esc = 0, False
    for b in prefix:
        if esc:
            esc = False
        elif b == 0x5C:
            esc = True
        elif b == 0x22:
            n += 1
    return n % 2 == 1


class Classifier:
    def __init__(self, file: str, tg: Grammar, lg: object, side: Side, recorded: bool) -> None:
        self.file, self.tg, self.lg, self.side = file, tg, lg, side
        self.gbnf = ENTRIES[file]["format"] == "gbnf"
        self.recorded = recorded
        self.ws = _ignored(tg)
        self.bp = ByteParser(tg)

    def viable(self, data: bytes) -> bool:
        p = ByteParser(self.bp.tables, lexer=self.bp.lexer)
        return p.feed(data)

    def accepts(self, data: bytes) -> bool:
        p = ByteParser(self.bp.tables, lexer=self.bp.lexer)
        return p.feed(data) and p.is_accepting()

    def tether_only(self, step, ours, tokens: list[int]) -> tuple[Counter, list[str]]:  # type: ignore[no-untyped-def]
        v = self.side.vocab
        found: Counter = Counter()
        bad: list[str] = []
        rest = []
        for t in tokens:
            tb = v.tokens[t]
            if self.ws and (
                (tb[:1] and tb[:1] in self.ws and not step.prefix.strip(self.ws))
                or (tb.rstrip(self.ws) != tb and self.accepts(step.prefix + tb.rstrip(self.ws)))
            ):
                found["ignore_edges"] += 1
            elif step.ff and step.ff.startswith(tb) and len(tb) < len(step.ff):
                found["forced_bytes"] += 1
            else:
                rest.append(t)
        if not rest:
            return found, bad
        rng = random.Random(f"{self.file}:{step.step}")
        sample = rest if len(rest) <= CHECKED else rng.sample(rest, CHECKED)
        verdicts = set()
        for t in sample:
            text = step.prefix + v.tokens[t]
            if not self.viable(text):
                bad.append(f"tether allows {v.tokens[t]!r}, which its reference parser rejects")
                continue
            if llg_accepts(self.lg, text, prefix=True):
                # llguidance keeps the text viable: complete it (tether's shortest completion)
                w = ours.copy()
                assert w.consume(t), w.error
                try:
                    text += w.shortest_completion()
                except ConstraintError as exc:
                    bad.append(f"tether only: {v.tokens[t]!r}, no completion found: {exc}")
                    continue
                if not self.accepts(text):
                    bad.append(f"tether allows {v.tokens[t]!r}, whose completion "
                               f"{text[-60:]!r} its reference parser rejects")
                    continue
                if llg_accepts(self.lg, text):
                    if not self.recorded:
                        bad.append(f"tether only: {v.tokens[t]!r} (llguidance accepts the text "
                                   f"{text[-60:]!r}: a mask difference, not a language one)")
                    verdicts.add("recorded_divergence")
                    continue
            # the languages differ: tether's reference keeps the text, llguidance does not
            if self.gbnf or self.recorded:
                verdicts.add("gbnf_greedy_lexing" if self.gbnf else "recorded_divergence")
            else:
                bad.append(f"tether only: {v.tokens[t]!r}: the languages differ at "
                           f"{text[-60:]!r} (llguidance rejects it, tether's reference does not)")
        if not bad:
            cls = sorted(verdicts)[0] if len(verdicts) == 1 else "recorded_divergence"
            found[cls] += len(rest)
        return found, bad

    def llg_only(self, step, tokens: list[int]) -> tuple[Counter, list[str]]:  # type: ignore[no-untyped-def]
        v = self.side.vocab
        found: Counter = Counter()
        bad: list[str] = []
        for t in tokens:
            tb = v.tokens[t]
            if self.viable(step.prefix + tb):
                bad.append(f"llguidance only: {tb!r}, which tether's reference parser keeps "
                           "viable (a token tether's mask misses)")
            elif b"\n" in tb and _in_string(step.prefix + tb[: tb.index(b"\n")]) \
                    and "ESCAPED_STRING" in (DATA / "grammars" / self.file).read_text():
                found["dot_newline"] += 1
            elif self.recorded:
                found["recorded_divergence"] += 1
            else:
                bad.append(f"llguidance only: {tb!r} (tether's reference parser rejects it)")
        return found, bad


def compare(file: str, side: Side, tokenize) -> Counter:  # type: ignore[no-untyped-def]
    pair = load(file)
    if isinstance(pair, str):
        pytest.skip(f"{file}: {pair}")
    tg, lg = pair
    cc = compile(tg, side.vocab)
    entry = ENTRIES[file]
    results = entry["engine_results"].get("llguidance", {}).get("valid") or []
    total: Counter = Counter()
    problems: list[str] = []
    for i, text in enumerate(samples(entry)):
        recorded = i < len(results) and results[i] != "VALID"
        c = Classifier(file, tg, lg, side, recorded)
        ids = tokenize(text.encode("utf-8"))
        for step, ours, _theirs in walk(side, cc, lg, ids):
            total["steps"] += 1
            if step.same and not step.refused:
                continue
            total["steps_differing"] += 1
            f1, b1 = c.tether_only(step, ours, step.tether_only)
            f2, b2 = c.llg_only(step, step.llg_only)
            total += f1 + f2
            if step.eos_tether != step.eos_llg:
                if recorded:
                    total["recorded_divergence"] += 1
                else:
                    b1.append(f"EOS: tether {step.eos_tether}, llguidance {step.eos_llg}")
            if step.refused and not recorded and not step.refused.startswith("llguidance"):
                b1.append(step.refused)
            elif step.refused and not recorded:
                # a valid sample llguidance refuses must be a language difference we know
                if not (c.ws and step.step == 0 and text[:1].encode() in c.ws):
                    b1.append(step.refused)
            problems += [f"{file} sample {i} step {step.step} after {step.prefix[-50:]!r}: {p}"
                         for p in b1 + b2]
    assert not problems, "\n".join(problems[:20])
    return total


FILES = [f for f in ENTRIES if not ENTRIES[f].get("requires_postlex")]


def _random_side(file: str) -> tuple[Side, object]:
    alphabet = b"".join(s.encode() for s in samples(ENTRIES[file]))[:4000]
    vocab = random_vocab(alphabet, random.Random(file), n=120, max_len=4)
    return make_side(vocab, lambda b: greedy_tokenize(vocab, b)), vocab


@pytest.mark.parametrize("file", FILES, ids=[Path(f).stem for f in FILES])
def test_manifest_random_vocab(file: str) -> None:
    side, vocab = _random_side(file)
    compare(file, side, lambda data: greedy_tokenize(vocab, data))


@pytest.mark.model
@pytest.mark.parametrize("file", FILES, ids=[Path(f).stem for f in FILES])
def test_manifest_gemma(file: str) -> None:
    side = gemma_side()
    if isinstance(side, str):
        pytest.skip(side)
    counts = compare(file, side, side.tokenize)
    print(f"{file}: {dict(counts)}")


if __name__ == "__main__":  # per-grammar difference counts on Gemma
    side = gemma_side()
    assert not isinstance(side, str), side
    for f in FILES:
        try:
            print(f, dict(compare(f, side, side.tokenize)))
        except BaseException as exc:  # noqa: BLE001 - skips and failures are reported alike
            print(f, type(exc).__name__, str(exc)[:300])
