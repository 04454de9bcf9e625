"""Front-end AST → regex-layer node (``tether.regex``) for the terminals the lowering
makes, so the engine compiles nodes and never parses a grammar terminal's text again.

A lexical sub-expression is spelled as a regex parse tree (``tether.regex.tree``), the one
the regex parser would read from the terminal's text (``regexgen.to_regex``):

* literals and classes are code point sets (case folded as ``(?i:...)`` folds them);
* sequences are flattened where the text has no group, and neighbouring counted
  repeats of one item merge (``tree.append_item``); alternations are left-factored
  (``tree.factor``); repetitions are counted; rule references are inlined;
* an opaque regex (Lark ``/.../``, KBNF ``#"..."``, xgrammar ``Regex``) is read by the
  regex parser of its flavor and flags (the one parser of that flavor).

The whole tree is then lowered once (``tether.regex.from_tree``), so a lookaround or a
word boundary inside an opaque regex is judged on the whole terminal, as in its text.
Set operations (``&``, ``~``, ``except!``) are built from their operands' nodes
(``ir.set_operation``). The result is the very node ``Terminal.to_node`` would build by
parsing the text (nodes are interned; the tests check identity on the shared grammars).

Recursion follows the AST's depth with rule references inlined, which the lowering keeps
within ``Limits.max_nesting`` (``lower.Lowering._lexical_rules``).
"""

from __future__ import annotations

from collections.abc import Callable

from tether import regex as rx
from tether.grammar.ast import EPS, Alt, Cls, Lit, Node, Ref, Rep, Rx, Seq, SetOp, Term
from tether.grammar.ir import set_operation
from tether.grammar.regexgen import has_setop
from tether.regex import charset as cs
from tether.regex.ast import INF
from tether.regex.escapes import Flavor
from tether.regex.tree import Tree, append_item, factor

Resolve = Callable[[Ref], Node]


class TerminalNodes:
    """Builds the nodes of one grammar's terminals (``resolve`` inlines its rules);
    opaque regexes are read once per grammar."""

    def __init__(self, resolve: Resolve) -> None:
        self.resolve = resolve
        self._read: dict[Rx, tuple[Tree, bool]] = {}
        self._assertions = False

    def node(self, n: Node, flavor: Flavor = "python") -> rx.Node:
        """The node of the texts ``n`` matches (its whole text, as one terminal whose
        flavor is ``flavor``).

        Raises:
            RegexError: an opaque regex the parser refuses; LimitError: its limits.
        """
        if has_setop(n, self.resolve):
            return self._setop_node(n, flavor)
        self._assertions = False
        tree = self.tree(n)
        return rx.from_tree(tree, assertions=self._assertions, flavor=flavor)

    def _setop_node(self, n: Node, flavor: Flavor) -> rx.Node:
        if isinstance(n, Ref):
            return self.node(self.resolve(n), flavor)
        if isinstance(n, SetOp):
            args = [self.node(a, flavor) for a in n.args]
            return set_operation(n.op, args, n.max_reps if n.op == "except" else None)
        if isinstance(n, Seq):
            return rx.concat(*(self.node(a, flavor) for a in n.items))
        if isinstance(n, Alt):
            return rx.alt(*(self.node(a, flavor) for a in n.items))
        if isinstance(n, Rep):
            return rx.repeat(self.node(n.item, flavor), n.lo, n.hi)
        raise TypeError(f"unexpected node {n!r}")

    # -- the parse tree the terminal's text reads to ---------------------------
    def tree(self, n: Node) -> Tree:
        if isinstance(n, Ref):
            return self.tree(self.resolve(n))
        if isinstance(n, Lit | Seq):
            items: list[Tree] = []
            self._sequence_into(n, items)
            return items[0] if len(items) == 1 else ("seq", items)
        if isinstance(n, Cls):
            return ("set", n.ranges)
        if isinstance(n, Rx):
            return self._opaque(n)
        if isinstance(n, Alt):
            branches = [self.tree(i) for i in n.items]
            return branches[0] if len(branches) == 1 else factor(branches)
        if isinstance(n, Rep):
            item = self.tree(n.item)
            if item == ("seq", []):  # ε repeated: ε (the text writes nothing)
                return item
            return ("rep", item, n.lo, INF if n.hi is None else n.hi)
        if isinstance(n, SetOp | Term):
            raise ValueError("set operations and IR terminals have no regex tree here")
        raise TypeError(f"unexpected node {n!r}")

    def _sequence_into(self, n: Node, items: list[Tree]) -> None:
        """Append ``n``'s items to a sequence: literals, sequences and references to them
        are spliced (their text has no group); anything else is one item."""
        stack = [n]
        while stack:
            x = stack.pop()
            while isinstance(x, Ref):
                x = self.resolve(x)
            if isinstance(x, Lit):
                for c in x.text:
                    cp = ord(c)
                    items.append(("set", cs.casefold_char(cp) if x.ignore_case else ((cp, cp),)))
            elif isinstance(x, Seq):
                stack.extend(reversed(x.items))
            else:
                append_item(items, self.tree(x))

    def _opaque(self, n: Rx) -> Tree:
        got = self._read.get(n)
        if got is None:
            got = self._read[n] = rx.parse_tree(
                n.pattern, flavor="ecma" if n.flavor == "ecma" else "python",
                ignore_case="i" in n.flags, dotall="s" in n.flags,
                multiline="m" in n.flags, verbose="x" in n.flags,
            )
        self._assertions = self._assertions or got[1]
        return got[0]


__all__ = ["EPS", "TerminalNodes"]
