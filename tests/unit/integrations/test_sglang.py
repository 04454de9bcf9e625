"""tether.integrations.sglang without SGLang (it installs only with CUDA): the processor
class and its wire format, and the per-request bookkeeping of `RequestStates` on torch CPU
tensors — states keyed by request id, created on a request's first call, advanced by its
new output tokens, dropped when it finishes or disappears — checked against a matcher run
alone on each request's tokens, for random interleavings of requests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'tether[transformers]')")

from tether.engine import compile as compile_constraint  # noqa: E402
from tether.errors import ConstraintError, RegexError, TetherError  # noqa: E402
from tether.integrations import sglang  # noqa: E402
from tether.integrations.requests import request_output  # noqa: E402
from tether.integrations.sglang import (  # noqa: E402
    RequestStates,
    TetherLogitProcessor,
    custom_params,
)
from tether.program.outputs import output_spec  # noqa: E402
from tether.tokens import Vocabulary  # noqa: E402
from tether.tokens.bitmask import allocate_mask  # noqa: E402

TOKENS = [b"", b"", b"a", b"b", b"ab", b"0", b"1", b"{", b"}", b'"', b":", b",", b"x", b"yes", b"no", b"n", b"o"]
VOCAB = Vocabulary.from_bytes(TOKENS, eos_ids=[1], bos_id=0)
SPECS = [{"regex": "a+b"}, {"choice": ["yes", "no", "nob"]}, {"json": {"type": "integer"}},
         {"grammar": 'root ::= "x" root | "0"'}, {"grammar": 'start: "a" | "b" start', "syntax": "lark"}]


@dataclass
class Req:
    """The part of SGLang's ``Req`` the processor reads."""

    rid: str
    output_ids: list[int] = field(default_factory=list)
    tokenizer: object = None
    done: bool = False

    def finished(self) -> bool:
        return self.done


def vocabulary(req, width: int) -> Vocabulary:
    assert width == VOCAB.size
    return VOCAB


def params(spec, req: Req) -> dict:
    return {**custom_params(spec), "__req__": req}


def allowed(row) -> set[int]:
    return {t for t in range(VOCAB.size) if row[t] > float("-inf")}


def reference(spec, tokens: list[int]) -> set[int]:
    """The tokens a matcher run alone allows after ``tokens`` (EOS only once it cannot go on)."""
    m = compile_constraint(output_spec(request_output(spec)).grammar, VOCAB).matcher()
    for t in tokens:
        if (t in VOCAB.eos_ids and m.is_accepting()) or not m.consume(t):
            return set(VOCAB.eos_ids)
    mask = allocate_mask(VOCAB.size)
    m.compute_mask(mask)
    return {t for t in range(VOCAB.size) if mask[t >> 5] >> (t & 31) & 1}


def test_custom_params_validates_on_the_client() -> None:
    assert custom_params({"regex": "a+b"}) == {"tether": {"regex": "a+b"}}
    with pytest.raises(RegexError):
        custom_params({"regex": "a(b"})
    with pytest.raises(ConstraintError) as info:
        custom_params({"jsn": {}})
    assert isinstance(info.value, ValueError)


def test_to_str_names_the_class_and_from_str_rebuilds_it() -> None:
    text = TetherLogitProcessor.to_str()
    assert set(json.loads(text)) == {"callable"}
    assert isinstance(TetherLogitProcessor.from_str(text), TetherLogitProcessor)


def test_rows_without_a_tether_spec_are_left_alone() -> None:
    states = RequestStates(vocabulary)
    logits = torch.zeros(3, VOCAB.size)
    states.apply(logits, [None, {"other": 1}, params(SPECS[0], Req("r"))])
    assert allowed(logits[0]) == allowed(logits[1]) == set(range(VOCAB.size))
    assert allowed(logits[2]) == reference(SPECS[0], [])
    assert states.apply(logits, None) is logits and states.apply(logits, []) is logits


def test_the_processor_object_uses_the_shared_states(monkeypatch) -> None:
    """SGLang makes a new processor object per batch: the states outlive it."""
    monkeypatch.setattr(sglang, "STATES", RequestStates(vocabulary))
    req = Req("r1")
    for step in range(3):
        logits = torch.zeros(1, VOCAB.size)
        TetherLogitProcessor.from_str(TetherLogitProcessor.to_str())(logits, [params(SPECS[0], req)])
        assert allowed(logits[0]) == reference(SPECS[0], req.output_ids)
        req.output_ids.append(2 if step < 2 else 3)
    assert list(sglang.STATES.states) == ["r1"]


def test_a_bad_or_refused_request_allows_eos_only_and_keeps_the_reason() -> None:
    states = RequestStates(vocabulary)
    bad = {"__req__": Req("bad"), "tether": {"regex": "a(b"}}
    refused = params(SPECS[0], Req("refused", [5]))  # "0" cannot start a+b
    logits = torch.zeros(2, VOCAB.size)
    states.apply(logits, [bad, refused])
    assert allowed(logits[0]) == allowed(logits[1]) == {1}
    assert "constraint refused" in states.errors["bad"] and "refused" in states.errors
    with pytest.raises(TetherError):
        states.apply(torch.zeros(1, VOCAB.size), [{"tether": SPECS[0]}])  # no __req__


