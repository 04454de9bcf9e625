"""Parsing both surfaces: clauses, prompt templates, escapes, errors with line:column."""

from __future__ import annotations

import ast

import pytest

from tether.errors import QuerySyntaxError
from tether.lang.syntax import (
    Expr,
    Hole,
    Role,
    Text,
    parse_query,
    parse_template,
    rewrite_inline_where,
)


def test_template_parts() -> None:
    parts = parse_template("Q: [JOKE] {x.upper()} [N: int] [@dec R: r'[a-z]+']{:user}")
    assert parts == [Text("Q: "), Hole("JOKE"), Text(" "), Expr("x.upper()"), Text(" "), Hole("N", "int"),
                     Text(" "), Hole("R", "r'[a-z]+'", ("dec",)), Role("user")]


@pytest.mark.parametrize(("src", "text"), [
    ("[[x]]", "[x]"), ("{{a}}", "{a}"), ('"tags": [["[T]"]]', None),
])
def test_escapes(src: str, text: str | None) -> None:
    parts = parse_template(src)
    if text is not None:
        assert parts == [Text(text)]
    else:
        assert parts == [Text('"tags": ["'), Hole("T"), Text('"]')]


@pytest.mark.parametrize(("src", "msg"), [("a [b", "unclosed hole"), ("a {b", "unclosed"), ("[1x]", "bad hole name")])
def test_template_errors(src: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        parse_template(src)


def test_paper_form() -> None:
    q = parse_query('argmax\n    "Q: [JOKE]\\n"\n    "A: [PUNCHLINE]"\nfrom "gpt2-medium"\nwhere\n'
                    '    STOPS_AT(JOKE, "?") and len(words(JOKE)) < 20\n')
    assert q.decoder is not None and q.decoder.method == "argmax"
    assert q.model == "gpt2-medium"
    assert isinstance(q.where, ast.BoolOp)
    assert len(q.body.body) == 2


def test_decoder_args_and_distribute_spellings() -> None:
    q = parse_query('sample(n=3, temperature=0.9)\n"x[A]"\ndistribute\n    A over ["a", "b"]\n')
    assert q.decoder.method == "sample" and q.decoder.n == 3 and q.decoder.args["temperature"] == 0.9
    assert q.distribute is not None and q.distribute[0] == "A"
    q2 = parse_query('argmax\n    "x[A]"\ndistribution\n    A in ["a", "b"]\n')
    assert q2.distribute is not None and q2.distribute[0] == "A"
    q3 = parse_query('beam(n=2)\n    "x[A]"\nfrom "m"\n')
    assert q3.decoder.method == "beam" and q3.decoder.n == 2


def test_minimal_form_and_python_from_import() -> None:
    q = parse_query('from dataclasses import dataclass\nx = 1\n"a [B]" where len(B) < 3\n')
    assert q.decoder is None and q.model is None and q.where is None
    assert len(q.body.body) == 3


def test_inline_where_keeps_columns() -> None:
    src = '"a [B]" where len(B) < 3\n'
    out = rewrite_inline_where(src)
    assert len(out.splitlines()[0]) >= len(src.splitlines()[0])
    assert out.index("len") == src.index("len")


def test_syntax_error_line_column() -> None:
    with pytest.raises(QuerySyntaxError) as e:
        parse_query('argmax\n    "ok [A]"\n    x = (1 +\nfrom "m"\n')
    assert e.value.lineno >= 3
    with pytest.raises(QuerySyntaxError) as e2:
        parse_query('"fine"\n"broken [A"\n')
    assert e2.value.lineno == 2 and e2.value.offset == 9
    assert "line 2 column 9" in str(e2.value)


def test_where_clause_error_points_into_clause() -> None:
    with pytest.raises(QuerySyntaxError) as e:
        parse_query('argmax\n    "x[A]"\nwhere\n    A in [\n')
    assert e.value.lineno >= 4


def test_unknown_decoder() -> None:
    with pytest.raises(QuerySyntaxError, match="decoder"):
        parse_query('sample(3)\n"x"\n')


def test_inline_where_with_trailing_comment_and_multiline_condition() -> None:
    q = parse_query('"a [B]" where len(B) < 3  # short\n"c [D]" where (D in ["x",\n    "y"])\n')
    assert len(q.body.body) == 2
    for stmt in q.body.body:
        assert isinstance(stmt.value, ast.IfExp)
