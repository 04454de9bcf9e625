"""The public names of ``tether`` are exactly ``__all__`` and each one resolves."""

from __future__ import annotations

import tether


def test_all_names_resolve() -> None:
    for name in tether.__all__:
        assert getattr(tether, name) is not None, name


def test_all_is_sorted_and_unique() -> None:
    assert list(tether.__all__) == sorted(set(tether.__all__))


def test_unknown_name_raises_attribute_error() -> None:
    try:
        tether.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_regex_is_the_layer_and_a_constructor() -> None:
    from tether.program import regex as program_regex

    spec = tether.regex(r"\d+")
    assert spec == program_regex(r"\d+")
    assert spec.pattern == r"\d+" and spec.flavor == "python"
    assert tether.regex.parse is not None  # still the regex layer
