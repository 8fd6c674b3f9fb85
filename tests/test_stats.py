"""The one statistics module against known values: textbook Wilson intervals, exact sign-flip
p-values counted by hand, bootstrap intervals equal to numpy's own percentile formula."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ratchet.stats import bootstrap_mean_ci, bootstrap_p, sign_flip_p, standard_error, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.2775),      # the "rule of three"-like upper bound at 0/10
    (5, 10, 0.2366, 0.7634),
    (10, 10, 0.7225, 1.0),
    (1, 20, 0.0089, 0.2361),
    (81, 263, 0.2553, 0.3662),  # Wilson (1927) / Newcombe (1998), example of 81/263
])
def test_wilson_matches_textbook_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-4)
    assert hi == pytest.approx(high, abs=1e-4)


def test_wilson_without_trials_is_the_whole_range() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_wilson_narrows_with_n() -> None:
    small, large = wilson(5, 10), wilson(500, 1000)
    assert large[1] - large[0] < small[1] - small[0]


@pytest.mark.parametrize(("diffs", "p"), [
    ([1, 1, 1, 1, 1], 1 / 32),       # only the observed assignment reaches its mean
    ([2.0, 1.0], 1 / 4),             # ++ only
    ([1.0, -1.0], 3 / 4),            # mean 0: +-, -+ and ++ reach it
    ([1, 1, -1], 4 / 8),             # sum >= 1: +++ and the three with one minus
    ([0.5, 0.0, 0.0], 4 / 8),         # zeros flip to themselves: the half with +0.5
])
def test_sign_flip_is_exact_for_small_n(diffs: list[float], p: float) -> None:
    assert sign_flip_p(diffs, 2000, random.Random(0)) == pytest.approx(p)


def test_sign_flip_without_a_difference_is_one() -> None:
    assert sign_flip_p([], 2000) == 1.0
    assert sign_flip_p([0.0, 0.0], 2000) == 1.0


def test_sign_flip_monte_carlo_is_near_the_exact_value() -> None:
    # 12 differences: 4096 assignments, exact with resamples >= 4096, sampled below.
    diffs = [1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, 0.5]
    exact = sign_flip_p(diffs, 5000)
    sampled = sign_flip_p(diffs, 4000, random.Random(3))
    assert 0 < exact < 0.2
    assert sampled == pytest.approx(exact, abs=0.02)
    assert 0 < sign_flip_p([1.0] * 20, 500, random.Random(0)) < 0.01  # never 0: the observed counts


def test_bootstrap_p_is_small_for_a_clear_gain_and_large_for_none() -> None:
    assert bootstrap_p([1.0] * 10, 1000, random.Random(0)) == pytest.approx(1 / 1001)
    assert bootstrap_p([1.0, -1.0] * 10, 1000, random.Random(0)) > 0.3
    assert bootstrap_p([], 1000) == 1.0


def test_bootstrap_interval_is_numpys_percentile_of_resampled_means() -> None:
    data_rng = random.Random(0)
    for n in (2, 3, 7, 20):
        values = [data_rng.choice([-1.0, 0.0, 0.5, 1.0]) for _ in range(n)]
        rng = np.random.default_rng(0)
        means = rng.choice(np.asarray(values), size=(2000, n), replace=True).mean(axis=1)
        for confidence in (0.9, 0.95):
            tail = 100 * (1 - confidence) / 2
            reference = (float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail)))
            assert bootstrap_mean_ci(values, 2000, confidence) == pytest.approx(reference)


def test_bootstrap_interval_edges() -> None:
    assert bootstrap_mean_ci([]) == (0.0, 0.0)
    assert bootstrap_mean_ci([0.3]) == (0.3, 0.3)
    assert bootstrap_mean_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    lo, hi = bootstrap_mean_ci([0.0, 1.0] * 10)
    assert lo < 0.5 < hi
    assert bootstrap_mean_ci([0.0, 1.0] * 10, seed=1) != bootstrap_mean_ci([0.0, 1.0] * 10, seed=2)


def test_standard_error() -> None:
    assert standard_error([]) == 0.0
    assert standard_error([3.0]) == 0.0
    assert standard_error([1.0, 2.0, 3.0, 4.0]) == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)


def test_mcnemar_exact_is_the_two_sided_sign_test_on_discordant_tasks() -> None:
    from ratchet.stats import mcnemar_exact

    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(6, 0) == mcnemar_exact(0, 6) == 2 / 64  # both tails of Binomial(6, 1/2)
    assert abs(mcnemar_exact(9, 1) - 2 * 11 / 1024) < 1e-12
    assert mcnemar_exact(10, 4) > 0.05 > mcnemar_exact(12, 2)
