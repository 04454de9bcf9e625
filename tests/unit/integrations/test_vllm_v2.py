"""tether.integrations.vllm's model-runner-v2 class against vLLM's own interface types
(``LogitsContext``, the slot buffers' ``.np``/``.gpu`` views) on CPU tensors: vLLM's v2
runner itself needs a GPU, so the runner is played by the test. Skipped without vLLM."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
pytest.importorskip("vllm.v1.worker.gpu.sample.logits_processor.interface",
                    reason="vLLM >= 0.32 (model runner v2 interface) is not installed")

from vllm.v1.worker.gpu.sample.logits_processor.interface import (  # noqa: E402
    LogitsContext,
    LogitsProcessor,
)

from tether.engine import compile as compile_constraint  # noqa: E402
from tether.errors import TetherError  # noqa: E402
from tether.integrations import vllm as tv  # noqa: E402
from tether.integrations.requests import request_output  # noqa: E402
from tether.program.outputs import output_spec  # noqa: E402
from tether.tokens import Vocabulary  # noqa: E402
from tether.tokens.bitmask import allocate_mask  # noqa: E402

TOKENS = [b"", b"", b"a", b"b", b"ab", b"0", b"1", b"{", b"}", b'"', b":", b",", b"x", b"yes", b"no", b"n", b"o"]
VOCAB = Vocabulary.from_bytes(TOKENS, eos_ids=[1], bos_id=0)
SPECS = [{"regex": "a+b"}, {"choice": ["yes", "no", "nob"]}]


def reference_row(spec, committed: list[int], drafts: list[int]) -> set[int]:
    """Allowed after ``committed`` then ``drafts`` (EOS only once one is refused or ends)."""
    m = compile_constraint(output_spec(request_output(spec)).grammar, VOCAB).matcher()
    for t in committed:
        if (t in VOCAB.eos_ids and m.is_accepting()) or not m.consume(t):
            return set(VOCAB.eos_ids)
    for t in drafts:
        if t in VOCAB.eos_ids or not m.consume(t):
            return set(VOCAB.eos_ids)
    mask = allocate_mask(VOCAB.size)
    m.compute_mask(mask)
    return {t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1}


def reference(spec, committed: list[int]) -> set[int]:
    return reference_row(spec, committed, [])

MAX_REQS, MAX_LEN = 4, 32


def req_states():
    return SimpleNamespace(
        device=torch.device("cpu"), max_num_reqs=MAX_REQS, vocab_size=VOCAB.size,
        all_token_ids=SimpleNamespace(gpu=torch.zeros(MAX_REQS, MAX_LEN, dtype=torch.int32)),
        prompt_len=SimpleNamespace(np=np.zeros(MAX_REQS, np.int32)),
        total_len=SimpleNamespace(gpu=torch.zeros(MAX_REQS, dtype=torch.int32)))


def params(spec):
    return SimpleNamespace(extra_args=None if spec is None else {"tether": spec})


@pytest.fixture
def proc(monkeypatch):
    monkeypatch.setattr(tv, "_vocabulary", lambda config: VOCAB)
    return tv.TetherLogitsProcessorV2(None, req_states())


def test_the_class_is_a_v2_processor_and_validates_params() -> None:
    assert issubclass(tv.TetherLogitsProcessorV2, LogitsProcessor)
    tv.TetherLogitsProcessorV2.validate_params(params(SPECS[0]))
    tv.TetherLogitsProcessorV2.validate_params(params(None))
    with pytest.raises(ValueError) as info:
        tv.TetherLogitsProcessorV2.validate_params(params({"regex": "a("}))
    assert isinstance(info.value, TetherError)


def test_rows_reordered_and_draft_rows(proc) -> None:
    rs = proc.req_states
    prompts = {0: [3, 3], 2: [4]}
    outputs = {0: [2, 2], 2: [13]}  # slot 0: regex a+b, slot 2: choices
    assert proc.add_request(0, params(SPECS[0])) and proc.add_request(2, params(SPECS[1]))
    assert not proc.add_request(1, params(None))
    for s in (0, 1, 2):
        p, o = prompts.get(s, [5]), outputs.get(s, [6])
        rs.prompt_len.np[s] = len(p)
        rs.all_token_ids.gpu[s, :len(p) + len(o)] = torch.tensor(p + o)
        rs.total_len.gpu[s] = len(p) + len(o)
    # rows: slot 2, slot 1 (free), slot 0 with two drafts "a", "b"
    slots = [2, 1, 0, 0, 0]
    local = [0, 0, 0, 1, 2]
    fed = [13, 6, 2, 2, 3]
    pos = [1, 1, 3, 4, 5]
    ctx = LogitsContext(
        expanded_idx_mapping=torch.tensor(slots, dtype=torch.int32), idx_mapping=torch.tensor([2, 1, 0]),
        idx_mapping_np=np.array([2, 1, 0]), expanded_local_pos=torch.tensor(local, dtype=torch.int32),
        input_ids=torch.tensor(fed, dtype=torch.int32), pos=torch.tensor(pos, dtype=torch.int64),
        seq_lens_upper_bound_np=np.array([2, 2, 6]))
    logits = torch.zeros(5, VOCAB.size)
    out = proc.apply(logits, ctx)
    allowed = [{t for t in range(VOCAB.size) if out[r, t] > float("-inf")} for r in range(5)]
    assert allowed[0] == reference(SPECS[1], [13])
    assert allowed[1] == set(range(VOCAB.size))
    assert allowed[2] == reference(SPECS[0], [2, 2])
    assert allowed[3] == reference_row(SPECS[0], [2, 2], [2])
    assert allowed[4] == reference_row(SPECS[0], [2, 2], [2, 3]) == {1}


def test_no_constrained_request_in_the_step_touches_nothing(proc) -> None:
    proc.add_request(1, params(None))
    ctx = SimpleNamespace(idx_mapping_np=np.array([1]))
    logits = torch.zeros(1, VOCAB.size)
    assert proc.apply(logits, ctx) is logits and bool((logits == 0).all())
