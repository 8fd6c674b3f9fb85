"""Token choice for a request's sampling settings: any temperature and top-p the schema accepts
chooses a token (a NaN here was a 500 for a valid request)."""

from __future__ import annotations

import numpy as np
import pytest

from ratchet.online.sampling import choose_token, log_softmax, sampling_seed

LOGPROBS = log_softmax(np.random.default_rng(0).normal(size=500) * 3)
BEST = int(np.argmax(LOGPROBS))


@pytest.mark.parametrize("temperature", [5e-324, 1e-300, 1e-12])
def test_a_vanishing_temperature_is_greedy(temperature):
    assert choose_token(LOGPROBS, temperature, 1.0, np.random.default_rng(1)) == BEST


@pytest.mark.parametrize(("temperature", "top_p"), [(2.0, 1e-300), (1.0, 0.5), (2.0, 1.0)])
def test_any_accepted_setting_chooses_a_token(temperature, top_p):
    token = choose_token(LOGPROBS, temperature, top_p, np.random.default_rng(1))
    assert 0 <= token < len(LOGPROBS)
    if top_p == 1e-300:
        assert token == BEST  # the top-p mass of one token


def test_impossible_tokens_are_never_chosen():
    logprobs = np.full(10, -np.inf)
    logprobs[[3, 7]] = np.log(0.5)
    rng = np.random.default_rng(2)
    assert {choose_token(logprobs, 1.0, 1.0, rng) for _ in range(50)} == {3, 7}


def test_every_64_bit_seed_seeds_numpy_and_distinct_seeds_stay_distinct():
    seeds = [-(1 << 63), -1, 0, 1, (1 << 63) - 1]
    mapped = [sampling_seed(s) for s in seeds]
    assert len(set(mapped)) == len(seeds) and sampling_seed(None) is None
    draws = [np.random.default_rng(m).random() for m in mapped]
    assert np.random.default_rng(sampling_seed(-1)).random() == draws[1]
