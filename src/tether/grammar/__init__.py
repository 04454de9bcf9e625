"""Grammar IR and its front ends (GBNF, Lark, KBNF-style EBNF, regex, choices, JSON Schema)."""

from tether.grammar.ir import NT, Grammar, Rule, T, Terminal

__all__ = ["NT", "T", "Grammar", "Rule", "Terminal"]
