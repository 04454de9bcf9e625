"""`decode` with argmax / sampling / best-of on the scripted model and a finite language."""

from __future__ import annotations

import numpy as np
import pytest
from finite_matcher import FiniteMatcher

from tether.decoding import Argmax, BestOf, Sample, decode
from tether.models.scripted import ScriptedModel

WORDS = ["yes", "no", "maybe", "nothing", "123", "12"]


def model(**kw) -> ScriptedModel:
    return ScriptedModel(**kw)


def prompt(m: ScriptedModel) -> list[int]:
    return m.tokenize("Answer:", add_bos=True)


def test_argmax_is_deterministic_and_valid() -> None:
    outs = []
    for _ in range(3):
        m = model(seed=3)
        [d] = decode(m, prompt(m), FiniteMatcher(WORDS, m.vocabulary), Argmax())
        outs.append(d)
    assert outs[0].text in [w.encode() for w in WORDS]
    assert outs[0].finish_reason == "stop" and outs[0].complete
    assert all(o.tokens == outs[0].tokens and o.text == outs[0].text for o in outs)


def test_argmax_follows_the_model() -> None:
    m = model(target="The url is https://www.abc.com")
    [d] = decode(m, m.tokenize("The url is", add_bos=True))
    assert d.text == b" https://www.abc.com"
    assert d.finish_reason == "stop"


def test_argmax_matches_brute_force_greedy() -> None:
    m = model(seed=11)
    vocab = m.vocabulary
    p = prompt(m)
    [d] = decode(m, p, FiniteMatcher(WORDS, vocab), Argmax(), fast_forward=False)
    # reference: greedy over the masked full logits, step by step
    fm, seq, out = FiniteMatcher(WORDS, vocab), list(p), []
    mask = np.zeros((vocab.n_logits + 31) // 32, np.uint32)
    while True:
        fm.compute_mask(mask)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: vocab.size].astype(bool)
        lg = np.where(bits, m._compute(seq), -np.inf)
        t = int(np.argmax(lg))
        if t in vocab.eos_ids:
            break
        fm.consume(t)
        seq.append(t)
        out.append(t)
        if fm.is_finished():
            break
    assert d.tokens == out


@pytest.mark.parametrize("seed", range(8))
def test_constrained_samples_are_in_the_language(seed: int) -> None:
    m = model(seed=seed)
    for d in decode(m, prompt(m), FiniteMatcher(WORDS, m.vocabulary), Sample(temperature=1.5, seed=seed, n=4)):
        assert d.text.decode() in WORDS and d.complete


def test_seeded_sampling_is_reproducible_and_batching_independent() -> None:
    m = model(seed=5)
    a = decode(m, prompt(m), None, Sample(seed=42, n=4, temperature=1.3), max_tokens=8)
    b = decode(m, prompt(m), None, Sample(seed=42, n=4, temperature=1.3), max_tokens=8)
    assert [x.tokens for x in a] == [x.tokens for x in b]
    # sample i of a batch equals sample i drawn alone with the same seed: n=1 gives sample 0
    [single] = decode(m, prompt(m), None, Sample(seed=42, n=1, temperature=1.3), max_tokens=8)
    assert single.tokens == a[0].tokens
    assert len({tuple(x.tokens) for x in a}) > 1  # the samples differ


def test_n_samples_use_one_batched_call_per_step() -> None:
    m = model(seed=5)
    m.costs.reset()
    decode(m, prompt(m), None, Sample(seed=1, n=4), max_tokens=6)
    assert m.costs.model_calls == 6  # 6 steps, 4 sequences each, batched


def test_best_of_sorts_by_logprob() -> None:
    m = model(seed=9)
    ds = decode(m, prompt(m), FiniteMatcher(WORDS, m.vocabulary), BestOf(n=6, sample=Sample(seed=3)))
    assert len(ds) == 6
    lps = [d.logprob for d in ds]
    assert lps == sorted(lps, reverse=True)


def test_max_tokens_cuts_the_output() -> None:
    m = model(seed=1)
    [d] = decode(m, prompt(m), None, max_tokens=3)
    assert len(d.tokens) == 3 and d.finish_reason == "length"
    [d] = decode(m, prompt(m), None, max_tokens=0)
    assert d.tokens == [] and d.finish_reason == "length"


def test_stop_text_ends_output_before_it() -> None:
    m = model(target="name: abc\nage: 12")
    [d] = decode(m, m.tokenize("x", add_bos=True), None, stop=["\n"])
    assert d.text == b"name: abc"
    assert d.stop_text == b"\n" and d.finish_reason == "stop"


