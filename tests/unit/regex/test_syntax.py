"""Regex syntax: each dialect feature on named cases, and every rejection's message."""

from __future__ import annotations

import pytest

from tether.errors import RegexError
from tether.regex import matches, parse, search

# (id, pattern, flavor, accepted texts, rejected texts)
CASES = [
    ("literal", "abc", "python", ["abc"], ["ab", "abcd", ""]),
    ("escape-newline-tab", r"a\n\tb", "python", ["a\n\tb"], ["a\\n\\tb"]),
    ("hex-escape", r"\x41\x7e", "python", ["A~"], ["x41"]),
    ("hex-escape-latin1", r"\xe9", "python", ["é"], ["\xc3"]),
    ("u-escape", r"\u00e9\u4e2d", "python", ["é中"], ["e"]),
    ("U-escape", r"\U0001F600", "python", ["😀"], [""]),
    ("u-brace-ecma", r"\u{1F600}", "ecma", ["😀"], ["u"]),
    ("surrogate-pair-ecma", r"\uD83D\uDE00", "ecma", ["😀"], [""]),
    ("named-char", r"\N{GREEK SMALL LETTER ALPHA}", "python", ["α"], ["a"]),
    ("octal", r"\101\0", "python", ["A\0"], ["A"]),
    ("escaped-metachar", r"\.\*\(\)\[\]\{\}\|\?\+\^\$\\", "python", [".*()[]{}|?+^$\\"], [""]),
    ("class-range", "[a-cx]", "python", ["a", "b", "c", "x"], ["d", "", "ab"]),
    ("class-negated", "[^a-c]", "python", ["d", "é", "😀", "\n"], ["a", ""]),
    ("class-bracket-first", "[]a]", "python", ["]", "a"], ["b"]),
    ("class-dash-edges", "[-a-]", "python", ["-", "a"], ["b"]),
    ("class-escapes", r"[\d\s]", "python", ["1", " ", "\t", "٣"], ["a"]),
    ("class-backspace", r"[\b]", "python", ["\b"], ["b"]),
    ("ecma-empty-class", "a[]", "ecma", [], ["a", "a]"]),
    ("ecma-any-class", "[^]", "ecma", ["\n", "a", "😀"], ["", "ab"]),
    ("ecma-class-escape-range-annexb", r"[\w-.]", "ecma", ["a", "-", "."], ["!"]),
    ("digit-python-unicode", r"\d", "python", ["7", "٣", "৪"], ["a", "x"]),
    ("digit-ecma-ascii", r"\d", "ecma", ["7"], ["٣", "৪"]),
    ("word-python-unicode", r"\w+", "python", ["héllo_1", "中文"], ["a b", "-"]),
    ("word-ecma-ascii", r"\w+", "ecma", ["hello_1"], ["héllo"]),
    ("space-ecma", r"\s", "ecma", [" ", "\u00a0", "\ufeff", "\u2029", "\u3000"], ["a", "\u200b"]),
    ("not-digit", r"\D", "python", ["a", "😀"], ["1", "٣"]),
    ("dot-python", ".", "python", ["a", "é", "😀", "\r"], ["\n", ""]),
    ("dot-ecma", ".", "ecma", ["a", "😀"], ["\n", "\r", "\u2028", "\u2029"]),
    ("dot-dotall", "(?s).", "python", ["\n"], [""]),
    ("group-capturing", "(ab)+", "python", ["ab", "abab"], ["", "aba"]),
    ("group-noncapturing", "(?:ab|c)d", "python", ["abd", "cd"], ["d"]),
    ("group-named-python", "(?P<x>a)b", "python", ["ab"], ["a"]),
    ("group-named-ecma", "(?<x>a)b", "ecma", ["ab"], ["a"]),
    ("alternation-empty-branch", "a|", "python", ["a", ""], ["b"]),
    ("star", "a*", "python", ["", "aaa"], ["b"]),
    ("plus", "a+", "python", ["a", "aa"], [""]),
    ("optional", "ab?", "python", ["a", "ab"], ["abb"]),
    ("counted", "a{3}", "python", ["aaa"], ["aa", "aaaa"]),
    ("counted-range", "a{2,3}", "python", ["aa", "aaa"], ["a", "aaaa"]),
    ("counted-open", "a{2,}", "python", ["aa", "aaaaaaaa"], ["a"]),
    ("counted-upto-python", "a{,2}", "python", ["", "aa"], ["aaa"]),
    ("counted-upto-ecma-literal", "a{,2}", "ecma", ["a{,2}"], ["aa"]),
    ("brace-literal", "a{x", "python", ["a{x"], ["a"]),
    ("lazy-quantifiers", "a*?b+?c??d{1,2}?", "python", ["bd", "aabbcdd"], ["a"]),
    ("anchors-both", "^ab$", "python", ["ab"], ["ab\n", "xab"]),
    ("anchors-A-Z", r"\Aab\Z", "python", ["ab"], ["ab\n"]),
    ("anchor-z-ecma-style", r"ab\z", "python", ["ab"], ["abc"]),
    ("anchor-in-middle-never", "a^b", "python", [], ["ab", "a^b"]),
    ("dollar-newline-middle", "a$\n", "python", ["a\n"], ["a"]),
    ("multiline-dollar", "(?m)a$\nb$", "python", ["a\nb"], ["ab", "a\nb\n"]),
    ("multiline-caret", "(?m)a\n^b", "python", ["a\nb"], ["ab"]),
    ("word-boundary", r"\bcat\b.*", "python", ["cat", "cat dog"], ["cats", "cat_"]),
    ("word-boundary-unicode", r"a\b", "python", ["a"], []),
    ("not-word-boundary", r"a\Bb", "python", ["ab"], ["a b"]),
    ("not-word-boundary-empty-python", r"\B", "python", [], [""]),
    ("not-word-boundary-empty-ecma", r"\B", "ecma", [""], []),
    ("lookbehind-class", r"[a-z](?<=[aeiou])x", "python", ["ax", "ex"], ["bx"]),
    ("negative-lookbehind-start", r"(?<!a)b", "python", ["b"], []),
    ("negative-lookbehind", r"[ab](?<!a)c", "python", ["bc"], ["ac"]),
    ("repeated-anchors", "^^a$$", "ecma", ["a"], ["aa"]),
    ("empty-anchors-reversed", "$^", "python", [""], ["a"]),
    ("lookahead-password", r"^(?=.*\d)(?=.*[A-Z]).{4,}$", "ecma", ["abC1", "1AAAA"], ["abcd1", "A1"]),
    ("negative-lookahead", r"^(?!foo).*$", "ecma", ["fo", "bar", ""], ["foo", "foobar"]),
    ("lookahead-unrolled", r"(?:(?=a)[a-z]){2}", "python", ["aa"], ["ab", "ba"]),
    ("ignore-case-inline", "(?i)straße", "python", ["STRASSE"[:0] + "STRAßE", "strasse"[:0] + "Straße"], ["strasse"]),
    ("ignore-case-scoped", "a(?i:b)c", "python", ["aBc", "abc"], ["ABc", "abC"]),
    ("ignore-case-kelvin", "(?i)k", "python", ["k", "K", "\u212a"], ["x"]),
    ("ignore-case-class", "(?i)[a-c]+", "python", ["AbC"], ["d"]),
    ("ignore-case-negated", "(?i)[^a]", "python", ["b"], ["a", "A"]),
    ("ascii-flag", r"(?a)\w", "python", ["a"], ["é"]),
    ("verbose", "(?x) a b  # comment\n c", "python", ["abc"], ["a b c"]),
    ("comment-group", "a(?#note)b", "python", ["ab"], ["a"]),
    ("property-letter", r"\p{L}+", "ecma", ["école", "中"], ["1"]),
    ("property-negated", r"\P{Nd}", "ecma", ["a"], ["৪", "1"]),
    ("property-digit-alias", r"^\p{digit}+$", "ecma", ["42", "৪২"], ["-%#"]),
    ("ecma-control", r"\cC", "ecma", ["\x03"], ["cC"]),
    ("ecma-identity-escape", r"\/\-", "ecma", ["/-"], [""]),
    ("non-bmp-range", "[😀-😂]", "python", ["😀", "😁", "😂"], ["😃", "😿"]),
]


