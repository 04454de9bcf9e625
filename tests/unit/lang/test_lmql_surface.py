"""LMQL's surface beyond the paper: ``context``, ``import lmql``, ``from <expression>``,
uppercase clauses, the inline distribution clause, nested quotes in typed holes,
stop phrases with ``==`` / ``or`` / TOKENS, two-argument and streaming decorators,
``return`` vs the result, chat roles through the model's template (rule-driven model)."""

from __future__ import annotations

import asyncio

import pytest
from lang_rule_model import rule_model

from tether.compat import lmql as compat_lmql
from tether.errors import QuerySyntaxError
from tether.lang import load_query, query, run_query
from tether.lang.syntax import fix_hole_quotes, parse_query


def test_context_prompt_is_the_trace_so_far() -> None:
    m = rule_model({"Q:": " hi\n"})
    r = run_query('"Q:[X]" where STOPS_AT(X, "\\n")\nseen = context.prompt\n"{len(seen)}"', model=m)
    assert r["seen"] == "Q: hi\n"
    assert r.prompt == "Q: hi\n6"


def test_import_lmql_inside_a_query_is_tethers_surface() -> None:
    m = rule_model({"Q:": " yes"})
    text = ("import lmql\nfrom lmql import F\n@lmql.query\ndef inner():\n    '''lmql\n    \"Q:[Y]\" where Y in [\" yes\", \" no\"]\n"
            "    return Y\n    '''\nargmax\n    \"A [X: inner()]\"\nfrom \"embedded\"\n")
    r = run_query(text, model=m)
    assert r["X"] == " yes" and r.holes[-1].stopped == "nested"
    assert r.prompt == "A  yes"


def test_from_clause_takes_an_expression_and_run_model_overrides_it(capsys: pytest.CaptureFixture[str]) -> None:
    m = rule_model({"Q:": " ok"})
    q = load_query('argmax\n    "Q:[X]" where X in [" ok", " no"]\nfrom lmql.model("openai/gpt-4", temperature=0)\n')
    assert q.qast.model is None and q.qast.model_expr is not None
    assert q.run(model=m)["X"] == " ok"  # Query.run(model=...) overrides the from clause
    assert capsys.readouterr().err == ""  # the from expression was not even evaluated
    name = "some_model"
    q2 = load_query('argmax\n    "Q:[X]"\nFROM name\n', env={"name": m})
    assert q2.run()["X"] == " ok"
    with pytest.raises(QuerySyntaxError, match="from clause"):
        parse_query('argmax\n    "Q:[X]"\nfrom 3 +\n')
    assert name


def test_uppercase_clauses_and_inline_distribution() -> None:
    m = rule_model({"Q:": " no"})
    r = run_query('ARGMAX\n    "Q:[X]"\nFROM "embedded"\nWHERE len(TOKENS(X)) < 3\nDISTRIBUTE X OVER [" yes", " no"]\n',
                  model=m)
    assert r["X"] == " no" and abs(sum(r.distributions["X"].values()) - 1) < 1e-9
    r2 = run_query('"Q:[X]" distribution X in [" yes", " no"]\n', model=m)
    assert r2["X"] == " no" and set(r2.distributions["X"]) == {" yes", " no"}
    qa = parse_query('"Q:[X]" distribution X in [" a", " b"]  # note\n')
    assert qa.distribute is not None and qa.distribute[0] == "X"


def test_nested_quotes_in_a_typed_regex_hole() -> None:
    assert fix_hole_quotes('"N: [NAME: r"[a-z]+"] ok"') == "\"N: [NAME: r'[a-z]+'] ok\""
    assert fix_hole_quotes("'[[not a hole]] \"x\"'") == "'[[not a hole]] \"x\"'"
    m = rule_model({"N:": " bob42"})
    r = run_query('"N:[NAME: r" [a-z]+"]"\n', model=m)
    assert r["NAME"] == " bob"


