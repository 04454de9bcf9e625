"""One regex parser per flavor: the Lark front end's look-around checks and rewrites read
patterns with the regex layer's parser (``tether.regex.parse_tree``), not Python's
``re._parser``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.grammar.lark.lookahead import parse_tree
from tether.grammar.lark.regex_checks import lookaround_outside

SRC = Path(__file__).resolve().parents[3] / "src" / "tether"


def test_no_module_reads_patterns_with_pythons_parser() -> None:
    users = [p for p in SRC.rglob("*.py")
             if any(name in p.read_text() for name in ("re._parser", "sre_parse", "re._constants"))]
    assert users == []


@pytest.mark.parametrize(("pattern", "anchors", "offset"), [
    ("a(?=b)", False, 1),          # the look-ahead reads past the end
    ("a(?=b)b", False, None),      # ... or stays inside
    ("x(?<!y)z", False, None),
    ("(?<!y)z", False, 0),         # the look-behind reads before the start
    ("ab\\b", True, 2),            # a word boundary at the end reads the next character
    ("a\\bb", True, None),
    ("a$", True, 1),               # anchors refer to Lark's whole input
    ("a|\\Ab", True, 2),
    ("(?x) a (?= b ) b", False, None),
    ("(?x) a (?= bb ) b", False, 7),
])
def test_lookarounds_are_judged_at_their_offsets(pattern: str, anchors: bool, offset: int | None) -> None:
    bad = lookaround_outside(pattern, "", anchors)
    assert (None if bad is None else bad[0]) == offset


def test_look_ahead_trees_come_from_the_regex_layer() -> None:
    assert parse_tree("a(?!/)b") == ("seq", (("set", ((97, 97),)), ("look", False, ("set", ((47, 47),)), True),
                                             ("set", ((98, 98),))))
    assert parse_tree("(?<=a)b") == ("seq", (("look", True, ("set", ((97, 97),)), False), ("set", ((98, 98),))))
    assert parse_tree("^a") is None  # anchors stay with the regex layer
    assert parse_tree("(?P<x>a)(?P=x)") is None  # refused by the regex layer: no tree