def test_fast_forward_gives_same_text_with_fewer_calls() -> None:
    words = ["the answer is yes", "the answer is no"]
    m1, m2 = model(seed=2), model(seed=2)
    [a] = decode(m1, prompt(m1), FiniteMatcher(words, m1.vocabulary), fast_forward=False)
    [b] = decode(m2, prompt(m2), FiniteMatcher(words, m2.vocabulary), fast_forward=True)
    assert a.text == b.text and a.text.decode() in words
    assert b.n_forced > 0
    assert m2.costs.model_calls < m1.costs.model_calls
    # the forced run is evaluated in one call, together with the prompt
    assert m2.calls_log[0] > len(prompt(m2))


def test_selective_logits_give_identical_results() -> None:
    m1, m2 = model(seed=4, selective_threshold=0), model(seed=4, selective_threshold=10_000)
    words = ["a1", "a2", "b3", "abc", "ab"]
    for s in range(5):
        a = decode(m1, prompt(m1), FiniteMatcher(words, m1.vocabulary), Sample(seed=s, n=3))
        b = decode(m2, prompt(m2), FiniteMatcher(words, m2.vocabulary), Sample(seed=s, n=3))
        assert [x.tokens for x in a] == [x.tokens for x in b]
        assert np.allclose([x.logprob for x in a], [x.logprob for x in b])


def test_close_on_budget_returns_a_complete_output() -> None:
    words = ["abcabcabcabc", "ab"]
    m = model(target="abcabcabcabc")
    [d] = decode(m, prompt(m), FiniteMatcher(words, m.vocabulary), max_tokens=3, close_on_budget=True)
    assert len(d.tokens) <= 3
    assert d.text.decode() in words and d.complete
    [cut] = decode(m, prompt(m), FiniteMatcher(words, m.vocabulary), max_tokens=3)
    assert cut.finish_reason == "length" and not cut.complete


def test_dead_end_ends_with_error_not_exception() -> None:
    m = model(seed=1)
    [d] = decode(m, prompt(m), FiniteMatcher(["\x7f"], m.vocabulary), fast_forward=False)  # no token spells it
    assert d.finish_reason == "error" and d.error


def test_costs_are_counted() -> None:
    m = model(seed=1)
    p = prompt(m)
    [d] = decode(m, p, None, max_tokens=4)
    assert m.costs.generate_calls == 1
    assert m.costs.prompt_tokens == len(p)
    assert m.costs.generated_tokens == len(d.tokens) == 4
    assert m.costs.model_calls == 4
    assert m.costs.evaluated_tokens == len(p) + 3


def test_score_continuations_matches_step_by_step_logprobs() -> None:
    from tether.decoding import score_continuations
    from tether.decoding.logits import full_free_logits
    from tether.decoding.sampling import log_softmax

    m = model(seed=3)
    p = prompt(m)
    got = score_continuations(m, p, ["yes", "no", "yes!"])
    toks = m.tokenize("yes")
    ref = 0.0
    for i, t in enumerate(toks):
        ref += float(log_softmax(full_free_logits(m, m._compute(p + toks[:i])))[t])
    assert np.isclose(got[0], ref)
    assert got[2] < got[0]  # a longer continuation of the same text is less likely


def test_end_with_outside_moves_forbidden_mass_to_eos() -> None:
    import numpy as np

    from tether.decoding.branch import end_with_outside
    from tether.models.scripted import ScriptedModel

    vocab = ScriptedModel().vocabulary
    eos = vocab.eos_ids[0]
    full = np.full(vocab.size, -np.inf, dtype=np.float32)
    ids = np.asarray(sorted({eos, 10, 11}), dtype=np.int64)
    full[[eos, 10, 11, 12, 13]] = [0.0, 1.0, 2.0, 3.0, 3.0]
    vals = end_with_outside(vocab, full, ids)
    k = int(np.searchsorted(ids, eos))
    assert np.isclose(vals[k], np.log(np.exp(0.0) + 2 * np.exp(3.0)), rtol=1e-5)
    rest = [i for i in range(len(ids)) if i != k]
    assert np.allclose(vals[rest], full[ids[rest]])
    # the total probability is the model's: nothing is created or lost
    assert np.isclose(np.logaddexp.reduce(vals.astype(np.float64)), np.logaddexp.reduce(full[np.isfinite(full)].astype(np.float64)))