def test_beam_rows_of_one_request_are_refused() -> None:
    states = RequestStates(vocabulary)
    req = Req("beam", [2])
    logits = torch.zeros(2, VOCAB.size)
    states.apply(logits, [params(SPECS[0], req), params(SPECS[0], req)])
    assert allowed(logits[1]) == {1} and "beam" in states.errors["beam"]


def test_finished_and_stale_requests_are_dropped_and_replayed_if_they_return() -> None:
    states = RequestStates(vocabulary, stale_calls=2)
    a, b = Req("a", [2]), Req("b")
    states.apply(torch.zeros(2, VOCAB.size), [params(SPECS[0], a), params(SPECS[1], b)])
    a.done = True
    states.apply(torch.zeros(2, VOCAB.size), [params(SPECS[0], a), params(SPECS[1], b)])
    assert set(states.states) == {"b"}
    for _ in range(3):
        states.apply(torch.zeros(1, VOCAB.size), [params(SPECS[0], Req("c"))])
    assert "b" not in states.states
    b.output_ids += [15]  # "n", then it comes back: replayed from its output_ids
    logits = torch.zeros(1, VOCAB.size)
    states.apply(logits, [params(SPECS[1], b)])
    assert allowed(logits[0]) == reference(SPECS[1], [15])


def test_a_reused_request_id_with_another_constraint_starts_over() -> None:
    states = RequestStates(vocabulary)
    states.apply(torch.zeros(1, VOCAB.size), [params(SPECS[0], Req("r", [2]))])
    logits = torch.zeros(1, VOCAB.size)
    states.apply(logits, [params(SPECS[3], Req("r", [12]))])
    assert allowed(logits[0]) == reference(SPECS[3], [12])


# one op per scheduler call: start a request, give some live requests a token, finish one,
# then a call over a random subset of the live requests in a random order
ops = st.lists(st.tuples(st.sampled_from(["start", "step", "step", "finish", "abort"]),
                         st.integers(0, len(SPECS) - 1), st.integers(0, 10 ** 6),
                         st.lists(st.integers(0, 7), max_size=6, unique=True)), max_size=25)


@settings(max_examples=120, deadline=None)
@given(ops, st.integers(1, 6))
def test_any_interleaving_gives_each_row_the_mask_of_its_request_alone(ops, stale) -> None:
    states = RequestStates(vocabulary, stale_calls=stale)
    live: dict[str, tuple[dict, Req]] = {}
    finished: set[str] = set()
    n = 0
    for op, s, pick, order in ops:
        if op == "start":
            req = Req(f"r{n}")
            n += 1
            live[req.rid] = (SPECS[s], req)
        elif op == "step":  # every live request gets one token: mostly one its mask allows
            for spec, req in live.values():
                ok = sorted(reference(spec, req.output_ids))
                req.output_ids.append(ok[pick % len(ok)] if pick % 4 else pick % VOCAB.size)
        elif op in ("finish", "abort") and live:
            rid = sorted(live)[pick % len(live)]
            spec, req = live.pop(rid)
            if op == "finish":  # SGLang shows it once more, finished
                req.done = True
                finished.add(rid)
                states.apply(torch.zeros(1, VOCAB.size), [params(spec, req)])
        rids = sorted(live)
        batch = [rids[k] for k in order if k < len(rids)]
        logits = torch.zeros(len(batch), VOCAB.size)
        states.apply(logits, [params(*live[rid]) for rid in batch])
        for row, rid in zip(logits, batch, strict=True):
            spec, req = live[rid]
            assert allowed(row) == reference(spec, req.output_ids), (rid, spec, req.output_ids)
        # finished requests are gone; any state (an aborted request's too) was seen lately
        assert all(states.calls - s.last_seen <= stale for s in states.states.values())
        assert not any(r in states.states for r in finished)


def test_the_default_vocabulary_is_the_request_tokenizer() -> None:
    """The server path: the vocabulary comes from ``__req__.tokenizer`` (a transformers
    fast tokenizer), as wide as the logits (padding columns always masked), cached."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)} | {"ye": 256}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<eos>"])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    width = len(fast) + 3
    states = RequestStates()
    req = Req("t", tokenizer=fast)
    logits = torch.zeros(1, width)
    states.apply(logits, [params({"choice": ["yes", "no"]}, req)])
    allowed_ids = {t for t in range(width) if logits[0, t] > float("-inf")}
    assert {fast.decode([t]) for t in allowed_ids} == {"y", "ye", "n"}
    req.output_ids += fast.encode("yes")
    logits = torch.zeros(1, width)
    states.apply(logits, [params({"choice": ["yes", "no"]}, req)])
    assert {t for t in range(width) if logits[0, t] > float("-inf")} == {fast.eos_token_id}
    assert sglang.hf_tokenizer_vocabulary(req, width) is sglang.hf_tokenizer_vocabulary(req, width)
    with pytest.raises(ConstraintError):
        sglang.hf_tokenizer_vocabulary(Req("none"), width)