def test_stops_before_applies_to_a_value_fixed_by_equality() -> None:
    m = rule_model({"City:": " Paris."})
    r = run_query('"City:[C]" where C == " Paris." and STOPS_BEFORE(C, ".")', model=m)
    assert r["C"] == " Paris" and r.holes[0].stopped == "stop" and r.holes[0].satisfied


def test_stops_at_inside_or_stops() -> None:
    m = rule_model({"S:": " one two! three four five six seven"})
    r = run_query('"S:[S]" where STOPS_AT(S, ".") or STOPS_AT(S, "!")', model=m)
    assert r["S"] == " one two!" and r.holes[0].stopped == "stop"


def test_token_count_excludes_a_cut_stopping_token() -> None:
    m = rule_model({"S:": " one two three.\n"})
    r = run_query('"S:[S]" where STOPS_BEFORE(S, ".\\n")', model=m)
    h = r.holes[0]
    assert r["S"] == " one two three"
    assert h.n_tokens == len(m.tokenize(h.text, add_bos=False))


def test_len_tokens_equal_is_a_budget() -> None:
    m = rule_model({"S:": " one two three four five six"})
    r = run_query('"S:[S]" where len(TOKENS(S)) == 4', model=m)
    assert r.holes[0].n_tokens == 4 and r.holes[0].satisfied


def test_decorators_with_context_and_streaming() -> None:
    m = rule_model({"Q:": " abc"})
    seen: list[str] = []

    @compat_lmql.decorators.pre
    def ask(variable, context):  # noqa: ANN001, ANN202
        seen.append(context.prompt)
        return variable

    def shout(value, context):  # noqa: ANN001, ANN202
        return value.upper() + str(len(context.prompt))

    @compat_lmql.decorators.streaming
    def stream(value, context):  # noqa: ANN001, ANN202
        seen.append("s:" + value)

    r = run_query('"Q:[@ask @stream @shout X]" where len(TOKENS(X)) < 4', model=m,
                  ask=ask, stream=stream, shout=shout)
    assert seen[0] == "Q:" and any(s.startswith("s:") for s in seen)
    assert r["X"] == r.holes[0].value and r["X"].startswith(" ABC")


def test_return_value_vs_result() -> None:
    m = rule_model({"Q:": " yes"})

    @compat_lmql.query(model=m)
    def with_return():
        '''lmql
        "Q:[X]" where X in [" yes", " no"]
        return X
        '''

    @compat_lmql.query(model=m)
    def bare_return():
        '''lmql
        "Q:[X]" where X in [" yes", " no"]
        return
        '''

    assert with_return() == " yes"
    res = bare_return()
    assert isinstance(res, compat_lmql.LMQLResult) and res["X"] == " yes"


def test_nested_docstring_query_without_marker() -> None:
    m = rule_model({"Q:": " yes"})

    def outer():  # noqa: ANN202
        @query(model=m)
        def inner():
            '''
            "Q:[X]" where X in [" yes", " no"]
            return X
            '''
        return inner

    assert outer()().return_value == " yes"


def test_async_query_and_run() -> None:
    m = rule_model({"Q:": " no"})

    @compat_lmql.query(model=m)
    async def ask():
        '''lmql
        "Q:[X]" where X in [" yes", " no"]
        return X
        '''

    assert asyncio.run(ask()) == " no"
    assert asyncio.run(compat_lmql.run('"Q:[X]" where X in [" yes", " no"]\nreturn X', model=m)) == " no"


def test_F_function() -> None:
    m = rule_model({"about": " Paris"})
    f = compat_lmql.F("Tell me about {topic}:[A]", "A in [' Paris', ' Lyon']", model=m)
    assert f(topic="France") == " Paris"
    assert f("France") == " Paris"


