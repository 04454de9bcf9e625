"""Choosing among allowed logits: argmax ties, filters, reproducible draws."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.decoding import Sample
from tether.decoding.sampling import argmax, filtered_probabilities, log_softmax, sample


def test_argmax_ties_go_to_lowest_index() -> None:
    assert argmax(np.array([1.0, 3.0, 3.0, 2.0])) == 1


def test_log_softmax_sums_to_one() -> None:
    lp = log_softmax(np.array([0.5, -1.0, 2.0, -np.inf]))
    assert np.isclose(np.exp(lp).sum(), 1.0)
    assert lp[3] == -np.inf


def test_top_k_keeps_k_largest() -> None:
    p = filtered_probabilities(np.array([1.0, 4.0, 3.0, 2.0]), Sample(top_k=2))
    assert (p > 0).tolist() == [False, True, True, False]
    assert np.isclose(p.sum(), 1.0)


def test_top_p_keeps_smallest_set_reaching_mass() -> None:
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    p = filtered_probabilities(logits, Sample(top_p=0.8))
    assert (p > 0).tolist() == [True, True, False, False]
    p = filtered_probabilities(logits, Sample(top_p=0.81))
    assert (p > 0).tolist() == [True, True, True, False]


def test_min_p_drops_unlikely_tokens() -> None:
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    p = filtered_probabilities(logits, Sample(min_p=0.35))
    assert (p > 0).tolist() == [True, True, False, False]


def test_temperature_zero_is_argmax() -> None:
    rng = np.random.default_rng(0)
    assert sample(np.array([0.1, 0.9, 0.3]), Sample(temperature=0), rng) == 1


@pytest.mark.parametrize("bad", [dict(temperature=-1), dict(top_p=0), dict(top_p=1.5), dict(min_p=2), dict(top_k=-1), dict(n=0)])
def test_bad_settings_raise(bad) -> None:
    with pytest.raises(ValueError):
        Sample(**bad)


def test_sampling_frequencies_follow_the_distribution() -> None:
    probs = np.array([0.6, 0.25, 0.1, 0.05])
    logits = np.log(probs)
    rng = np.random.default_rng(7)
    n = 20000
    counts = np.bincount([sample(logits, Sample(), rng) for _ in range(n)], minlength=4)
    # chi-square with 3 degrees of freedom; 16.27 is the 0.1% critical value
    chi2 = (((counts - n * probs) ** 2) / (n * probs)).sum()
    assert chi2 < 16.27, counts


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-20, 20), min_size=1, max_size=30),
    st.integers(0, 5),
    st.floats(0.05, 1.0),
    st.floats(0.0, 0.99),
    st.integers(0, 10_000),
)
def test_sample_always_returns_a_kept_index(values, top_k, top_p, min_p, seed) -> None:
    s = Sample(top_k=top_k, top_p=top_p, min_p=min_p)
    v = np.array(values)
    p = filtered_probabilities(v, s)
    k = sample(v, s, np.random.default_rng(seed))
    assert p[k] > 0
    # a most likely token is never filtered out
    assert np.isclose(v[p > 0].max(), v.max())
