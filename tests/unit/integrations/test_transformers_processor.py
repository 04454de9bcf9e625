"""tether.integrations.transformers on a tiny random model (no download): real
``model.generate`` with greedy search, sampling and beam search over a batch of
left-padded prompts gives only valid outputs; the per-row bookkeeping follows rows that
are reordered, forked and dropped (checked against replaying every row from scratch)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'tether[transformers]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from tether.errors import ConstraintError  # noqa: E402
from tether.integrations.transformers import LogitsProcessor, hf_vocabulary  # noqa: E402
from tether.program import regex  # noqa: E402
from tether.tokens.bitmask import allocate_mask, mask_to_bool  # noqa: E402

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                           "b": {"type": "boolean"}},
          "required": ["a", "b"], "additionalProperties": False}
PHONE = r"[0-9]{3}-[0-9]{2}"
CHOICES = ["red", "green", "blue", "re"]


@pytest.fixture(scope="module")
def tiny():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(alphabet)}
    vocab.update({'{"': 256, '":': 257, "tr": 258, "ue": 259, "re": 260, "een": 261})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<bos>", "<eos>", "<pad>"])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                                pad_token="<pad>", padding_side="left")
    config = transformers.LlamaConfig(vocab_size=len(fast) + 5, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                                      pad_token_id=fast.pad_token_id)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    return model, fast


def valid(output, text: str) -> bool:
    if output is SCHEMA:
        try:
            v = json.loads(text)
        except ValueError:
            return False
        return (set(v) == {"a", "b"} and type(v["a"]) is int and 0 <= v["a"] <= 99
                and type(v["b"]) is bool)
    if output is CHOICES:
        return text in CHOICES
    return re.fullmatch(PHONE, text) is not None


def run(tiny, output, **gen):
    model, tok = tiny
    p = LogitsProcessor(output if output is not PHONE else regex(PHONE), tok)
    enc = tok(["a prompt", "b"], return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(**enc, logits_processor=transformers.LogitsProcessorList([p]),
                             max_new_tokens=40, pad_token_id=tok.pad_token_id, **gen)
    return [tok.decode(row[enc["input_ids"].shape[1]:], skip_special_tokens=True) for row in out], p


@pytest.mark.parametrize("output", [SCHEMA, PHONE, CHOICES], ids=["schema", "regex", "choices"])
@pytest.mark.parametrize("mode", ["greedy", "sample", "beam"])
def test_every_output_is_valid(tiny, output, mode) -> None:
    gen = {"greedy": dict(do_sample=False),
           "sample": dict(do_sample=True, temperature=1.5, top_k=0),
           "beam": dict(do_sample=False, num_beams=3, num_return_sequences=2)}[mode]
    torch.manual_seed(1)
    texts, _ = run(tiny, output, **gen)
    assert len(texts) == (4 if mode == "beam" else 2)
    for t in texts:
        assert valid(output, t), (mode, t)


def test_processor_is_reusable_across_generate_calls(tiny) -> None:
    model, tok = tiny
    p = LogitsProcessor(CHOICES, tok)
    for prompt in (["x"], ["a longer prompt", "y"], ["x"]):
        enc = tok(prompt, return_tensors="pt", padding=True)
        out = model.generate(**enc, logits_processor=transformers.LogitsProcessorList([p]),
                             max_new_tokens=10, do_sample=False, pad_token_id=tok.pad_token_id)
        for row in out:
            assert tok.decode(row[enc["input_ids"].shape[1]:], skip_special_tokens=True) in CHOICES


def reference_masks(p: LogitsProcessor, outputs: list[list[int]]) -> np.ndarray:
    """Each row's allowed tokens, replaying its output on a fresh matcher."""
    v = p.vocabulary
    rows = []
    for out in outputs:
        m = p.compiled.matcher()
        allowed = None
        for t in out:
            if t in v.eos_ids:
                ok = m.is_accepting()
                allowed = set(v.eos_ids) | ({p.pad_token_id} if ok else set())
                break
            if not m.consume(t):
                allowed = set(v.eos_ids)
                break
        if allowed is None:
            mask = allocate_mask(v.size)
            m.compute_mask(mask)
            rows.append(mask_to_bool(mask, v.size))
        else:
            row = np.zeros(v.size, bool)
            row[list(allowed)] = True
            rows.append(row)
    return np.array(rows)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_bookkeeping_follows_reordered_forked_rows(tiny, data) -> None:
    """Random beam-like steps: every step each row continues a random row of the
    previous step with a random token (mostly allowed ones, some EOS, some refused)."""
    _, tok = tiny
    p = LogitsProcessor(SCHEMA, tok)
    v = p.vocabulary
    width = len(v.tokens) + 5
    n_rows = data.draw(st.integers(1, 4))
    prompt = [[7, 8]] * n_rows
    outputs: list[list[int]] = [[] for _ in range(n_rows)]
    for _step in range(data.draw(st.integers(1, 12))):
        ids = torch.tensor([pr + o for pr, o in zip(prompt, outputs, strict=True)])
        scores = torch.zeros((n_rows, width))
        got = p(ids, scores)
        allowed = torch.isfinite(got).numpy()
        assert not allowed[:, v.size:].any()  # padding columns of the logits
        assert (allowed[:, : v.size] == reference_masks(p, outputs)).all()
        new = []
        for _r in range(n_rows):
            parent = data.draw(st.integers(0, n_rows - 1))
            choices = np.flatnonzero(allowed[parent])
            kind = data.draw(st.sampled_from(["allowed", "allowed", "allowed", "any"]))
            if kind == "allowed" and len(choices):
                t = int(choices[data.draw(st.integers(0, len(choices) - 1))])
            else:
                t = data.draw(st.integers(0, v.size - 1))
            new.append([*outputs[parent], t])
        outputs = new


def test_a_new_generation_is_detected(tiny) -> None:
    _, tok = tiny
    p = LogitsProcessor(CHOICES, tok)
    width = len(tok) + 5
    p(torch.tensor([[5, 6]]), torch.zeros((1, width)))
    r = tok.convert_tokens_to_ids("re")
    got = p(torch.tensor([[5, 6, r]]), torch.zeros((1, width)))
    assert torch.isfinite(got[0, tok.eos_token_id])  # "re" is complete
    # another prompt of the same width + 1: a new generation, "re" is its prompt
    got = p(torch.tensor([[9, 9, r]]), torch.zeros((1, width)))
    assert not torch.isfinite(got[0, tok.eos_token_id])


def test_vocabulary_is_cached_and_exact(tiny) -> None:
    _, tok = tiny
    v = hf_vocabulary(tok)
    assert hf_vocabulary(tok) is v
    assert v.eos_ids == (tok.eos_token_id,)
    for i in range(v.size):
        if i not in v.special_ids:
            assert v.tokens[i].decode("utf-8", "replace") == tok.decode([i])


def test_bad_arguments(tiny) -> None:
    model, tok = tiny
    with pytest.raises(ConstraintError, match="free text"):
        LogitsProcessor(None, tok)
    with pytest.raises(ConstraintError, match="plain string"):
        LogitsProcessor("abc", tok)
    with pytest.raises(ConstraintError, match="fast tokenizer"):
        LogitsProcessor(CHOICES, object())
    with pytest.raises(ConstraintError, match="eos_token_id"):
        LogitsProcessor(CHOICES, tok, eos_token_id="x")
    p = LogitsProcessor(CHOICES, tok)
    with pytest.raises(ConstraintError, match="wrong tokenizer"):
        p(torch.tensor([[1]]), torch.zeros((1, 10)))
