"""The front ends and combinators behind ``Grammar.from_gbnf / from_lark / from_kbnf /
from_regex / from_choices / from_json_schema``, ``Grammar.sequence / union``,
``Grammar.embed`` and ``Grammar.simplified``.

They import the IR (``ir.py``), so the IR cannot import them: this module, imported by
``tether/grammar/__init__.py``, registers each with ``ir.register_builder``. Each front
end is imported on its first use, so ``import tether.grammar`` stays light.
"""

from __future__ import annotations

from typing import Any

from tether.grammar.ir import NT, Grammar, register_builder


def _from_gbnf(text: str, **options: Any) -> Grammar:
    from tether.grammar.gbnf import from_gbnf

    return from_gbnf(text, **options)


def _from_lark(text: str, **options: Any) -> Grammar:
    from tether.grammar.lark import from_lark

    return from_lark(text, **options)


def _from_kbnf(text: str, **options: Any) -> Grammar:
    from tether.grammar.kbnf import from_kbnf

    return from_kbnf(text, **options)


def _from_regex(pattern: str, **options: Any) -> Grammar:
    from tether.grammar.compose import from_regex

    return from_regex(pattern, **options)


def _from_choices(choices: list[str]) -> Grammar:
    from tether.grammar.compose import from_choices

    return from_choices(choices)


def _from_json_schema(schema: object, **options: Any) -> Grammar:
    from tether.grammar.json_schema import compile_json_schema

    return compile_json_schema(schema, **options)


def _sequence(*grammars: Grammar) -> Grammar:
    from tether.grammar.compose import sequence

    return sequence(*grammars)


def _union(*grammars: Grammar) -> Grammar:
    from tether.grammar.compose import union

    return union(*grammars)


def _embed(grammar: Grammar, other: Grammar, name: str) -> NT:
    from tether.grammar.compose import embed_into

    return embed_into(grammar, other, name)


def _simplified(grammar: Grammar) -> Grammar:
    from tether.grammar.simplify import simplify

    return simplify(grammar)


for _name, _build in (
    ("from_gbnf", _from_gbnf),
    ("from_lark", _from_lark),
    ("from_kbnf", _from_kbnf),
    ("from_regex", _from_regex),
    ("from_choices", _from_choices),
    ("from_json_schema", _from_json_schema),
    ("sequence", _sequence),
    ("union", _union),
    ("embed", _embed),
    ("simplified", _simplified),
):
    register_builder(_name, _build)
