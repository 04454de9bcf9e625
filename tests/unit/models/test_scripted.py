"""The scripted test model behaves like a backend: deterministic, counted, selective rows."""

from __future__ import annotations

import numpy as np

from tether.models import Model
from tether.models.scripted import ScriptedModel


def test_is_a_model() -> None:
    assert isinstance(ScriptedModel(), Model)


def test_logits_are_a_function_of_the_sequence() -> None:
    a, b = ScriptedModel(seed=1), ScriptedModel(seed=1)
    assert np.array_equal(a.logits([0, 5, 6]), b.logits([0, 5, 6]))
    assert not np.array_equal(a.logits([0, 5, 6]), a.logits([0, 5, 7]))


def test_rows_and_batch_agree_with_full_logits() -> None:
    m = ScriptedModel(seed=2)
    ids = np.array([3, 7, 50])
    assert np.array_equal(m.logits_rows([0, 4], ids), m.logits([0, 4])[ids])
    batch = m.logits_batch([[0, 4], [0, 5]])
    assert np.array_equal(batch[1], m.logits([0, 5]))


def test_tokenize_round_trips_and_counts_prefix_reuse() -> None:
    m = ScriptedModel()
    toks = m.tokenize("The url is http", add_bos=True)
    assert toks[0] == m.vocabulary.bos_id
    assert m.detokenize(toks) == b"The url is http"
    m.logits(toks)
    m.logits(toks + [5])
    assert m.costs.model_calls == 2
    assert m.costs.evaluated_tokens == len(toks) + 1


def test_target_is_written_by_argmax() -> None:
    m = ScriptedModel(target="abc")
    seq = m.tokenize("", add_bos=True)
    out = b""
    for _ in range(5):
        t = int(np.argmax(m.logits(seq)))
        if t in m.eos_ids:
            break
        seq.append(t)
        out += m.vocabulary.tokens[t]
    assert out == b"abc"
