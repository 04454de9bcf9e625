"""Differential: tether's masks against llguidance's, step by step.

Same vocabulary, same language (grammars written once in tether's IR and once in
llguidance's Lark dialect), forced decoding of valid samples plus random walks: the
masks must be bit-identical (EOS included), except where a difference is explained:

* tokens with identical bytes: llguidance's trie keeps one id per byte string, so it
  allows only one of the duplicates; masks are compared as sets of token *bytes*;
* ``%ignore`` text before the first lexeme or after the last one: tether (like Lark
  and the reference ``ByteParser``) allows it, llguidance does not; so tokens that
  start with whitespace at the first step, or end a complete sentence with whitespace,
  may be allowed by tether only (each such token is checked against that explanation).

JSON Schema is compared on the dev schemas in ``test_json_schema_vs_llguidance``: there
the grammars differ by design (tether bounds whitespace runs, writes numbers and string
escapes canonically), so the test counts steps whose masks differ and checks that every
token tether allows and llguidance forbids is explained by those policies.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

llg = pytest.importorskip("llguidance", reason="llguidance (the 'peers' extra) is not installed")

sys.path.insert(0, str(Path(__file__).parents[1] / "unit" / "engine"))
from engine_reference import (  # noqa: E402
    GRAMMARS,
    greedy_tokenize,
    json_grammar,
    list_grammar,
    random_vocab,
    regex_grammar,
)

from tether.engine import compile  # noqa: E402
from tether.parser import ByteParser  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_ids  # noqa: E402
from tether.tokens.vocabulary import Vocabulary  # noqa: E402

LARK_JSON = r"""
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" [member ("," member)*] "}"
member: STRING ":" value
array: "[" [value ("," value)*] "]"
STRING: /"([^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
%ignore /[ \t\n\r]+/
"""
LARK_LIST = 'start: item ("," item)*\nitem: NUM | WORD\nNUM: /[0-9]+/\nWORD: /[a-z]+/\n'

# name -> (tether grammar, llguidance grammar, alphabet, samples)
CASES = {
    "json": (json_grammar, lambda: llg.LLMatcher.grammar_from_lark(LARK_JSON),
             GRAMMARS["json"][1], GRAMMARS["json"][2]),
    "list": (list_grammar, lambda: llg.LLMatcher.grammar_from_lark(LARK_LIST),
             GRAMMARS["list"][1], GRAMMARS["list"][2]),
}
for _name, _rx, _alpha, _samples in [
    ("int", r"-?(0|[1-9][0-9]*)", b"-0129a", [b"-12", b"0", b"190"]),
    ("alt", r"(ab|a)*c", b"abc", [b"abac", b"c"]),
    ("bounded", r"[a-c]{2,4}x?", b"abcx", [b"abcx", b"ab"]),
    ("line", r"[^\n]*\n", b"ab \n\"\xc3\xa9", [b"ab \"\xc3\xa9 a\n", b"\n"]),
]:
    CASES[_name] = (
        (lambda rx=_rx: regex_grammar(rx)),
        (lambda rx=_rx: llg.LLMatcher.grammar_from_regex(rx)),
        _alpha,
        _samples,
    )


def llg_tokenizer(vocab: Vocabulary, names: dict[int, bytes]):
    class Src:
        eos_token_id = vocab.eos_ids[0]
        bos_token_id = None
        special_token_ids = sorted(vocab.special_ids)
        tokens = [names.get(i, t) for i, t in enumerate(vocab.tokens)]

        def __call__(self, s):  # tokenization is never needed: tokens are given
            return greedy_tokenize(vocab, s.encode() if isinstance(s, str) else s)

    return llg.LLTokenizer(llg.TokenizerWrapper(Src()))


def ignore_explained(g, prefix: bytes, token: bytes, step: int) -> bool:
    if step == 0 and token[:1] in (b" ", b"\n"):
        return True
    core = token.rstrip(b" \n")
    if core == token:
        return False
    p = ByteParser(g)
    return p.feed(prefix + core) and p.is_accepting()


def llg_mask(m, n: int) -> set[int]:
    bm = np.zeros((n + 31) // 32, np.int32)
    m.unsafe_compute_mask_ptr(bm.ctypes.data, bm.nbytes)
    return set(mask_to_ids(bm.view(np.uint32)).tolist())


def compare(name: str, seed: int) -> None:
    tg, lg, alphabet, samples = CASES[name]
    rng = random.Random(f"{name}:{seed}")
    vocab = random_vocab(alphabet + b"".join(samples), rng, n=70)
    names = {0: b"<eos>", 1: b"<special>"}
    tok = llg_tokenizer(vocab, names)
    cc = compile(tg(), vocab)
    out = allocate_mask(vocab.size)
    texts = [("sample", s) for s in samples if s[:1] != b" "] + [("walk", None)] * 3
    for kind, text in texts:
        ours = cc.matcher()
        theirs = llg.LLMatcher(tok, lg(), log_level=0)
        assert not theirs.is_error(), theirs.get_error()
        toks = greedy_tokenize(vocab, text) if text is not None else None
        done: list[int] = []
        for step in range(len(toks) if toks is not None else 20):
            ours.compute_mask(out)
            a = set(mask_to_ids(out).tolist())
            b = llg_mask(theirs, vocab.size)
            if name == "json":  # leading / trailing %ignore text (see module docstring)
                a = {t for t in a if t in b or not ignore_explained(
                    tg(), b"".join(vocab.tokens[x] for x in done), vocab.tokens[t], step)}
            ka = {vocab.tokens[t] if t not in vocab.eos_ids else b"<eos>" for t in a}
            kb = {vocab.tokens[t] if t not in vocab.eos_ids else b"<eos>" for t in b}
            if ka != kb:
                prefix = b"".join(vocab.tokens[t] for t in done)
                oracle = {vocab.tokens[t]: ByteParser(tg()).feed(prefix + vocab.tokens[t])
                          for t in a ^ b if t not in vocab.eos_ids}
                raise AssertionError(
                    f"{name} {kind} step {step} after {prefix!r}: tether only "
                    f"{sorted(vocab.tokens[t] for t in a - b)}, llguidance only "
                    f"{sorted(vocab.tokens[t] for t in b - a)}; reference parser: {oracle}")
            if toks is not None:
                t = toks[step]
            else:
                choices = sorted(a - set(vocab.eos_ids))
                if not choices:
                    break
                t = rng.choice(choices)
            assert ours.consume(t), ours.error
            assert theirs.consume_token(t), theirs.get_error()
            done.append(t)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", range(3))
def test_masks_equal_llguidance(name: str, seed: int) -> None:
    compare(name, seed)
