"""The incremental partial-JSON reader (`tether.program.partial`): every prefix of a JSON
document gives a partial value that is a prefix of the final one, and the last equals
``json.loads``; hostile text fails closed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.errors import LimitError, TetherError
from tether.limits import Limits, limits
from tether.program.outputs import output_spec, triggered_spec
from tether.program.partial import MISSING, PartialJson, PartialJsonError, Partials

# every code point json.dumps may meet, lone surrogates included
CHARS = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(CHARS, max_size=12))
VALUES = st.recursive(
    SCALARS,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(CHARS, max_size=6), kids, max_size=5),
    max_leaves=25,
)
LAYOUTS = st.sampled_from([
    {}, {"ensure_ascii": False}, {"indent": 2}, {"indent": 0, "ensure_ascii": False},
    {"separators": (",", ":")}, {"separators": (" , ", " :\t")},
])


def is_prefix(p: Any, v: Any) -> bool:
    """``p`` is a partial of ``v``: strings a prefix, containers the first members (all
    equal but the last, itself a partial), anything else equal (and of the same type)."""
    if isinstance(v, str):
        return isinstance(p, str) and v.startswith(p)
    if isinstance(v, list):
        if not isinstance(p, list) or len(p) > len(v):
            return False
        return all(a == b for a, b in zip(p[:-1], v, strict=False)) and (not p or is_prefix(p[-1], v[len(p) - 1]))
    if isinstance(v, dict):
        if not isinstance(p, dict) or len(p) > len(v):
            return False
        keys = list(v)[: len(p)]
        if list(p) != keys:
            return False
        return all(p[k] == v[k] for k in keys[:-1]) and (not keys or is_prefix(p[keys[-1]], v[keys[-1]]))
    return type(p) is type(v) and p == v


def partials_char_by_char(text: str) -> list[Any]:
    r = PartialJson()
    out = []
    for ch in text:
        r.feed(ch)
        out.append(r.value)
    r.finish()
    out.append(r.value)
    assert r.complete
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALUES, LAYOUTS)
def test_every_prefix_is_a_partial_of_the_final_value(value: Any, layout: dict[str, Any]) -> None:
    text = json.dumps(value, **layout)
    final = json.loads(text)
    seen = [p for p in partials_char_by_char(text) if p is not MISSING]
    assert seen and seen[-1] == final
    previous = MISSING
    for p in seen:
        assert is_prefix(p, final), (p, final)
        if previous is not MISSING:
            assert is_prefix(previous, p), (previous, p)  # a partial only grows
        previous = p


@settings(max_examples=200, deadline=None)
@given(VALUES, LAYOUTS, st.data())
def test_any_chunking_gives_the_same_values(value: Any, layout: dict[str, Any], data: st.DataObject) -> None:
    text = json.dumps(value, **layout)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    r = PartialJson()
    start = 0
    for cut in [*cuts, len(text)]:
        changed = r.feed(text[start:cut])
        start = cut
        if changed:
            assert is_prefix(r.value, json.loads(text))
    r.finish()
    assert r.complete and r.value == json.loads(text)


def test_partials_by_example() -> None:
    text = '{"name": "Al\\u00e9", "tags": ["a", 12, 3.5e1], "ok": true, "n": null, "e": {}}'
    shown = []
    r = PartialJson()
    for ch in text:
        if r.feed(ch):
            shown.append(r.value)
    assert shown[:5] == [{}, {"name": ""}, {"name": "A"}, {"name": "Al"}, {"name": "Alé"}]
    assert {"name": "Alé", "tags": ["a"]} in shown and {"name": "Alé", "tags": ["a", 12]} in shown
    assert not any(p.get("tags") == ["a", 1] for p in shown)  # a number shows once complete
    assert shown[-1] == json.loads(text)


def test_a_number_at_the_end_completes_on_finish() -> None:
    r = PartialJson()
    assert not r.feed("-12.5e") and r.value is MISSING
    r.feed("3")
    assert r.value is MISSING and not r.complete
    assert r.finish() and r.value == -12500.0 and r.complete


def test_escapes_and_surrogate_pairs_wait_until_complete() -> None:
    r = PartialJson()
    r.feed('"a\\u00')
    assert r.value == "a"
    r.feed("e9\\ud83d")
    assert r.value == "aé"  # the high surrogate waits for its low half
    r.feed("\\ude00")
    assert r.value == "aé😀"
    r.feed('\\ud800"')  # a lone high surrogate at the end, kept as json.loads keeps it
    assert r.value == json.loads('"a\\u00e9\\ud83d\\ude00\\ud800"') and r.complete


def test_a_key_in_progress_is_not_shown() -> None:
    r = PartialJson()
    r.feed('{"a": 1, "lon')
    assert r.value == {"a": 1}
    r.feed('g": ')
    assert r.value == {"a": 1}
    r.feed('"x')
    assert r.value == {"a": 1, "long": "x"}


@pytest.mark.parametrize("text", [
    '{"a" 1}', "[1,]", '{"a":tru}', '"\x01"', "[01]", '{"a":1}x', "\\", "NaN", "[1 2]", '{"a":1,}',
    "[-]", '"\\x"', '"\\u12g4"', "{1: 2}", "]", "[}", "01",
])
def test_text_that_is_not_json_raises_with_its_place(text: str) -> None:
    r = PartialJson()
    with pytest.raises(PartialJsonError) as info:
        r.feed(text)
        r.finish()
    assert "offset" in str(info.value) and 0 <= info.value.offset <= len(text)
    with pytest.raises(PartialJsonError):  # the error sticks
        r.feed("1")


def test_deep_nesting_is_bounded_by_the_active_limits() -> None:
    with pytest.raises(LimitError) as info:
        PartialJson().feed("[" * 1_000_000)  # no recursion: refused at the limit, quickly
    assert info.value.limit == "max_json_depth" and info.value.maximum == Limits().max_json_depth
    with limits(Limits(max_json_depth=3)):
        r, deeper = PartialJson(), PartialJson()
    r.feed("[[1], [[]]]")  # depth 3: the 1 inside two arrays, the innermost empty array
    assert r.value == [[1], [[]]]
    with pytest.raises(LimitError) as info:
        deeper.feed("[[[1")
    assert info.value.maximum == 3 and "offset 3" in str(info.value)


def test_a_number_python_cannot_read_fails_closed() -> None:
    r = PartialJson()
    r.feed("1" * 5000)
    with pytest.raises(PartialJsonError):
        r.finish()


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*'{}[],:"\\ \n0123456789-+.eEtrufalsn', "\\u", "é", "\x01"]), max_size=40))
def test_hostile_text_fails_closed_or_agrees_with_json_loads(pieces: list[str]) -> None:
    text = "".join(pieces)
    def no_constants(name: str) -> Any:
        raise ValueError(name)

    try:
        expected: Any = json.loads(text, parse_constant=no_constants)
    except ValueError:
        expected = MISSING
    r = PartialJson()
    try:
        r.feed(text)
        r.finish()
    except TetherError:
        assert expected is MISSING  # json.loads reads it: so must the reader
        return
    if expected is not MISSING:
        assert r.complete and r.value == expected
    else:
        assert not r.complete  # an incomplete prefix: no error yet, no final value


@settings(max_examples=100, deadline=None)
@given(VALUES)
def test_a_prefix_read_at_once_gives_the_same_partial(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False)
    by_char = partials_char_by_char(text)
    for cut in range(len(text) + 1):
        r = PartialJson()
        r.feed(text[:cut])  # one chunk: the fast path over plain string runs
        assert r.value == by_char[cut - 1] if cut else r.value is MISSING


# -- partial values of output kinds ------------------------------------------------------------


def feed_all(p: Partials, chunks: list[str]) -> list[Any]:
    out = []
    for c in chunks:
        if p.feed(c) and p.has_value:
            out.append(p.value)
    if p.finish() and p.has_value:
        out.append(p.value)
    return out


def test_text_outputs_give_the_text_so_far() -> None:
    assert feed_all(Partials(None), ["ab", "", "c"]) == ["ab", "abc"]
    assert feed_all(Partials(output_spec(["yes", "no"])), ["y", "es"]) == ["y", "yes"]
    empty = Partials(None)
    assert feed_all(empty, []) == [""]  # an empty output still has its value


def test_json_outputs_give_json_partials() -> None:
    spec = output_spec({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}})
    assert feed_all(Partials(spec), ['{"a":[1', ",2", "]}"]) == [{"a": []}, {"a": [1]}, {"a": [1, 2]}]
    assert feed_all(Partials(output_spec(int)), ["1", "2"]) == [12]


def test_triggered_outputs_give_the_constrained_part() -> None:
    spec = triggered_spec("</think>", {"type": "array", "items": {"type": "string"}})
    got = feed_all(Partials(spec), ["hmm </thi", 'nk>["a', 'b"]'])
    assert got == [["a"], ["ab"]]
    none = Partials(spec)
    assert feed_all(none, ["no trigger here"]) == [] and none.value is MISSING
