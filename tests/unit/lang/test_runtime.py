"""The runtime on a deterministic rule-driven model: holes, constraints, control flow,
decoders (argmax, sample(n), scripted beam(n)), distribute, nested queries, costs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from lang_rule_model import rule_model

from tether.errors import ConstraintError, QuerySyntaxError
from tether.lang import load_query, query, run_query


def test_stops_at_keeps_phrase_and_stops_before_drops_it() -> None:
    m = rule_model({"Q:": " hello world. more text"})
    r = run_query('"Q:[X]" where STOPS_AT(X, ".")', model=m)
    assert r["X"] == " hello world." and r.prompt == "Q: hello world."
    r2 = run_query('"Q:[X]" where STOPS_BEFORE(X, ".")', model=m)
    assert r2["X"] == " hello world"
    assert r2.holes[0].stopped == "stop"


def test_token_budget() -> None:
    m = rule_model({"Q:": " one two three four five"})
    r = run_query('"Q:[X]" where len(TOKENS(X)) < 3', model=m)
    assert r.holes[0].n_tokens == 2 and r.holes[0].stopped == "budget"


def test_gated_stop_does_not_fire_before_the_length_holds() -> None:
    m = rule_model({"S:": "a. b. c. d. e. f. g. h."})
    r = run_query('"S:[S]" where len(TOKENS(S)) > 5 and STOPS_AT(S, ".")', model=m)
    assert r["S"].endswith(".") and r.holes[0].n_tokens > 5
    assert r["S"] != "a."


def test_in_list_masks_to_the_choices() -> None:
    m = rule_model({"City:": " Berlin"})
    r = run_query('"City:[C]" where C in [" Paris", " Lyon"]', model=m)
    assert r["C"] in (" Paris", " Lyon")
    m2 = rule_model({"City:": " Lyon!"})
    assert run_query('"City:[C]" where C in [" Paris", " Lyon"]', model=m2)["C"] == " Lyon"


def test_equality_or_and_char_length() -> None:
    m = rule_model({"ok?": " nope", "nick:": " abcdefghij\n"})
    r = run_query('"ok?[OK]" where OK == " yes" or OK == " no"\n"nick:[N]" where len(N) < 5', model=m)
    assert r["OK"] in (" yes", " no")
    assert len(r["N"]) < 5


def test_typed_int_and_regex_holes() -> None:
    m = rule_model({"legs: ": "42 legs", "time: ": "12:30 pm"})
    r = run_query('"legs: [N: int]\\n"\n"time: [T: r\'[0-2][0-9]:[0-5][0-9]\']"\n"{N * 2}"', model=m)
    assert r["N"] == 42 and r["T"] == "12:30"
    assert r.prompt.endswith("84")


def test_int_constraint_with_words_model() -> None:
    m = rule_model({"year:": " about 1990"})
    r = run_query('"year:[Y]" where INT(Y) and len(TOKENS(Y)) < 4', model=m)
    import re
    assert re.fullmatch(r" ?[0-9]+", r["Y"]) and r.holes[0].n_tokens < 4


def test_control_flow_and_runtime_list() -> None:
    m = rule_model({"- ": "abc\n", "best: ": "ab"})
    src = ('"List:\\n"\nitems = []\nfor i in range(2):\n    "- [T]\\n" where STOPS_BEFORE(T, "\\n")\n'
           '    items.append(T)\n"best: [B]" where B in items\n')
    r = run_query(src, model=m)
    assert r["items"] == ["abc", "abc"] and r["B"] == "abc"
    assert r.values("T") == ["abc", "abc"]


def test_sample_n_runs_each_branch_with_its_own_control_flow() -> None:
    m = rule_model({})
    src = ('sample(n=4, temperature=2.0)\n"Pick:[A]" where A in [" blue", " green"]\n'
           'if A == " blue":\n    "[B]" where B in [" sky"]\nelse:\n    "[B]" where B in [" x"]\n')
    r = load_query(src).run(model=m, seed=1)
    assert len(r.results) == 4
    for res in r.results:
        assert (res["A"], res["B"]) in ((" blue", " sky"), (" green", " x"))


def test_beam_returns_n_traces_best_first_and_replays_control_flow() -> None:
    m = rule_model({"Q:": " yes"})
    src = ('beam(n=2)\n    "Q:[A]" where A in [" yes", " no"]\n    k = len(A)\n'
           '    "[B]" where B in [" x", " sky"]\n')
    r = load_query(src).run(model=m)
    assert len(r.results) == 2
    assert r.results[0].logprob >= r.results[1].logprob
    for res in r.results:
        assert res["k"] == len(res["A"]) and res["B"] in (" x", " sky")
        assert res.prompt == "Q:" + res["A"] + res["B"]


def test_distribute_scores_every_value() -> None:
    m = rule_model({"A:": " three stars"})
    src = 'argmax\n    "A:[V]"\ndistribution\n    V in [" one star", " three stars", " five stars"]\n'
    r = load_query(src).run(model=m)
    d = r.distributions["V"]
    assert math.isclose(sum(d.values()), 1.0) and all(p >= 0 for p in d.values())
    assert r["V"] == " three stars" == max(d, key=d.get)
    assert r.prompt == "A: three stars"
    r2 = run_query('argmax\n    "A:[V]"\ndistribute\n    V over OPTS\n', model=m, OPTS=[" one star", " three stars"])
    assert r2["V"] == " three stars"


def test_nested_query_return_value_fills_the_hole() -> None:
    m = rule_model({"from ": " Lyon"})
    src = ("@lmql.query\ndef pick(options):\n    '''lmql\n    \"Pick from {options}:[C]\" where C in options\n"
           "    return C.strip()\n    '''\n\"A: [P: pick([' Paris', ' Lyon'])]\\n\"\n\"So {P}.\"\n")
    r = run_query(src, model=m)
    assert r["P"] in ("Paris", "Lyon")
    assert r.prompt == f"A: {r['P']}\nSo {r['P']}."


def test_nested_query_without_return_splices_its_text() -> None:
    m = rule_model({".": " step\n"})
    src = ("@lmql.query\ndef steps(k):\n    '''lmql\n    for i in range(k):\n"
           "        \"{i+1}.[S]\\n\" where STOPS_BEFORE(S, \"\\n\")\n    '''\n\"Plan:\\n[PLAN: steps(2)]\"\n")
    r = run_query(src, model=m)
    assert r["PLAN"] == "1. step\n2. step\n" and r.prompt == "Plan:\n1. step\n2. step\n"


def test_pre_and_post_decorators() -> None:
    m = rule_model({"replied:": " aye aye\n"})
    src = ('def shout(v):\n    return v.strip().upper()\n\n@lmql.decorators.pre\ndef fixed(var):\n'
           '    return {"G": "Hello"}.get(var.name, var)\n\n"[@fixed G], said.\\n"\n'
           '"replied:[@shout R]" where STOPS_AT(R, "\\n")\n')
    r = run_query(src, model=m)
    assert r["G"] == "Hello" and r["R"] == "AYE AYE"
    assert r.prompt == "Hello, said.\nreplied:AYE AYE"


def test_roles_and_input() -> None:
    # the model sees its own chat template (the scripted one writes "role: content")
    m = rule_model({"assistant: ": "hi there\n", "Assistant:": " labels\n"})
    src = ('argmax\n    "{:system} Be terse."\n    "{:user} {await input()}"\n'
           '    "{:assistant}[R]" where STOPS_BEFORE(R, "\\n")\n')
    answers = iter(["hello"])
    r = load_query(src).run(model=m, input_fn=lambda p: next(answers))
    assert r["R"] == "hi there"
    assert r.prompt == "System: Be terse.\nUser: hello\nAssistant:hi there"
    # explicit chat_roles labels: the model sees the labelled trace instead
    answers = iter(["hello"])
    labels = {"system": "System:", "user": "User:", "assistant": "Assistant:"}
    r2 = load_query(src).run(model=m, input_fn=lambda p: next(answers), chat_roles=labels)
    assert r2.prompt == "System: Be terse.\nUser: hello\nAssistant: labels"
    assert [s.kind for s in r.segments].count("role") == 3


def test_costs_count_generate_calls_and_billable_tokens() -> None:
    m = rule_model({"Q:": " a.", "R:": " b."})
    r = run_query('"Q:[A]\\n" where STOPS_AT(A, ".")\n"R:[B]" where STOPS_AT(B, ".")', model=m)
    c = r.costs
    assert c.generate_calls == 2
    # token healing took each prompt's ":" back; each hole wrote it again (a token generated
    # and billed, not part of the value)
    assert c.generated_tokens == sum(h.n_tokens for h in r.holes) + 2
    unhealed = load_query('"Q:[A]\\n" where STOPS_AT(A, ".")\n"R:[B]" where STOPS_AT(B, ".")').run(
        model=m, decoder="argmax(healing=False)")
    assert unhealed.prompt == r.prompt and unhealed.costs.generated_tokens == sum(h.n_tokens for h in unhealed.holes)
    assert c.model_calls >= c.generated_tokens
    assert c.billable_tokens == c.prompt_tokens + c.generated_tokens


def test_query_decorator_on_python_function_body() -> None:
    m = rule_model({"capital of ": "France is Paris."})

    @query(model=m)
    def capital(country):
        "The capital of {country} is[C]"

    r = capital("France")
    assert r.prompt.startswith("The capital of France is") and isinstance(r["C"], str)


def test_unsatisfiable_constraint_is_reported_not_raised() -> None:
    m = rule_model({})
    r = run_query('"x[A]" where A == "" and len(A) > 3', model=m, max_tokens=4)
    assert r.violations


def test_runtime_errors_point_into_the_query() -> None:
    m = rule_model({})
    with pytest.raises(ZeroDivisionError) as e:
        load_query('"a"\nx = 1 / 0\n', filename="q.lmql").run(model=m)
    tb = e.value.__traceback__
    lines = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "q.lmql":
            lines.append(tb.tb_lineno)
        tb = tb.tb_next
    assert lines == [2]


def test_regex_holes_use_engine_masks_and_agree_with_follow_checks() -> None:
    import ast

    from tether.lang.holes import HoleMatcher, VocabInfo

    m = rule_model({"code: ": "AB-123 is it"})
    e = ast.parse('REGEX(C, r"[A-Z]{2}-[0-9]{3}")', mode="eval").body
    hole = HoleMatcher(m, VocabInfo.of(m), "C", e, {}, frozenset())
    assert hole.matchers, "the regex should compile to an engine matcher"
    allowed = set(hole.candidates().tolist())
    follow_ok = {t for t in range(m.vocabulary.size) if hole.accepts(t)}
    eos = set(m.eos_ids)
    assert follow_ok - eos <= allowed  # sound: the engine never masks what Follow allows
    assert follow_ok - eos  # and Follow allows some
    src = '"code: [C]" where REGEX(C, r"[A-Z]{2}-[0-9]{3}")'
    with_engine = run_query(src, model=m)
    without = load_query(src).run(model=m, decoder="argmax(engine=False)")
    assert with_engine["C"] == without["C"] == "AB-123"


def test_sample_branches_batched_or_not_give_the_same_traces() -> None:
    m = rule_model({})
    src = 'sample(n=3, temperature=1.5)\n"Pick:[A]" where A in [" blue", " green", " grey"]\n"[B]" where len(B) < 4\n'
    a = load_query(src).run(model=m, seed=7)
    b = load_query(src).run(model=m, seed=7, decoder="sample(n=3, temperature=1.5, batch=False)")
    assert [r.prompt for r in a.results] == [r.prompt for r in b.results]


class FakeHTTPModel:
    """A black-box model (no logits): completions from a table, stop phrases applied."""

    def __init__(self, replies: dict[str, str]) -> None:
        from tether.models.base import Costs

        self.costs = Costs()
        self.name = "fake-http"
        self.black_box = True
        self.replies = replies
        self.requests: list[dict] = []

    def complete(self, prompt: str, **params):  # type: ignore[no-untyped-def]
        self.requests.append(params)
        text = next((v for k, v in self.replies.items() if prompt.endswith(k)), "")
        finish = "stop"
        for s in params.get("stop") or []:
            if s in text:
                text = text[: text.index(s)]
        if len(text) > params.get("max_tokens", 99):
            text, finish = text[: params["max_tokens"]], "length"
        self.costs.model_calls += 1
        return {"choices": [{"text": text, "finish_reason": finish}], "usage": {}}


def test_black_box_model_gets_stops_and_budget_and_results_are_validated() -> None:
    m = FakeHTTPModel({"Q:": " Paris. And more", "Z:": " 12 apples"})
    r = run_query('"Q:[A]\\n" where STOPS_AT(A, ".") and len(TOKENS(A)) < 9\n"Z:[N]" where INT(N)', model=m)
    assert r["A"] == " Paris." and r.holes[0].stopped == "stop"
    assert m.requests[0]["stop"] == ["."] and m.requests[0]["max_tokens"] == 8
    assert r.costs.generate_calls == 2
    assert not r.holes[1].satisfied  # the server ignored the INT constraint: reported
    with pytest.raises(Exception, match="beam"):
        load_query('beam(n=2)\n    "Q:[A]"\n').run(model=m)


def test_distribute_batched_scores_equal_sequential_scores() -> None:
    m = rule_model({"A:": " three stars"})
    src = 'argmax\n    "A:[V]"\ndistribution\n    V in [" one star", " three stars", " five stars", " x"]\n'
    a = load_query(src).run(model=m)
    b = load_query(src).run(model=m, decoder="argmax(batch=False)")
    for k, p in a.distributions["V"].items():
        assert math.isclose(p, b.distributions["V"][k], rel_tol=1e-5)
    assert a.costs.model_calls < b.costs.model_calls


def test_constraints_read_earlier_holes_as_fixed_values() -> None:
    m = rule_model({"x:": " no", "y:": " yes"})
    r = run_query('"x:[A]\\n" where A in [" yes", " no"]\n"y:[B]" where B == A', model=m)
    assert r["A"] == " no" and r["B"] == " no"  # B is masked to A's value, whatever the model wants


def test_where_clause_sees_module_functions_and_reports_typos() -> None:
    def short(s: str) -> bool:
        return len(s) < 4

    ok = load_query('"Q:[A]" where short(A)', env={"short": short}).run(model=rule_model({"Q:": " ab"}))
    assert ok["A"] == " ab" and ok.holes[0].satisfied
    # a user function is var until the value is final (Table 1): it can only mask EOS
    bad = load_query('"Q:[A]" where short(A)', env={"short": short}).run(model=rule_model({"Q:": " abcdef"}), max_tokens=6)
    assert bad.holes[0].stopped in ("budget", "masked") and not bad.holes[0].satisfied
    with pytest.raises(ConstraintError, match="STOPS_AT"):
        run_query('"Q:[A]" where STOPS_ATT(A, ".")', model=rule_model({}))


def test_beam_replays_only_branches_that_survive_and_share_a_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    runtime = importlib.import_module("tether.lang.runtime")
    forks = []
    orig = runtime.Execution.fork

    def counting_fork(self, answer):  # type: ignore[no-untyped-def]
        forks.append(answer)
        return orig(self, answer)

    monkeypatch.setattr(runtime.Execution, "fork", counting_fork)
    m = rule_model({"Q:": " yes", "R:": " sky"})
    src = 'beam(n=1)\n    "Q:[A]\\n" where A in [" yes", " no"]\n    "R:[B]" where B in [" x", " sky"]\n'
    r = load_query(src).run(model=m)
    assert r["A"] == " yes" and r["B"] == " sky" and forks == []
    load_query(src.replace("n=1", "n=2")).run(model=m)
    assert 0 < len(forks) <= 4


def test_awaited_nested_query_returns_its_value() -> None:
    m = rule_model({"Capital of France:": " Paris"})
    src = ("@lmql.query\ndef capital(country):\n    '''lmql\n    \"Capital of {country}:[C]\" where C in [\" Paris\", \" Lyon\"]\n"
           "    return C.strip()\n    '''\nc = await capital(\"France\")\n\"The answer is {c}.\"\n")
    r = run_query(src, model=m)
    assert r["c"] == "Paris" and r.prompt == "The answer is Paris."


def test_query_docstring_errors_name_the_file_line(tmp_path: Path) -> None:
    import importlib.util

    f = tmp_path / "qmod.py"
    f.write_text(
        "from tether.lang import query\n\n\n"
        "def make_bad():\n"
        "    @query\n"
        "    def bad(x):\n"
        "        '''lmql\n"
        "        \"fine\"\n"
        "        \"broken [A\"\n"
        "        '''\n"
        "    return bad\n"
    )
    spec = importlib.util.spec_from_file_location("qmod_lang_test", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(QuerySyntaxError) as e:
        mod.make_bad()
    assert e.value.lineno == 9 and str(f) in str(e.value)
