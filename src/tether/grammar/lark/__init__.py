"""Lark grammars (the subset llguidance and Outlines users write) → Grammar IR.

1. ``tokens.tokenize`` splits the text into names, strings (``"..."i``), regexes
   (``/.../flags``), operators, directives and newlines; ``reader.LarkReader`` reads definitions
   (``rule: ...``, ``?rule``, ``!rule``, ``_rule``, ``TERMINAL: ...``, priorities ``.n``,
   llguidance attributes ``rule[stop="..."]``), alternatives (``|``, also on a new line),
   ``->`` aliases, groups, ``[optional]``, ``* + ?``, ``~ n``, ``~ n..m``, ``{n,m}``,
   ``"a".."z"`` ranges, and llguidance's ``&`` / prefix ``~`` on terminals, into the
   shared AST. Counts may be decimal or ``0x..``.
   Rule templates (``_separated{x, sep}: x (sep x)*``, used as ``_separated{NAME, ","}``)
   are instantiated after reading (``templates.py``): one rule per distinct (template, arguments), within
   ``max_rules`` instances whose arguments stay within ``max_expanded`` symbols.
2. Directives: ``%import common.X [-> Y]`` and ``%import common (X, Y)`` resolve from
   tether's own copy of Lark's common terminals (``common.py``), ``%ignore``,
   ``%json {schema}`` (embeds ``Grammar.from_json_schema``), ``%llguidance {...}``
   (options are checked, then ignored).
3. ``lowering.from_lark``: ``lower(..., mode="lexeme")``: each Lark terminal stays one
   IR terminal, matched greedily as Lark and llguidance do; then ``simplify``.

Look-around in a terminal's regex (``regex_checks.py``) is kept where it stays inside the terminal's text (a
look-ahead no longer than what must still follow it in the terminal, a look-behind no
longer than what must precede it): there Lark's lexer and tether's whole-lexeme match
agree, and the regex layer lowers it exactly. This is decided on the whole terminal,
its definition's parts joined (``"\"" /(?<!\\)x/``: the look-behind reads the quote).
A one-character look-ahead inside a repetition (verilog.lark's comment: a ``*`` not
followed by ``/``) is rewritten into a regex without look-around (``lookahead.py``).
A negative look-ahead that reads the input after the lexeme is kept where the greedy lexer and the grammar
make it exact at every use of the terminal (``longest_match.py``: another allowed
terminal continues the lexeme, or nothing that may follow starts with its text),
noted in ``Grammar.lowering``. Any other look-around reading outside the lexeme is
refused, naming the look-around, the terminal and the place. Anchors likewise:
``\\b``/``\\B`` are kept where both characters they read lie inside the terminal;
``^ $ \\A \\Z`` (the whole input, in Lark's lexer) are refused.

``%declare _INDENT _DEDENT`` (Lark's Indenter post-lexer, python.lark) loads with a
warning: the two match the empty text, so indentation is not checked.

Ignored with a warning: terminal/rule priorities, ``max_tokens=``, ``temperature=``.
Refused with a GrammarError naming the place: terminal templates, parametric rules,
``%declare`` of other terminals, ``%override``, imports other than ``common``, look-around reading outside
the terminal, backreferences, the ``l`` regex flag, token ranges ``<[..]>``, special
tokens ``<|..|>``, ``@grammar``.
"""

from tether.grammar.lark.lowering import from_lark, parse_lark
from tether.grammar.lark.regex_checks import check_regex

__all__ = ["check_regex", "from_lark", "parse_lark"]