def test_chat_roles_use_the_models_template() -> None:
    m = rule_model({"<turn model>\n": "Hi there"})
    m.chat_template = ("{% for m in messages %}<turn {{ m.role }}>\n{{ m.content }}<end>\n{% endfor %}"
                       "{% if add_generation_prompt %}<turn model>\n{% endif %}")
    seen: list[list[int]] = []
    orig = m.logits

    def spy(toks):  # noqa: ANN001, ANN202
        seen.append(list(toks))
        return orig(toks)

    m.logits = spy  # type: ignore[method-assign]
    r = run_query('"{:user}Say hi\\n"\n"{:model}[A]" where len(TOKENS(A)) < 4', model=m)
    prompt = m.vocabulary.decode(seen[0]).decode()
    assert "<turn user>\nSay hi<end>\n<turn model>\n" in prompt and "User:" not in prompt
    assert r["A"].startswith("Hi")


def test_install_is_opt_in_and_reversible() -> None:
    import importlib.util
    import sys

    real = importlib.util.find_spec("lmql") is not None
    assert sys.modules.get("lmql") is None or real
    ok = compat_lmql.install()
    try:
        assert ok is (not real)
        if ok:
            import lmql  # type: ignore[import-not-found]

            assert lmql.F is compat_lmql.F
            from lmql.decorators import pre  # type: ignore[import-not-found]

            assert pre is compat_lmql.decorators.pre
    finally:
        compat_lmql.uninstall()
    assert "lmql" not in sys.modules or real


def test_unsupported_parts_name_the_construct_and_line() -> None:
    m = rule_model({"Q:": " yes"})
    with pytest.raises(compat_lmql.LMQLUnsupportedError, match=r"lmql\.serve_model \(<query-\d+>:2\).*LMTP"):
        run_query('"Q:[X]" where X in [" yes"]\nlmql.serve_model("x")\n', model=m)
    with pytest.raises(QuerySyntaxError, match="unknown decoder 'best_k'.*line 1"):
        load_query('best_k(n=2)\n    "Q:[X]"\n')
    with pytest.raises(AttributeError):
        compat_lmql.score_sync  # noqa: B018


def test_lmql_runtime_decoder_options_are_accepted_and_noted(capsys: pytest.CaptureFixture[str]) -> None:
    m = rule_model({"Q:": " yes"})
    r = run_query('argmax(verbose=True, chunksize=4, max_len=8)\n    "Q:[X]" where X in [" yes", " no"]\n', model=m)
    assert r["X"] == " yes"
    assert "verbose=..." in capsys.readouterr().err

    @compat_lmql.query(model=m, verbose=True)
    def q():
        '''lmql
        "Q:[X]" where X in [" yes", " no"]
        return X
        '''

    assert q() == " yes"
    with pytest.raises(QuerySyntaxError, match="bogus"):
        load_query('argmax(bogus=1)\n    "Q:[X]"\n')


def test_generate_sync_and_async() -> None:
    m = rule_model({"Once": " upon a time"})
    out = compat_lmql.generate_sync("Once", max_tokens=3, model=m)
    assert isinstance(out, str) and 0 < len(m.tokenize(out, add_bos=False)) <= 3
    assert asyncio.run(compat_lmql.generate("Once", max_tokens=3, model=m)) == out
    with pytest.raises(ValueError, match="generate"):
        compat_lmql.generate_sync("Once", max_tokens=3, model=m, bogus=1)


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TEXT = st.lists(st.sampled_from([*'"\'[]{}:r az_\\\n#@', "distribution ", " in ", "X", '"Q:[X]" ']),
                 max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_source_rewrites_keep_columns_and_never_raise(src: str) -> None:
    from tether.lang.syntax import split_inline_distribution

    fixed = fix_hole_quotes(src)
    assert len(fixed) == len(src)
    assert all(a == b or {a, b} == {'"', "'"} for a, b in zip(src, fixed, strict=True))
    out, found = split_inline_distribution(src)
    assert len(out) == len(src) and out.count("\n") == src.count("\n")
    if found is None:
        assert out == src


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["from", "FROM"]), st.sampled_from(["where", "WHERE"]),
       st.sampled_from(["argmax", "ARGMAX", "argmax(max_len=4)"]), st.integers(1, 9))
