"""Final (Table 1) and Follow (Table 2) rules, one constraint at a time, plus soundness
(Theorem 5.1) as a property: a token Follow masks can never lead to a valid value."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.lang.semantics import FIN, INC, VAR, HoleState, evaluate, follow, plan


def E(src: str) -> ast.expr:
    return ast.parse(src, mode="eval").body


def S(text: str = "", *, final: bool = False, n: int | None = None, **scope: object) -> HoleState:
    return HoleState("X", text, final, len(text) if n is None else n, dict(scope), frozenset({"Y"}),
                     lambda s: list(s.encode()))


# --- Table 1: Final -----------------------------------------------------------------------

def test_final_of_atoms() -> None:
    assert evaluate(E("3"), S()).ann == FIN
    assert evaluate(E("X"), S("ab")).ann == INC
    assert evaluate(E("X"), S("ab", final=True)).ann == FIN
    assert evaluate(E("Y"), S()).value is None  # future hole: unknown
    assert evaluate(E("p"), S(p=[1])).ann == FIN  # python variables do not change during a hole


def test_len_words_sentences_follow_their_argument() -> None:
    assert evaluate(E("len(X)"), S("abc")) .value == 3 and evaluate(E("len(X)"), S("abc")).ann == INC
    assert evaluate(E("len(words(X))"), S("a b  c\n d")).value == 4
    assert evaluate(E("len(WORDS(X))"), S("a b", final=True)).ann == FIN
    assert evaluate(E("sentences(X)"), S("A b. C d! e")).value == ["A b.", "C d!", "e"]


@pytest.mark.parametrize(("src", "text", "value", "ann"), [
    ("len(X) < 5", "abc", True, VAR),       # may still grow past 5
    ("len(X) < 5", "abcde", False, FIN),    # grown past: stays False
    ("len(X) > 2", "abc", True, FIN),       # grown past: stays True
    ("len(X) > 5", "abc", False, VAR),
    ("len(X) <= 3", "abc", True, VAR),
    ("len(X) >= 3", "abc", True, FIN),
    ("len(X) == 2", "abc", False, FIN),     # an increasing number passed the target
    ("len(X) == 4", "abc", False, VAR),
])
def test_final_of_comparisons(src: str, text: str, value: bool, ann: str) -> None:
    r = evaluate(E(src), S(text))
    assert (r.value, r.ann) == (value, ann)


@pytest.mark.parametrize(("src", "text", "value", "ann"), [
    ('X == "Paris"', "Pa", False, VAR),       # still a prefix
    ('X == "Paris"', "Pe", False, FIN),       # x[i] != y[i]: fixed
    ('X == "Paris"', "Paris", True, VAR),     # could still grow
    ('X in ["ab", "cd"]', "a", False, VAR),
    ('X in ["ab", "cd"]', "x", False, FIN),   # no element starts with it
    ('"\\n" in X', "a\nb", True, FIN),        # a substring of a growing string stays in
    ('"\\n" in X', "ab", False, VAR),
    ('not "\\n" in X', "a\nb", False, FIN),
])
def test_final_of_strings(src: str, text: str, value: bool, ann: str) -> None:
    r = evaluate(E(src), S(text))
    assert (r.value, r.ann) == (value, ann)


def test_and_or_not_short_circuit_on_fin() -> None:
    assert evaluate(E('len(X) < 2 and Y == "a"'), S("abc")).ann == FIN      # fin(False) and unknown
    assert evaluate(E('len(X) > 1 or Y == "a"'), S("abc")).value is True
    assert evaluate(E('len(X) > 1 or Y == "a"'), S("abc")).ann == FIN
    assert evaluate(E('len(X) < 9 and Y == "a"'), S("abc")).ann == VAR
    r = evaluate(E("not len(X) > 1"), S("abc"))
    assert (r.value, r.ann) == (False, FIN)


def test_stops_at_is_a_directive_not_a_requirement() -> None:
    assert evaluate(E('STOPS_AT(X, ".")'), S("ab")).ann == VAR
    assert evaluate(E('stops_at(X, ".")'), S("ab", final=True)).value is True
    assert evaluate(E('stop_at(X, ".")'), S("ab")).ann == VAR  # the paper's spelling


def test_user_functions_final_only_with_final_arguments() -> None:
    def short(s: str) -> bool:
        return len(s) < 3
    assert evaluate(E("short(X)"), S("abcd", short=short)).ann == VAR
    r = evaluate(E("short(X)"), S("abcd", final=True, short=short))
    assert (r.value, r.ann) == (False, FIN)


def test_int_and_regex() -> None:
    assert evaluate(E("INT(X)"), S(" 12")).ann == VAR
    assert evaluate(E("INT(X)"), S("1a")).ann == FIN and not evaluate(E("INT(X)"), S("1a")).value
    assert evaluate(E("INT(X)"), S("", final=True)).value is False
    assert evaluate(E('REGEX(X, r"[A-Z]{2}-[0-9]{3}")'), S("AB-1")).ann == VAR
    assert evaluate(E('REGEX(X, r"[A-Z]{2}-[0-9]{3}")'), S("ABC")).ann == FIN
    assert evaluate(E('REGEX(X, r"[A-Z]{2}-[0-9]{3}")'), S("AB-123", final=True)).value is True


def test_tokens_counts_generated_tokens_of_current_hole() -> None:
    r = evaluate(E("len(TOKENS(X)) < 3"), S("whatever", n=3))
    assert (r.value, r.ann) == (False, FIN)


# --- Table 2: Follow ---------------------------------------------------------------------

def test_follow_in_list_masks_all_but_the_remaining_prefixes() -> None:
    e, st0 = E('X in ["Stephen Hawking"]'), S("Steph")
    assert not follow(e, st0, "en").fin_false
    assert not follow(e, st0, "en Hawking").fin_false
    assert follow(e, st0, "an").fin_false
    assert follow(e, st0, None).fin_false          # eos: "Steph" is not in the list
    assert follow(e, S("Stephen Hawking"), None).fin_true


def test_follow_len_and_words() -> None:
    assert follow(E("len(X) < 4"), S("abc"), "d").fin_false
    assert not follow(E("len(X) < 4"), S("ab"), "c").fin_false
    e = E("len(words(X)) < 3")
    assert not follow(e, S("one two"), "s").fin_false      # continues the word
    assert not follow(e, S("one two"), " ").fin_false      # a space starts no word yet
    assert follow(e, S("one two"), " three").fin_false


def test_follow_string_equality_and_eos() -> None:
    e = E('X == " yes" or X == " no"')
    assert not follow(e, S(""), " y").fin_false
    assert follow(e, S(""), " maybe").fin_false
    assert follow(e, S(" ye"), None).fin_false
    assert follow(e, S(" no"), None).fin_true


def test_plan_extracts_exact_parts() -> None:
    p = plan(E('STOPS_AT(X, "\\n") and len(TOKENS(X)) < 6 and STOPS_BEFORE(X, ".") and X in ["a", "b"]'), S())
    assert p.stops == [("\n", True), (".", False)] and p.max_tokens == 5 and p.choices == ["a", "b"]
    p2 = plan(E('INT(X) and len(X) <= 4 and REGEX(X, "[0-9]+")'), S())
    assert p2.is_int and p2.max_chars == 4 and "[0-9]+" in p2.regexes


# --- soundness (Theorem 5.1) ---------------------------------------------------------------

CONSTRAINTS = [
    "len(X) < 6", "len(words(X)) < 3", 'X in ["ab", "abc", "b a"]', 'X == "a b"',
    'not "\\n" in X', 'not "b" in X and len(X) <= 4', 'len(X) > 2 or X == "a"',
    "INT(X)", 'REGEX(X, r"a[b ]*c?")', 'X in ["ab", "ba"] or len(X) < 2',
]
ALPHABET = st.text(alphabet="ab \n1c", max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CONSTRAINTS), ALPHABET, ALPHABET, ALPHABET)
def test_follow_is_sound(src: str, prefix: str, token: str, rest: str) -> None:
    """If Follow masks ``token`` after ``prefix``, no completion ``prefix+token+rest`` is valid."""
    e = E(src)
    if follow(e, S(prefix), token).fin_false:
        full = prefix + token + rest
        assert not evaluate(e, S(full, final=True)).value
        assert evaluate(e, S(full)).fin_false
