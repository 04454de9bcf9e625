"""`generate`'s return type follows its arguments (its overloads), as a type checker sees
it: one prompt gives a `Generation`, ``stream=True`` a `Stream`, ``n`` a list, a batch a
list per prompt. mypy checks a snippet of calls with ``assert_type``; a wrong overload
fails it."""

from __future__ import annotations

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is not installed (the dev extra has it)")

SNIPPET = '''
from typing import assert_type
from tether.program.generate import Generation, Stream, generate

def calls(m: object, k: int) -> None:
    assert_type(generate(m, "x"), Generation)
    assert_type(generate(m, "x", {"type": "integer"}, max_tokens=8, decoder="sample"), Generation)
    assert_type(generate(m, [{"role": "user", "content": "hi"}]), Generation)
    assert_type(generate(m, "x", stream=True), Stream)
    assert_type(generate(m, "x", n=k), Generation | list[Generation])
    assert_type(generate(m, ["a", "b"]), list[Generation])
    assert_type(generate(m, ["a", "b"], n=k), list[Generation] | list[list[Generation]])
'''


def check(tmp_path, text: str) -> tuple[str, int]:
    f = tmp_path / "calls.py"
    f.write_text(text)
    out, err, status = mypy_api.run(["--strict", "--no-error-summary", str(f)])
    return out + err, status


def test_overloads_give_each_call_its_shape(tmp_path) -> None:
    out, status = check(tmp_path, SNIPPET)
    assert status == 0, out


def test_a_wrong_expectation_fails(tmp_path) -> None:
    """The check above can fail: a batch is not a single Generation."""
    out, status = check(tmp_path, SNIPPET + "    assert_type(generate(m, ['a', 'b']), Generation)\n")
    assert status == 1 and "list[Generation]" in out, out
