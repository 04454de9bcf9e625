"""Plain-Python meaning of the engine's masks, and the grammars the engine tests share.

``reference_mask(bp, vocab)``: token ``t`` is allowed iff a copy of the reference
recognizer (``tether.parser.ByteParser``) accepts ``t``'s bytes; EOS iff it is
accepting. This is what ``tether.engine.walk`` computes with the numba kernel.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tether.grammar.ir import NT, Grammar, T, Terminal
from tether.grammar.rfc8259 import json_text
from tether.parser import ByteParser
from tether.tokens.vocabulary import Vocabulary


def json_grammar() -> Grammar:
    return json_text(members="left", elements="left")


def list_grammar() -> Grammar:
    """Comma-separated numbers and words: lexemes end inside tokens all the time."""
    g = Grammar(start="start")
    g.add_terminal(Terminal("NUM", regex=r"[0-9]+"))
    g.add_terminal(Terminal("WORD", regex=r"[a-z]+"))
    g.add_terminal(Terminal("COMMA", literal=","))
    g.add_rule("start", NT("item"))
    g.add_rule("start", NT("start"), T("COMMA"), NT("item"))
    g.add_rule("item", T("NUM"))
    g.add_rule("item", T("WORD"))
    return g


def bounded_strings_grammar() -> Grammar:
    """A JSON array of strings of at most 4 characters (``maxLength``): slices may only
    cover tokens as long as the characters left, multi-byte ones cut off included."""
    return Grammar.from_json_schema({"type": "array", "items": {"type": "string", "maxLength": 4}},
                                    whitespace="compact")


def counted_words_grammar() -> Grammar:
    """A JSON array of strings of at most 40 characters and 21 words: long counts whose
    far positions share mask states (``CompiledConstraint.mask_state``)."""
    return Grammar.from_json_schema(
        {"type": "array", "items": {"type": "string", "maxLength": 40,
                                    "pattern": r"^(?:\S+\s+){0,20}\S+$"}},
        whitespace="compact")


def regex_grammar(pattern: str) -> Grammar:
    g = Grammar(start="start")
    g.add_terminal(Terminal("RX", regex=pattern))
    g.add_rule("start", T("RX"))
    return g


def greedy_grammar() -> Grammar:
    """``A B`` with ``A = a+``, ``B = b | ab``: greedy lexing cuts some parses short."""
    g = Grammar(start="start")
    g.add_terminal(Terminal("A", regex=r"a+"))
    g.add_terminal(Terminal("B", regex=r"b|ab"))
    g.add_terminal(Terminal("SP", literal=" "))
    g.add_rule("start", T("A"), T("B"))
    g.add_rule("start", T("A"), T("SP"), NT("start"))
    return g


def stop_grammar() -> Grammar:
    """Lines of free text ended by a stop text (lazy terminal), then ``end``."""
    g = Grammar(start="start")
    g.add_terminal(Terminal("LINE", regex=r"[a-z ]*", stop=";"))
    g.add_terminal(Terminal("END", literal="end"))
    g.add_rule("start", T("END"))
    g.add_rule("start", T("LINE"), NT("start"))
    return g


def keyword_grammar() -> Grammar:
    """Keywords that are also identifiers (ambiguous lexemes) with %ignore spaces."""
    g = Grammar(start="start")
    g.add_terminal(Terminal("IF", literal="if"))
    g.add_terminal(Terminal("ID", regex=r"[a-z]+"))
    g.add_terminal(Terminal("EQ", literal="="))
    g.add_terminal(Terminal("SP", regex=r" +"))
    g.ignore.append("SP")
    g.add_rule("start", NT("stmt"))
    g.add_rule("start", NT("stmt"), NT("start"))
    g.add_rule("stmt", T("IF"), T("ID"), T("EQ"), T("ID"))
    g.add_rule("stmt", T("ID"), T("EQ"), T("ID"))
    return g


# name -> (grammar builder, alphabet for random tokens, valid samples)
GRAMMARS: dict[str, tuple[Callable[[], Grammar], bytes, list[bytes]]] = {
    "json": (json_grammar, b'{}[],:" \n\\atrue0159.e-nulfs\xc3\xa9',
             [b'{"a": [1, 2.5e-3, true, null], "b\\n": {"c": "\xc3\xa9"}}', b"[]", b' "x" ',
              b"-0.5", b'{"":{}}']),
    "list": (list_grammar, b"abz019,", [b"1,ab,22", b"z", b"0,0,0,a"]),
    "regex_int": (lambda: regex_grammar(r"-?(0|[1-9][0-9]*)"), b"-0129a",
                  [b"0", b"-12", b"190"]),
    "regex_alt": (lambda: regex_grammar(r"(ab|a)*c"), b"abc", [b"c", b"abac", b"aaabc"]),
    "regex_bounded": (lambda: regex_grammar(r"[a-c]{2,4}x?"), b"abcx", [b"ab", b"abcx", b"cccc"]),
    "bounded_strings": (bounded_strings_grammar, b'[],"ab \\n\xc3\xa9\xe2\x82\xac',
                        [b'["ab",""]', b'["\xc3\xa9\xc3\xa9ab","\xe2\x82\xac"]', b'["a\\nb "]']),
    "counted_words": (counted_words_grammar, b'[],"ab \n\xc3\xa9',
                      [b'["ab a\\nb","\xc3\xa9"]', b'["' + b"a " * 19 + b'a"]', b"[]"]),
    "regex_counted": (lambda: regex_grammar(r"[a-c]{0,45}(x[a-c ]{0,35})?y"), b"abcxy ",
                      [b"y", b"ab" * 20 + b"xa b y", b"x" + b"a" * 35 + b"y"]),
    "greedy": (greedy_grammar, b"ab ", [b"ab", b"aab", b"a ab", b"aa a aab"]),
    "stop": (stop_grammar, b"ab ;end", [b"end", b"ab;end", b"a b;;end"]),
    "keyword": (keyword_grammar, b"ifxa= ", [b"if a=b", b"x=y  if  q = r", b"ifa=b"]),
}


def reference_mask(bp: ByteParser, vocab: Vocabulary) -> set[int]:
    """Tokens a copy of ``bp`` accepts, plus every EOS id if ``bp`` is accepting."""
    out = set()
    for t, data in enumerate(vocab.tokens):
        if not data or t in vocab.special_ids:
            continue
        c = bp.copy()
        if c.feed(data):
            out.add(t)
    if bp.is_accepting():
        out |= set(vocab.eos_ids)
    return out


def random_vocab(alphabet: bytes, rng: random.Random, n: int = 60, max_len: int = 5) -> Vocabulary:
    """Token 0 is EOS, 1 a special token; every alphabet byte is a token (so any text over
    the alphabet tokenizes); the rest are random strings, duplicates included."""
    toks: list[bytes] = [b"", b""]
    toks += [bytes([b]) for b in sorted(set(alphabet))]
    while len(toks) < n:
        k = rng.randint(1, max_len)
        toks.append(bytes(rng.choice(alphabet) for _ in range(k)))
    if rng.random() < 0.5:
        toks.append(toks[rng.randrange(2, len(toks))])  # a duplicate
    return Vocabulary.from_bytes(toks, eos_ids=[0], special_ids=[1])


def greedy_tokenize(vocab: Vocabulary, data: bytes) -> list[int]:
    """Longest-match tokenization (a canonical tokenization for byte vocabularies)."""
    best: dict[bytes, int] = {}
    for i, t in enumerate(vocab.tokens):
        if t and i not in vocab.special_ids and t not in best:
            best[t] = i
    longest = max(map(len, best))
    out, i = [], 0
    while i < len(data):
        for k in range(min(longest, len(data) - i), 0, -1):
            t = best.get(data[i : i + k])
            if t is not None:
                out.append(t)
                i += k
                break
        else:
            raise ValueError(f"cannot tokenize {data[i:i + 10]!r}")
    return out
