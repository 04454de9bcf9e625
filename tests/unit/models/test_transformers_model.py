"""TransformersModel on a tiny randomly initialised model (no download): KV reuse and
selective logits give the logits of a cold full pass."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'tether[transformers]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")


@pytest.fixture(scope="module")
def tiny():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from tether.models.transformers_model import TransformersModel

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab.update({"Ġthe": 256, "ab": 257})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("Ġ", "t"), ("Ġt", "h")][:0]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<bos>", "<eos>"])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>")
    config = transformers.LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      tie_word_embeddings=True, bos_token_id=fast.bos_token_id,
                                      eos_token_id=fast.eos_token_id)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).eval()
    return TransformersModel("tiny", model=hf, tokenizer=fast, selective_threshold=64)


def test_vocabulary_and_tokenizer(tiny) -> None:
    toks = tiny.tokenize("hello world", add_bos=True)
    assert toks[0] == tiny.tokenizer.bos_token_id
    assert tiny.detokenize(toks) == b"hello world"
    assert tiny.eos_ids == (tiny.tokenizer.eos_token_id,)


def test_kv_reuse_matches_a_cold_pass(tiny) -> None:
    seq = tiny.tokenize("abc def", add_bos=True)
    tiny.reset()
    cold = tiny.logits(seq).copy()
    tiny.reset()
    tiny.logits(seq[:3])
    warm = tiny.logits(seq)
    assert np.allclose(cold, warm, atol=1e-4)
    tiny.logits(seq + [5, 6])  # extend, then cut back
    assert np.allclose(tiny.logits(seq), cold, atol=1e-4)


def test_selective_rows_equal_full_logits(tiny) -> None:
    seq = tiny.tokenize("abc", add_bos=True)
    ids = np.array([1, 17, 100, 257])
    assert tiny.max_selective_error(seq, ids) < 1e-5


def test_decoding_is_the_same_with_and_without_selective_logits(tiny) -> None:
    from tether.decoding import Sample, decode
    from tether.engine import compile as compile_constraint
    from tether.grammar import Grammar

    cc = compile_constraint(Grammar.from_regex(r"[a-c]{3,6}"), tiny.vocabulary)
    prompt = tiny.tokenize("x", add_bos=True)
    for seed in range(3):
        a = decode(tiny, prompt, cc.matcher(), Sample(seed=seed), selective=False)
        b = decode(tiny, prompt, cc.matcher(), Sample(seed=seed), selective=True)
        assert a[0].tokens == b[0].tokens and np.isclose(a[0].logprob, b[0].logprob, atol=1e-4)


def test_calibration_returns_a_size(tiny) -> None:
    k = tiny.calibrate_selective(sizes=(4, 16), repeats=2)
    assert k in (0, 4, 16)
