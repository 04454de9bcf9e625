"""Holes decode through tether.decoding (the loop, its decoders, healing, fast-forward,
budget closing, costs): token healing of the prompt before a hole, fast-forward of a forced
stretch, lazy masking against a full mask — on scripted models."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np
import pytest
from lang_rule_model import rule_model

from tether.decoding import Guide
from tether.decoding.lazy import LazyMatcher, best_accepted, choose
from tether.decoding.sampling import log_softmax
from tether.lang import load_query, run_query
from tether.lang.holes import HoleMatcher, VocabInfo


def _first_tokens(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """Spy on the branches the runtime opens: their token lists, as decoded."""
    import tether.lang.branches as branches

    seen: list[list[int]] = []
    orig = branches.open_branch

    def spy(*a: Any, **k: Any) -> Any:
        b = orig(*a, **k)
        seen.append(b.tokens)
        return b

    monkeypatch.setattr(branches, "open_branch", spy)
    return seen


def test_a_hole_after_a_space_is_healed(monkeypatch: pytest.MonkeyPatch) -> None:
    m = rule_model({"Q:": " the answer"})
    toks = _first_tokens(monkeypatch)
    r = run_query('"Q: [A]" where len(TOKENS(A)) < 9', model=m)
    # the prompt's " " was taken back: the model wrote " the" as one token; the value does
    # not repeat the space (the trace reads as written)
    assert m.vocabulary.tokens[toks[0][0]] == b" the"
    assert r.prompt == "Q: the answer" and r["A"] == "the answer"
    plain = load_query('"Q: [A]" where len(TOKENS(A)) < 9').run(model=m, decoder="argmax(healing=False)")
    assert m.vocabulary.tokens[toks[1][0]] == b"the" and plain.prompt == r.prompt


def test_a_hole_after_a_mid_word_prompt_is_healed_like_generate() -> None:
    from tether.program import generate

    m = rule_model({"url is ": "https://www.com"})
    r = run_query('"The url is http[U]" where len(TOKENS(U)) < 6', model=m)
    g = generate(m, "The url is http", max_tokens=5)
    assert r["U"] == g.text and r.prompt == "The url is http" + g.text
    assert r["U"].startswith("s://")


def test_a_forced_stretch_is_fast_forwarded() -> None:
    m = rule_model({"id: ": "AB-123-the-end"})
    src = '"id: [C]" where REGEX(C, r"[A-Z]{2}-[0-9]{3}-the-end")'
    r = run_query(src, model=m)
    assert r["C"] == "AB-123-the-end" and r.holes[0].satisfied
    n = r.holes[0].n_tokens
    # "-the-end" (and the "-" after the letters) cost no model call
    assert r.costs.model_calls < n
    plain = load_query(src).run(model=m, decoder="argmax(engine=False)")  # Follow checks only: no forced tokens
    assert plain["C"] == r["C"] and plain.costs.model_calls > r.costs.model_calls


@pytest.mark.parametrize("decoder", ["argmax", "sample(n=2, temperature=0.5)", "beam(n=2)"])
def test_every_decoder_keeps_the_constraint(decoder: str) -> None:
    m = rule_model({"City:": " Berlin"})
    r = load_query('"City:[C]" where C in [" Paris", " Lyon"]').run(model=m, decoder=decoder, seed=3)
    for res in r.results:
        assert res["C"] in (" Paris", " Lyon") and res.holes[0].satisfied


def test_hole_matcher_is_a_lazy_matcher_and_its_choice_is_the_masked_argmax() -> None:
    """Lazy choice (test candidates in order) equals argmax over the exact mask."""
    m = rule_model({"Q:": " hello"})
    e = ast.parse('not "e" in X and len(X) < 9', mode="eval").body
    hole = HoleMatcher(m, VocabInfo.of(m), "X", e, {}, frozenset())
    assert isinstance(hole, LazyMatcher)
    g = Guide(hole, m.vocabulary)
    assert g.lazy
    rng = np.random.default_rng(0)
    for _ in range(4):
        values = rng.standard_normal(m.vocabulary.size).astype(np.float32)
        exact = [t for t in range(m.vocabulary.size) if hole.accepts(t)]
        k = choose(g, None, values, None, None, stop_outside=False)
        assert k == max(exact, key=lambda t: (values[t], -t))
        best = best_accepted(g, None, log_softmax(values), 3, stop_outside=False)
        assert [j for j, _ in best] == sorted(exact, key=lambda t: (-values[t], t))[:3]
        hole.consume(k)
        assert "e" not in hole.text


@pytest.mark.parametrize("decoder", ["argmax", "sample(n=2)", "beam(n=2)"])
def test_a_healed_hole_closes_within_its_own_budget(decoder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first token re-writes the healed space and starts the value (" a"): the
    value's budget still holds the closing text exactly."""
    m = rule_model({"Id:": " abcabcabcabcabc"})
    toks = _first_tokens(monkeypatch)
    r = load_query("\"Id: [A: r'[a-c]+xyz']\"").run(model=m, max_tokens=5, decoder=decoder, seed=1)
    if not decoder.startswith("beam"):  # (a beam forks the branch it opened)
        assert m.vocabulary.tokens[toks[0][0]] == b" a"
    for res in r.results:
        h = res.holes[0]
        assert h.satisfied and h.text.endswith("xyz") and h.n_tokens <= 5 and h.stopped == "budget", h
