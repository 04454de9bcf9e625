"""Grammar IR and its front ends (GBNF, Lark, KBNF-style EBNF, regex, choices, JSON Schema).

Every front end lowers into one IR (``ir.py``): rules over nonterminals and regex/literal
terminals. Build grammars with ``Grammar.from_gbnf / from_lark / from_kbnf / from_regex /
from_choices / from_json_schema``, combine them with ``Grammar.sequence``,
``Grammar.union`` and ``Grammar.embed``; ``simplify`` validates and cleans up. The IR does
not import its front ends: ``front.py`` registers them with it.
"""

from tether.grammar import front  # noqa: F401 -- registers the Grammar.from_* front ends
from tether.grammar.ir import NT, Grammar, Rule, T, Terminal
from tether.grammar.simplify import eliminate_epsilon, nullable_rules, simplify

__all__ = ["NT", "T", "Grammar", "Rule", "Terminal", "eliminate_epsilon", "nullable_rules", "simplify"]