@pytest.mark.parametrize(("pattern", "flavor", "good", "bad"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fullmatch_cases(pattern: str, flavor: str, good: list[str], bad: list[str]) -> None:
    node = parse(pattern, flavor=flavor)  # type: ignore[arg-type]
    for text in good:
        assert matches(node, text), f"{pattern!r} should match {text!r}"
    for text in bad:
        assert not matches(node, text), f"{pattern!r} should not match {text!r}"


def test_keyword_flags() -> None:
    assert matches(parse("ab", ignore_case=True), "AB")
    assert matches(parse(".", dotall=True), "\n")
    assert not matches(parse("."), "\n")


SEARCH_CASES = [
    ("unanchored", "ab", "ecma", ["xxabyy", "ab"], ["a b", ""]),
    ("start-anchored", "^ab", "ecma", ["abyy"], ["xab"]),
    ("end-anchored-ecma", "ab$", "ecma", ["xxab"], ["ab\n", "abx"]),
    ("end-anchored-python-newline", "ab$", "python", ["xxab", "ab\n"], ["ab\n\n", "abx"]),
    ("alternation-anchors", "^a|b$", "ecma", ["ax", "xb"], ["xa", "bx"]),
    ("empty-pattern", "", "ecma", ["", "anything"], []),
]


@pytest.mark.parametrize(("pattern", "flavor", "good", "bad"), [c[1:] for c in SEARCH_CASES], ids=[c[0] for c in SEARCH_CASES])
def test_search_cases(pattern: str, flavor: str, good: list[str], bad: list[str]) -> None:
    node = search(pattern, flavor=flavor)  # type: ignore[arg-type]
    for text in good:
        assert matches(node, text), f"search {pattern!r} should find {text!r}"
    for text in bad:
        assert not matches(node, text), f"search {pattern!r} should not find {text!r}"


# (id, pattern, flavor, message fragment, offset)
ERRORS = [
    ("backref-number", r"(a)\1", "python", "backreferences are not supported", 3),
    ("backref-named", r"(?P<n>a)(?P=n)", "python", "backreferences are not supported", 8),
    ("backref-ecma", r"(a)\1", "ecma", "backreferences are not supported", 3),
    ("backref-k-ecma", r"(?<n>a)\k<n>", "ecma", "backreferences are not supported", 7),
    ("lookbehind-long", r"x(?<=ab)c", "python", "lookbehind is only supported for one character", 1),
    ("assertion-in-star-with-annotation", r"(?:^a)*\b", "python", "inside a group repeated more than", 3),
    ("atomic", r"(?>a)", "python", "atomic groups are not supported", 0),
    ("possessive", r"a*+", "python", "possessive quantifiers are not supported", 2),
    ("conditional", r"(a)?(?(1)b|c)", "python", "conditional groups are not supported", 4),
    ("nothing-to-repeat", r"*a", "python", "nothing to repeat", 0),
    ("multiple-repeat", r"a**", "python", "multiple repeat", 2),
    ("unbalanced-close", r"a)", "python", "unbalanced parenthesis", 1),
    ("unterminated-group", r"(ab", "python", "missing ), unterminated subpattern", 0),
    ("unterminated-class", r"[ab", "python", "unterminated character set", 0),
    ("bad-range", r"[z-a]", "python", "bad character range", 3),
    ("bad-escape", r"\q", "python", "bad escape \\q", 0),
    ("bad-hex", r"\x4", "python", "incomplete escape", 0),
    ("min-greater-than-max", r"a{3,2}", "python", "min repeat greater than max repeat", 1),
    ("multiline-anchor-ecma", r"(?m)^a", "ecma", "multi-line mode is not supported", 4),
    ("global-flags-late", r"a(?i)b", "python", "global flags not at the start", 1),
    ("lookahead-in-star", r"(?:(?=a)a)*", "python", "inside a group repeated more than", 3),
    ("unknown-property", r"\p{Greek}", "ecma", "Unicode property 'Greek' is not supported", 0),
    ("duplicate-group-name", r"(?P<a>x)(?P<a>y)", "python", "redefinition of group name 'a'", 12),
]


@pytest.mark.parametrize(("pattern", "flavor", "fragment", "offset"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_name_offset_with_caret(pattern: str, flavor: str, fragment: str, offset: int) -> None:
    with pytest.raises(RegexError) as info:
        parse(pattern, flavor=flavor)  # type: ignore[arg-type]
    err = info.value
    assert fragment in str(err)
    assert err.offset == offset and err.pattern == pattern
    lines = str(err).splitlines()
    assert lines[-2].strip() == pattern.strip() or pattern in lines[-2]
    assert lines[-1].index("^") - 4 == offset  # caret under the offending character


def test_bad_flavor_and_type() -> None:
    with pytest.raises(ValueError, match="flavor must be one of"):
        parse("a", flavor="perl")  # type: ignore[arg-type]
    with pytest.raises(RegexError, match="pattern must be str"):
        parse(b"a")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [(c[1], c[3], c[4]) for c in CASES if c[2] == "python" and c[0] != "anchor-z-ecma-style"],
    ids=[c[0] for c in CASES if c[2] == "python" and c[0] != "anchor-z-ecma-style"],
)
def test_python_cases_agree_with_re(pattern: str, good: list[str], bad: list[str]) -> None:
    import re

    for text in good:
        assert re.fullmatch(pattern, text), f"the oracle disagrees on {pattern!r} ~ {text!r}"
    for text in bad:
        assert not re.fullmatch(pattern, text), f"the oracle disagrees on {pattern!r} !~ {text!r}"


def test_compiled_patterns_are_cached_per_pattern_flavor_and_flags() -> None:
    from tether.regex import compile as regex_compile

    p = "[a-f0-9]{2}-cache-test"
    a = parse(p)
    assert any(k[:5] == (p, "python", False, False, False) for k in regex_compile._COMPILED)
    assert parse(p) is a  # the cached node (equal to a fresh compile: nodes are interned)
    assert regex_compile._compile_uncached(p, "python", False, False, False) is a
    assert parse(p, ignore_case=True) is not a and matches(parse(p, ignore_case=True), "AB-CACHE-TEST")
    assert search(p) is not a and matches(search(p), "xx0a-cache-testyy")
    assert parse(p, flavor="ecma") is a  # same language, separate entry
    assert any(k[:5] == (p, "ecma", False, False, False) for k in regex_compile._COMPILED)
    # errors are raised every time and never cached
    for _ in range(2):
        with pytest.raises(RegexError):
            parse("(unclosed-cache-test")
    assert not any(k[0] == "(unclosed-cache-test" for k in regex_compile._COMPILED)


@pytest.mark.parametrize("pattern", [r"^$\Z", r"a$\Z", r"a$(?=\n)", r"a$(?!\n)", r"a$$", r"a$"])
@pytest.mark.parametrize("text", ["", "\n", "a", "a\n", "a\n\n", "xa\n"])
def test_python_dollar_before_a_final_newline_followed_by_strict_end(pattern: str, text: str) -> None:
    # "$" may match just before a final newline, "\Z" only at the very end: "$\Z"
    # must not take that newline
    import re

    o = re.compile(pattern)
    assert matches(search(pattern, flavor="python"), text) == (o.search(text) is not None)
    assert matches(parse(pattern), text) == (o.fullmatch(text) is not None)
