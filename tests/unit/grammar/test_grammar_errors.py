"""Every entry of the error catalogue fails to load with its message, place and caret."""

from __future__ import annotations

import pytest
from grammar_error_catalogue import CATALOGUE

from tether.errors import GrammarError
from tether.grammar import Grammar

LOADERS = {"gbnf": Grammar.from_gbnf, "lark": Grammar.from_lark, "kbnf": Grammar.from_kbnf}


def test_catalogue_covers_enough_kinds() -> None:
    assert len(CATALOGUE) >= 12
    assert {s for s, *_ in CATALOGUE} == set(LOADERS)


@pytest.mark.parametrize(("syntax", "text", "fragment", "line", "column"), CATALOGUE,
                         ids=[f"{s}-{f[:30]}" for s, _, f, *_ in CATALOGUE])
def test_error_message(syntax: str, text: str, fragment: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        LOADERS[syntax](text, source="test.grammar")
    exc = info.value
    message = str(exc)
    assert fragment in message
    assert exc.line == line
    if column:
        assert exc.column == column
    if line:
        assert f"at line {line} column {exc.column} in test.grammar" in message
        caret_line = message.splitlines()[-1]
        assert caret_line.strip() == "^"
        # the caret sits under the reported column of the quoted source line
        assert caret_line.index("^") - 4 == exc.column - 1 or len(text.splitlines()[line - 1]) > 100


def test_did_you_mean() -> None:
    with pytest.raises(GrammarError, match="Did you mean 'value'"):
        Grammar.from_gbnf('root ::= valeu\nvalue ::= "x"')
    with pytest.raises(GrammarError, match="Did you mean 'value'"):
        Grammar.from_lark('start: valeu\nvalue: "x"')
