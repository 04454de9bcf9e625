"""The Limits object, the active-limits context and LimitError's message."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from tether.errors import LimitError, TetherError
from tether.limits import Limits, check, check_deadline, current, deadline, limits


def test_defaults_are_positive_and_documented_in_the_class_docstring() -> None:
    doc = Limits.__doc__ or ""
    for f in dataclasses.fields(Limits):
        assert getattr(Limits(), f.name) > 0
        assert f"{f.name}:" in doc, f"Limits.{f.name} is not documented"


def test_check_names_limit_value_maximum_and_place() -> None:
    with limits(max_repeat=10):
        with pytest.raises(LimitError) as info:
            check("max_repeat", 11, "offset 4 in pattern")
    e = info.value
    assert (e.limit, e.value, e.maximum, e.place) == ("max_repeat", 11, 10, "offset 4 in pattern")
    assert "max_repeat" in str(e) and "11" in str(e) and "10" in str(e) and "offset 4" in str(e)
    assert isinstance(e, ValueError) and isinstance(e, TetherError)
    check("max_repeat", 10)  # inclusive: the maximum itself is allowed


def test_limits_nest_and_restore() -> None:
    base = current()
    with limits(max_rules=5) as outer:
        assert current().max_rules == 5
        with limits(Limits(max_rules=7)):
            assert current().max_rules == 7
        assert current() is outer
    assert current() is base


def test_limits_are_per_thread_context() -> None:
    seen: list[int] = []

    def other() -> None:
        seen.append(current().max_rules)

    with limits(max_rules=3):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [Limits().max_rules]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "10"])
def test_bad_limit_values_are_refused(bad: object) -> None:
    with pytest.raises(LimitError):
        Limits(max_repeat=bad)  # type: ignore[arg-type]


def test_unknown_limit_name_is_refused() -> None:
    with pytest.raises(LimitError, match="no such limit"):
        Limits().replace(max_bananas=3)
    with pytest.raises(LimitError):
        with limits("not limits"):  # type: ignore[arg-type]
            pass


def test_deadline_raises_after_compile_seconds() -> None:
    with limits(compile_seconds=1e-9), deadline():
        with pytest.raises(LimitError) as info:
            for _ in range(10**6):
                check_deadline("rule 'x'")
    assert info.value.limit == "compile_seconds" and info.value.place == "rule 'x'"
    check_deadline()  # outside a deadline: never raises


def test_messages_echo_huge_integers_safely() -> None:
    e = LimitError("max_repeat", 10**5000, 100, "#/maxLength")
    assert "digits" in str(e) and "#/maxLength" in str(e)
