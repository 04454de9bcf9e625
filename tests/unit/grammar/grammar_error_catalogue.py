"""Broken grammars and the error each must produce, as data.

Each entry: (syntax, grammar text, message fragment, line, column); line/column 0 means
the error is not tied to a place (e.g. a missing start rule). ``test_grammar_errors.py`` loads
every entry and reads the message.
"""

CATALOGUE: list[tuple[str, str, str, int, int]] = [
    # --- GBNF
    ("gbnf", 'root "a"', "expected '::=' after rule name 'root'", 1, 6),
    ("gbnf", 'root ::= "abc\n', "unterminated string literal", 1, 10),
    ("gbnf", "root ::= [a-z", "unterminated character class", 1, 10),
    ("gbnf", 'root ::= "\\q"', "unknown escape '\\q'", 1, 11),
    ("gbnf", 'root ::= "\\x4"', "expected 2 hex digits after '\\x'", 1, 11),
    ("gbnf", 'root ::= valeu\nvalue ::= "x"', "rule 'valeu' is used but not defined", 1, 10),
    ("gbnf", 'root ::= "a"\nroot ::= "b"', "rule 'root' is defined twice (first at line 1)", 2, 1),
    ("gbnf", 'root ::= *"a"', "'*' has no preceding item to repeat", 1, 10),
    ("gbnf", 'root ::= "a"{3,1}', "repetition maximum 1 is smaller than its minimum 3", 1, 13),
    ("gbnf", 'rot ::= "a"', "the grammar has no 'root' rule", 0, 0),
    ("gbnf", 'root ::= ("a" | "b"\n', "expected ')' to close the group", 1, 10),
    ("gbnf", "root ::= [z-a]", "character range is out of order", 1, 13),
    ("gbnf", 'root ::= a\na ::= "x" a', "can never finish", 1, 1),
    ("gbnf", 'root ::= "a" )', "unexpected ')': expected a newline", 1, 14),
    ("gbnf", "", "the grammar has no rules", 0, 0),
    # --- Lark
    ("lark", 'start: valeu\nvalue: "x"', "unknown name 'valeu'", 1, 8),
    ("lark", 'start "a"', "expected ':' after 'start'", 1, 7),
    ("lark", 'start: "a"\nstart: "b"', "duplicate rule 'start'", 2, 1),
    ("lark", 'start: FOO\nFOO: "a"\nFOO: "b"', "duplicate terminal 'FOO'", 3, 1),
    ("lark", 'start: "abc', "unterminated string", 1, 8),
    ("lark", "start: /[abc/", "invalid regex", 1, 0),
    ("lark", "start: /a(?!b)/", "look-around is not supported", 1, 10),
    ("lark", 'start: FOO\nFOO: "a" | BAR\nBAR: "b" FOO', "circular reference in terminal", 3, 10),
    ("lark", 'start: "ab".."c"', "range start must be a single character", 1, 8),
    ("lark", 'start: "d".."a"', "invalid range order", 1, 8),
    ("lark", 'start: foo{7,6}\nfoo: "a"', "range end must be >= start", 1, 11),
    ("lark", "%import common.BLAH\nstart: BLAH", "Unknown common terminal 'BLAH'", 1, 16),
    ("lark", 'start: A\nA: b\nb: "x"', "cannot use rule 'b'", 2, 4),
    ("lark", "start: /a/l", "l-flag is not supported", 1, 11),
    ("lark", 'root: "a"', "no start rule", 0, 0),
    ("lark", 'start: "\\xZZ"', "invalid escape", 1, 9),
    ("lark", 'start: foo\nfoo[bogus=1]: "a"', "Unknown attribute 'bogus'", 2, 5),
    ("lark", 'start: x\nx: "a" x', "rule 'start' can never finish", 1, 1),
    # --- KBNF
    ("kbnf", "start ::= 'a'", "expected ';' to end the rule 'start'", 1, 14),
    ("kbnf", "start ::= B;", "rule 'B' is used but not defined", 1, 11),
    ("kbnf", "start ::= except!(A);\nA ::= 'a' A | 'b';", "except! needs a regular operand", 1, 19),
    ("kbnf", "(* hi\nstart ::= 'a';", "unterminated comment", 1, 1),
    ("kbnf", 'start ::= #"[a";', "invalid regex", 1, 0),
    ("kbnf", "start = 'a';", "unexpected character '='", 1, 7),
    ("kbnf", "start ::= ( 'a' ;", "expected ')' to close the group", 1, 17),
]
