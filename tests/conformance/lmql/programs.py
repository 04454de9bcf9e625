"""LMQL programs for the conformance suite, written for this project from LMQL's public
documentation (lmql.ai/docs): each names the documented feature it exercises and the
page that documents it, and its machine-checked expectations (``check(r, m)``).

The texts are LMQL as users write it (clauses, ``lmql`` imports, model names); the
suite runs them unmodified on the embedded model with a small token cap per hole.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# Pages checked against LMQL's documentation sources (the lmql.ai site's docs/ and
# blog/ folders in github.com/eth-sri/lmql). Anchors are cited only where the heading has
# a plain slug; features the docs pages do not cover cite where LMQL documents them
# (a release post, the paper, the README).
DOC = "https://lmql.ai/docs/"
GETTING = DOC
OVERVIEW = DOC + "language/overview.html"
OVERVIEW_DIST = OVERVIEW + "#extracting-more-information-with-distributions"
CONSTRAINTS = DOC + "language/constraints.html"
NUMBER = CONSTRAINTS + "#number-type-constraints"
REGEX = CONSTRAINTS  # "Regex Constraints" (a Preview-badged heading)
REFERENCE = DOC + "language/reference.html"
STANDARD = REFERENCE + "#standard-syntax"
STANDALONE = REFERENCE + "#standalone-syntax"
QSTRINGS = REFERENCE + "#query-strings"
QSTRING_WHERE = REFERENCE + "#query-string-constraints-and-distributions"
INTERPOLATION = REFERENCE + "#string-interpolation"
TACTICS = REFERENCE + "#types-and-tactics"
TYPES = REFERENCE + "#types"
DIST = REFERENCE + "#distribution-clauses"
SCRIPTED = DOC + "language/scripted-prompting.html"
ESCAPING = SCRIPTED + "#escaping"
DECODING = DOC + "language/decoding.html"
DECODER_PARAMS = DECODING + "#additional-decoding-parameters"
NESTED = DOC + "language/nestedqueries.html"
TOOLS = DOC + "language/tools.html"
DECORATORS = DOC + "language/decorators.html"
CHAT = DOC + "lib/chat/overview.html"  # role tags and `await input()` ("Your First Chatbot")
PYTHON = DOC + "lib/python.html"
PY_CONFIG = PYTHON + "#query-configuration"
MODELS = DOC + "models/index.html"
MODEL_LOADING = MODELS + "#loading-models"
MODEL_SPEC = MODELS + "#specifying-the-model"
BLOG_07 = "https://lmql.ai/blog/posts/release-0.7.html"  # "Types / Datatype Constraints"
BLOG_0665 = "https://lmql.ai/blog/posts/release-0.0.6.5.html"  # one-line queries; context.prompt
PAPER = "https://arxiv.org/abs/2212.06094"  # section 3.1: words, stops_at, Python in where
README = "https://github.com/eth-sri/lmql#explore-lmql"  # the stops_at greeting example
SOURCES = ("https://lmql.ai/docs/", "https://lmql.ai/blog/", PAPER, README)


@dataclass
class Program:
    id: str
    feature: str
    cite: str
    text: str
    check: Any  # (result, model) -> None, asserting
    args: dict[str, Any] = field(default_factory=dict)
    python: bool = False  # text is Python using the lmql module (run with exec)


def held(r: Any) -> None:
    """Every decoded hole satisfied its constraint; costs are consistent."""
    assert not r.violations, r.violations
    c = r.costs
    decoded = [h for h in r.holes if h.stopped not in ("nested", "supplied", "distribute")]
    assert c.generate_calls >= len(decoded)
    assert c.generated_tokens >= sum(h.n_tokens for h in decoded)
    assert c.billable_tokens == c.prompt_tokens + c.generated_tokens


def stopped_at(h: Any, phrase: str, keep: bool = True) -> None:
    if h.stopped == "stop":
        assert h.text.endswith(phrase) if keep else phrase not in h.text, h
        body = h.text[: -len(phrase)] if keep else h.text
        assert phrase not in body, h
    else:
        assert h.stopped in ("eos", "budget", "length"), h


def ntok(m: Any, s: str) -> int:
    return len(m.tokenize(s, add_bos=False))


def _c(*fns: Any, base: bool = True) -> Any:
    def run(r: Any, m: Any) -> None:
        if base:
            held(r)
        for f in fns:
            f(r, m)
    return run


P: list[Program] = []


def add(id: str, feature: str, cite: str, text: str, *checks: Any, args: dict[str, Any] | None = None,
        python: bool = False, base: bool = True) -> None:
    P.append(Program(id, feature, cite, text, _c(*checks, base=base and not python), args or {}, python))


# -- getting started / overview ------------------------------------------------------------
add("hello", "prompt statement + len(TOKENS) < n", GETTING,
    '"Say \'this is a test\':[RESPONSE]" where len(TOKENS(RESPONSE)) < 6\n',
    lambda r, m: r.holes[0].n_tokens < 6,
    lambda r, m: r.prompt.startswith("Say 'this is a test':"))
add("review", "Python variables interpolated; not-in constraint; in-list classification", OVERVIEW,
    'review = "We had a great stay. The food was good."\n"Review: {review}\\n"\n'
    '"Q: What is the sentiment?\\nA:[ANALYSIS]" where not "\\n" in ANALYSIS and len(TOKENS(ANALYSIS)) < 8\n'
    '"\\nOverall:[CLS]" where CLS in [" positive", " neutral", " negative"]\n',
    lambda r, m: "\n" not in r["ANALYSIS"],
    lambda r, m: r["CLS"] in (" positive", " neutral", " negative"),
    lambda r, m: "We had a great stay." in r.prompt)
add("greet", "stops_at lower-case spelling + not in", README,
    '"Greet LMQL:[GREETINGS]\\n" where stops_at(GREETINGS, ".") and not "\\n" in GREETINGS\n',
    lambda r, m: stopped_at(r.holes[0], "."), lambda r, m: "\n" not in r["GREETINGS"])
add("minimal-syntax", "a query with no decoder/from clause (minimal syntax)", STANDARD,
    '"Q: Name a colour.\\nA:[C]" where len(TOKENS(C)) < 4\n',
    lambda r, m: r.holes[0].n_tokens < 4)
add("full-syntax", "decoder + body + from + where clauses", STANDALONE,
    'argmax\n    "Q: Name a fruit.\\nA:[F]"\nfrom "openai/text-davinci-003"\nwhere len(TOKENS(F)) < 4\n',
    lambda r, m: r.holes[0].n_tokens < 4)
add("uppercase-clauses", "upper-case clause keywords", STANDALONE,
    'ARGMAX\n    "Q: Name an animal.\\nA:[A]"\nFROM "local:gpt2"\nWHERE len(TOKENS(A)) < 4\n',
    lambda r, m: r.holes[0].n_tokens < 4)

# -- constraints ---------------------------------------------------------------------------
add("stops-at", "STOPS_AT keeps the phrase", CONSTRAINTS,
    '"A list of things for the sea:\\n-[THING]" where STOPS_AT(THING, "\\n")\n',
    lambda r, m: stopped_at(r.holes[0], "\n"))
add("stops-before", "STOPS_BEFORE drops the phrase", CONSTRAINTS,
    '"A short sentence:[S]" where STOPS_BEFORE(S, ".")\n',
    lambda r, m: "." not in r["S"])
add("stops-loop", "STOPS_AT in a loop (scripted list)", CONSTRAINTS,
    '"Things to pack:\\n"\nfor i in range(3):\n    "-[THING]" where STOPS_AT(THING, "\\n")\n',
    lambda r, m: len(r.values("THING")) == 3,
    lambda r, m: [stopped_at(h, "\n") for h in r.holes])
add("stops-or", "several stopping phrases joined with or", CONSTRAINTS,
    '"Say something:[S]" where STOPS_AT(S, ".") or STOPS_AT(S, "!") or STOPS_AT(S, "\\n")\n',
    lambda r, m: r.holes[0].stopped != "stop" or r["S"][-1] in ".!\n")
add("stops-before-eq", "STOPS_BEFORE on a value fixed by ==", CONSTRAINTS,
    '"The capital of France is[C]" where C == " Paris." and STOPS_BEFORE(C, ".")\n',
    lambda r, m: r["C"] == " Paris" and r.holes[0].stopped == "stop")
add("tokens-lt", "len(TOKENS(X)) < n", CONSTRAINTS,
    '"A poem:[P]" where len(TOKENS(P)) < 5\n', lambda r, m: r.holes[0].n_tokens < 5)
add("tokens-eq", "len(TOKENS(X)) == n", CONSTRAINTS,
    '"A story:[S]" where len(TOKENS(S)) == 3\n', lambda r, m: r.holes[0].n_tokens == 3)
add("chars-lt", "character length len(X) < n", CONSTRAINTS,
    '"A nickname:[N]" where len(N) < 6\n', lambda r, m: len(r["N"]) < 6)
add("words-lt", "len(WORDS(X)) < n", PAPER,
    '"Describe the sky:[D]" where len(WORDS(D)) < 4 and len(TOKENS(D)) < 8\n',
    lambda r, m: len(r["D"].split()) < 4)
add("in-list", "X in [...] choices", CONSTRAINTS,
    '"Is the sky blue? Answer:[A]" where A in [" yes", " no"]\n',
    lambda r, m: r["A"] in (" yes", " no"))
add("in-set", "X in set([...])", CONSTRAINTS,
    '"Pick a number word:[W]" where W in set([" one", " two", " three"])\n',
    lambda r, m: r["W"] in (" one", " two", " three"))
add("in-runtime-list", "X in a list computed by the program", SCRIPTED,
    'options = [" red", " green", " blue"]\n"Favourite colour:[C]" where C in options\n',
    lambda r, m: r["C"] in r["options"])
add("eq-or", "X == a or X == b", CONSTRAINTS,
    '"Coin flip:[C]" where C == " heads" or C == " tails"\n',
    lambda r, m: r["C"] in (" heads", " tails"))
add("int-constraint", "INT(X)", NUMBER,
    '"How many legs does a cat have? Answer:[N]" where INT(N) and len(TOKENS(N)) < 4\n',
    lambda r, m: re.fullmatch(r" ?[0-9]+", r["N"]) is not None)
add("not-in-text", "not \"x\" in X", OVERVIEW,
    '"A word without commas:[W]" where not "," in W and len(TOKENS(W)) < 6\n',
    lambda r, m: "," not in r["W"])
add("regex-constraint", "REGEX(X, pattern)", REGEX,
    '"A date:[D]" where REGEX(D, r" [0-9]{2}/[0-9]{2}")\n',
    lambda r, m: re.fullmatch(r" [0-9]{2}/[0-9]{2}", r["D"]) is not None)
add("and-combined", "conjunction of stop and length", CONSTRAINTS,
    '"A fact:[F]" where STOPS_AT(F, ".") and len(TOKENS(F)) < 8\n',
    lambda r, m: r.holes[0].n_tokens < 8, lambda r, m: stopped_at(r.holes[0], "."))
add("inline-where-several", "different constraints per prompt statement", QSTRING_WHERE,
    '"Q1:[A]" where A in [" yes", " no"]\n"\\nQ2:[B]" where len(TOKENS(B)) < 3\n',
    lambda r, m: r["A"] in (" yes", " no"), lambda r, m: r.holes[1].n_tokens < 3)
add("where-clause-global", "a where clause after the body constrains several holes", STANDALONE,
    'argmax\n    "A:[X]\\nB:[Y]"\nfrom "embedded"\nwhere len(TOKENS(X)) < 3 and Y in [" up", " down"]\n',
    lambda r, m: r.holes[0].n_tokens < 3, lambda r, m: r["Y"] in (" up", " down"))
add("user-function", "a Python function in a constraint", PAPER,
    'def short(s):\n    return len(s) < 12\n"Say hi:[H]" where short(H) and len(TOKENS(H)) < 6\n',
    # a user function is judged on values (not masked eagerly): the result says truthfully
    # whether it held
    lambda r, m: r.holes[0].satisfied == (len(r["H"]) < 12 and r.holes[0].n_tokens < 6), base=False)

# -- types ---------------------------------------------------------------------------------
add("typed-int", "[N: int] typed hole gives an int", TACTICS,
    '"How many days in a week?[N: int]"\n',
    lambda r, m: isinstance(r["N"], int))
add("typed-regex", '[X: r"..."] typed regex hole', TACTICS,
    '"Time: [T: r\'[0-2][0-9]:[0-5][0-9]\']"\n',
    lambda r, m: re.fullmatch(r"[0-2][0-9]:[0-5][0-9]", r["T"]) is not None)
add("typed-regex-nested-quotes", "typed regex hole quoting with its string's own quote", TACTICS,
    '"Name: [NAME: r"[a-z]+"]"\n',
    lambda r, m: re.fullmatch(r"[a-z]+", r["NAME"]) is not None)
add("typed-dataclass", "[P: Person] dataclass type", BLOG_07,
    'from dataclasses import dataclass\n@dataclass\nclass Person:\n    name: str\n    age: int\n'
    '"Alice is 21 years old.\\nAs JSON: [P: Person]"\n',
    lambda r, m: type(r["P"]).__name__ == "Person" and isinstance(r["P"].age, int) and isinstance(r["P"].name, str))
add("typed-float", "[X: float]", TYPES,
    '"Pi is about [X: float]"\n', lambda r, m: isinstance(r["X"], float))
add("type-constraint", "type(X) is int in where", BLOG_07,
    '"Number of moons of Earth:[N]" where type(N) is int\n', lambda r, m: isinstance(r["N"], int))

# -- scripted prompting / control flow ------------------------------------------------------
add("if-branch", "control flow on a hole's value", SCRIPTED,
    '"Is water wet?[A]" where A in [" yes", " no"]\nif A == " yes":\n    "\\nWhy?[W]" where len(TOKENS(W)) < 4\n'
    'else:\n    "\\nWhy not?[W]" where len(TOKENS(W)) < 4\n',
    lambda r, m: ("Why?" in r.prompt) == (r["A"] == " yes"))
add("for-loop-list", "loop building a list of values", SCRIPTED,
    'items = []\nfor i in range(3):\n    "{i+1}.[X]" where STOPS_AT(X, "\\n") and len(TOKENS(X)) < 5\n    items.append(X)\n',
    lambda r, m: len(r["items"]) == 3 and r["items"] == r.values("X"))
add("while-loop", "while loop with a counter", SCRIPTED,
    'n = 0\nwhile n < 2:\n    "Step {n}:[S]" where len(TOKENS(S)) < 3\n    n += 1\n',
    lambda r, m: r["n"] == 2 and len(r.values("S")) == 2)
add("python-between", "Python code between prompts (string ops)", SCRIPTED,
    '"A word:[W]" where len(TOKENS(W)) < 3\nup = W.upper()\n"\\nUpper: {up}"\n',
    lambda r, m: r.prompt.endswith("Upper: " + r["W"].upper()))
add("escapes", "[[ ]] and {{ }} escapes", ESCAPING,
    '"JSON: {{\\"a\\": [[1]]}} then[X]" where len(TOKENS(X)) < 2\n',
    lambda r, m: r.prompt.startswith('JSON: {"a": [1]} then'))
add("multiline-prompt", "triple-quoted multi-line prompt statement", QSTRINGS,
    '"""Line one\nLine two:[X]""" where len(TOKENS(X)) < 3\n',
    lambda r, m: r.prompt.startswith("Line one\nLine two:"))
add("fstring-expr", "{expression} with a call and format", INTERPOLATION,
    'xs = [1, 2, 3]\n"Sum is {sum(xs)}; next:[X]" where len(TOKENS(X)) < 2\n',
    lambda r, m: r.prompt.startswith("Sum is 6; next:"))
add("return-value", "return a value from the query", PYTHON,
    '"Yes or no?[A]" where A in [" yes", " no"]\nreturn A.strip()\n',
    lambda r, m: r.return_value in ("yes", "no") and r.returned)
add("context-prompt", "context.prompt: the prompt so far", BLOG_0665,
    '"Topic:[T]" where len(TOKENS(T)) < 3\nsofar = context.prompt\n',
    lambda r, m: r["sofar"] == "Topic:" + r["T"])
add("input", "await input() in a query", CHAT,
    'q = await input("Question: ")\n"Q: {q}\\nA:[A]" where len(TOKENS(A)) < 3\n',
    lambda r, m: "Q: What is 2+2?" in r.prompt, args={"input_fn": lambda p: "What is 2+2?"})

# -- decoders ------------------------------------------------------------------------------
add("argmax", "argmax decoder", DECODING,
    'argmax\n    "Q: 1+1=[A]" where len(TOKENS(A)) < 3\n', lambda r, m: len(r.results) == 1)
add("argmax-max-len", "decoder argument max_len", DECODER_PARAMS,
    'argmax(max_len=3)\n    "A long essay:[E]"\n', lambda r, m: r.holes[0].n_tokens <= 3)
add("sample-n", "sample(n=2, temperature=...)", DECODING,
    'sample(n=2, temperature=0.8)\n    "A colour:[C]" where len(TOKENS(C)) < 3\n',
    lambda r, m: len(r.results) == 2 and all(not x.violations for x in r.results))
add("beam-n", "beam(n=2)", DECODING,
    'beam(n=2)\n    "A colour:[C]" where len(TOKENS(C)) < 3\n',
    lambda r, m: len(r.results) == 2 and r.results[0].logprob >= r.results[1].logprob)
add("decoder-one-line", "decoder and prompt on one line", BLOG_0665,
    'argmax "Q: Hi[X]" where len(TOKENS(X)) < 2\n', lambda r, m: r.holes[0].n_tokens < 2)
add("distribution", "distribution clause", OVERVIEW_DIST,
    'argmax\n    "Is the sky blue?[ANSWER]"\nfrom "embedded"\ndistribution\n    ANSWER in [" yes", " no"]\n',
    lambda r, m: abs(sum(r.distributions["ANSWER"].values()) - 1) < 1e-6
    and r["ANSWER"] == max(r.distributions["ANSWER"], key=r.distributions["ANSWER"].get))
add("distribution-inline", "inline distribution clause after a prompt", QSTRING_WHERE,
    '"Is fire hot?[A]" distribution A in [" yes", " no"]\n',
    lambda r, m: set(r.distributions["A"]) == {" yes", " no"})
add("distribution-var", "distribution over a runtime list", DIST,
    'labels = [" cat", " dog"]\n"A pet:[P]" distribution P in labels\n',
    lambda r, m: set(r.distributions["P"]) == {" cat", " dog"})

# -- nested queries / tools ------------------------------------------------------------------
NESTED_DEF = ('@lmql.query\ndef yes_no():\n    \'\'\'lmql\n    "(yes or no)[YN]" where YN in [" yes", " no"]\n'
              '    return YN.strip()\n    \'\'\'\n')
add("nested-query", "nested query as a hole type", NESTED,
    'import lmql\n' + NESTED_DEF + '"Is ice cold? [ANSWER: yes_no()]"\n',
    lambda r, m: r["ANSWER"] in ("yes", "no") and r.holes[-1].stopped == "nested")
add("nested-query-no-call", "nested query without parentheses", NESTED,
    'import lmql\n' + NESTED_DEF + '"Is ice cold? [ANSWER: yes_no]"\n',
    lambda r, m: r["ANSWER"] in ("yes", "no"))
add("nested-args", "nested query with arguments", NESTED,
    'import lmql\n@lmql.query\ndef pick(opts):\n    \'\'\'lmql\n    "Pick:[C]" where C in opts\n    return C\n    \'\'\'\n'
    '"Choose [X: pick([\' a\', \' b\'])]"\n',
    lambda r, m: r["X"] in (" a", " b"))
add("nested-decoder-after-defs", "@lmql.query definitions before the decoder clause", NESTED,
    'import lmql\n' + NESTED_DEF + 'argmax\n    "Is snow white? [A: yes_no()]"\nfrom "embedded"\n',
    lambda r, m: r["A"] in ("yes", "no"))
add("tool-call", "calling a Python function (tool) on a hole's value", TOOLS,
    'def calc(expr):\n    return str(eval(expr, {}, {}))\n"Compute 2*3 = [E]" where E in [" 2*3"]\n"= {calc(E)}"\n',
    lambda r, m: r.prompt.endswith("= 6"))
add("tool-decorator", "post-processing decorator on a hole", DECORATORS,
    'def shout(v):\n    return v.upper()\n"Say hi:[@shout H]" where len(TOKENS(H)) < 3\n',
    lambda r, m: r["H"] == r["H"].upper())
add("decorator-context", "decorator with (value, context)", DECORATORS,
    'import lmql\ndef tag(value, context):\n    return value.strip() + "|" + str(len(context.prompt))\n'
    '"X:[@tag V]" where len(TOKENS(V)) < 3\n',
    lambda r, m: "|" in r["V"])
add("decorator-pre", "pre decorator supplying a value", DECORATORS,
    'import lmql\n@lmql.decorators.pre\ndef fixed(variable, context):\n    return " 42"\n"Answer:[@fixed A]"\n',
    lambda r, m: r["A"] == " 42" and r.holes[0].stopped == "supplied")
add("decorator-streaming", "streaming decorator sees partial values", DECORATORS,
    'import lmql\nseen = []\n@lmql.decorators.streaming\ndef watch(value, context):\n    seen.append(value)\n'
    '"Go:[@watch G]" where len(TOKENS(G)) < 4\nn_seen = len(seen)\n',
    lambda r, m: r["n_seen"] >= 1)

# -- chat ----------------------------------------------------------------------------------
add("chat-roles", "{:system}/{:user}/{:assistant} through the chat template", CHAT,
    '"{:system}You are terse."\n"{:user}Say hi."\n"{:assistant}[A]" where len(TOKENS(A)) < 4\n',
    lambda r, m: [s.name for s in r.segments if s.kind == "role"] == ["system", "user", "assistant"])
add("chat-multiturn", "two chat turns in a loop", CHAT,
    'for q in ["Hi.", "Bye."]:\n    "{:user}{q}"\n    "{:assistant}[A]" where len(TOKENS(A)) < 3\n',
    lambda r, m: len(r.values("A")) == 2)

# -- models --------------------------------------------------------------------------------
add("from-model-call", "from lmql.model(...) with keyword options", MODEL_LOADING,
    'import lmql\nargmax\n    "Q: Hi[X]" where len(TOKENS(X)) < 2\nfrom lmql.model("local:gpt2", cuda=True)\n',
    lambda r, m: r.holes[0].n_tokens < 2, args={"model": None})
add("from-variable", "from a variable holding the model", MODEL_SPEC,
    'argmax\n    "Q: Hi[X]" where len(TOKENS(X)) < 2\nfrom m\n',
    lambda r, m: r.holes[0].n_tokens < 2, args={"model": None, "m": "MODEL"})

# -- Python API (programs are Python using the lmql module) -----------------------------------
add("py-query-decorator", "@lmql.query function returning a value", PYTHON,
    'import lmql\n@lmql.query\ndef capital(country):\n    \'\'\'lmql\n    "The capital of {country} is[C]" where C in [" Paris", " Rome"]\n'
    '    return C\n    \'\'\'\nRESULT = capital("France")\n',
    lambda r, m: r["RESULT"] in (" Paris", " Rome"), python=True)
add("py-query-result", "@lmql.query without return gives the result object", PYTHON,
    'import lmql\n@lmql.query\ndef ask():\n    \'\'\'lmql\n    "Colour:[C]" where len(TOKENS(C)) < 3\n    \'\'\'\nRESULT = ask()\n',
    lambda r, m: isinstance(r["RESULT"], __import__("tether").lang.QueryResult), python=True)
add("py-run", "lmql.run_sync on query text with a keyword", PYTHON,
    'import lmql\nRESULT = lmql.run_sync(\'"Hello {name}:[X]" where len(TOKENS(X)) < 3\\nreturn X\', name="Bob")\n',
    lambda r, m: isinstance(r["RESULT"], str), python=True)
add("py-run-async", "await lmql.run(...)", PYTHON,
    'import asyncio, lmql\nRESULT = asyncio.run(lmql.run(\'"Q:[X]" where X in [" a", " b"]\\nreturn X\'))\n',
    lambda r, m: r["RESULT"] in (" a", " b"), python=True)
add("py-F", "lmql.F lambda query", PYTHON,
    'import lmql\nsummarize = lmql.F("Summarize: {text}\\nSummary:[S]", "len(TOKENS(S)) < 4")\n'
    'RESULT = summarize(text="A long day at the sea.")\n',
    lambda r, m: isinstance(r["RESULT"], str), python=True)
add("py-async-query", "async @lmql.query awaited", PYTHON,
    'import asyncio, lmql\n@lmql.query\nasync def q():\n    \'\'\'lmql\n    "Pick:[X]" where X in [" up", " down"]\n    return X\n    \'\'\'\n'
    'RESULT = asyncio.run(q())\n',
    lambda r, m: r["RESULT"] in (" up", " down"), python=True)
add("py-query-decoder-kw", "@lmql.query(decoder=..., n=...) keywords", PY_CONFIG,
    'import lmql\n@lmql.query(decoder="sample", n=2, temperature=0.7)\ndef q():\n    \'\'\'lmql\n'
    '    "A word:[W]" where len(TOKENS(W)) < 3\n    \'\'\'\nRESULT = q()\n',
    lambda r, m: isinstance(r["RESULT"], list) and len(r["RESULT"]) == 2, python=True)
add("py-model", "lmql.model(...) object passed to a query", PY_CONFIG,
    'import lmql\n@lmql.query(model=lmql.model("openai/gpt-3.5-turbo-instruct"))\ndef q():\n    \'\'\'lmql\n'
    '    "Q:[X]" where X in [" a", " b"]\n    return X\n    \'\'\'\nRESULT = q()\n',
    lambda r, m: r["RESULT"] in (" a", " b"), python=True)

_ = json  # (programs may build JSON text)