def test_clause_keywords_in_either_case_parse_alike(fr: str, wh: str, dec: str, n: int) -> None:
    q = parse_query(f'{dec}\n    "Q:[X]"\n{fr} "embedded"\n{wh} len(TOKENS(X)) < {n}\n')
    assert q.model == "embedded" and q.where is not None and q.decoder is not None
    assert q.decoder.method == "argmax"


def test_hole_quote_rewrite_is_linear_on_hostile_text() -> None:
    import time

    for src in ['"' + "[a: " * 50000 + '"', ('"[a: r"x"]"\n') * 30000]:
        t = time.perf_counter()
        assert len(fix_hole_quotes(src)) == len(src)
        assert time.perf_counter() - t < 5.0


def test_a_from_expression_that_fails_names_the_clause_and_line() -> None:
    from tether.errors import ModelError

    with pytest.raises(ModelError, match="from clause at line 3.*NameError"):
        load_query('argmax\n    "Q:[X]"\nfrom no_such_model\n').run()
    with pytest.raises(ModelError, match="from clause at line 3.*gave int"):
        load_query('argmax\n    "Q:[X]"\nfrom 1 + 2\n').run()


_WORDS = st.lists(st.sampled_from([" one", " two", " three", ".", "!", " five", " star"]), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(_WORDS, st.lists(st.sampled_from([".", "!", " two"]), min_size=1, max_size=3, unique=True))
def test_stops_in_or_end_at_the_first_phrase_or_not_at_all(words: list[str], phrases: list[str]) -> None:
    cont = "".join(words)
    m = rule_model({"S:": cont})
    cond = " or ".join(f"STOPS_AT(S, {p!r})" for p in phrases)
    r = run_query(f'"S:[S]" where ({cond}) and len(TOKENS(S)) < 12', model=m)
    h = r.holes[0]
    if h.stopped == "stop":
        assert any(h.text.endswith(p) for p in phrases)
        first = min((h.text.find(p) + len(p) for p in phrases if p in h.text), default=-1)
        assert first == len(h.text)  # the first occurrence of any phrase ends the hole
    else:
        assert not any(p in h.text for p in phrases)
    assert h.n_tokens < 12 and h.satisfied


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([" Paris", " Lyon", " Rome"]), st.sampled_from([".", "!"]))
def test_stops_before_removes_the_phrase_from_a_fixed_value(city: str, end: str) -> None:
    m = rule_model({"City:": city + end})
    r = run_query(f'"City:[C]" where C == {city + end!r} and STOPS_BEFORE(C, {end!r})', model=m)
    assert r["C"] == city and r.holes[0].satisfied and r.holes[0].stopped == "stop"


class FakeChatHTTPModel:
    """A black-box model with a chat endpoint and a completion endpoint (records requests)."""

    def __init__(self) -> None:
        from tether.models.base import Costs

        self.costs = Costs()
        self.name = "fake-chat"
        self.black_box = True
        self.chats: list[list[dict[str, str]]] = []
        self.completions: list[str] = []

    def chat(self, messages, **params):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN003, ANN201
        self.chats.append(list(messages))
        return {"choices": [{"message": {"content": "Hello there"}, "finish_reason": "stop"}], "usage": {}}

    def complete(self, prompt, **params):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN003, ANN201
        self.completions.append(prompt)
        return {"choices": [{"text": " plain", "finish_reason": "stop"}], "usage": {}}


def test_chat_roles_on_a_black_box_model_go_through_its_chat_interface() -> None:
    m = FakeChatHTTPModel()
    r = run_query('"{:system}Be brief."\n"{:user}Say hello."\n"{:assistant}[A]"\n"{:user}Again.[B]"', model=m)
    assert r["A"] == "Hello there"
    assert m.chats == [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]]
    assert r["B"] == " plain" and len(m.completions) == 1  # a hole inside a user turn: the plain trace
