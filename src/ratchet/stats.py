"""The statistics every part of Ratchet reports with: one implementation of each.

- :func:`wilson`: the Wilson score interval of a rate (legal-move rates, win rates, acceptance
  rates), sensible at 0 and 1 and for small n, where the normal interval is not.
- :func:`bootstrap_mean_ci`: a percentile bootstrap interval of a mean (rewards, per-task scores,
  per-task differences), seeded so that the same data always give the same interval.
- :func:`sign_flip_p` and :func:`bootstrap_p`: the one-sided paired tests of "mean difference > 0"
  that the engine's gate, its report and the benches decide with.
- :func:`standard_error`: of a mean, for noise bands measured in standard errors.
- :func:`mcnemar_exact`: the exact two-sided test of two arms' pass/fail on the same tasks (the
  sign test on the discordant tasks), for comparisons measured once rather than gated.

Depends on nothing of the project (numpy only), so the runner, the engine, the online gate and the
benches can all import it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import fmean

import numpy as np

__all__ = ["bootstrap_mean_ci", "bootstrap_p", "mcnemar_exact", "sign_flip_p", "standard_error", "wilson"]


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of ``successes`` out of ``n`` (z = 1.96: 95%).

    With ``n = 0`` there is no evidence, so the interval is all of ``[0, 1]``.
    """
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_mean_ci(values: Sequence[float], resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval at ``confidence`` of the mean of ``values``.

    The values are resampled with replacement ``resamples`` times from a numpy generator seeded
    with ``seed`` (the same data give the same interval); the bounds are the linearly interpolated
    quantiles of the resampled means (numpy's default percentile rule). No values: ``(0, 0)``; one
    value: that value twice (a single observation has no spread to resample).
    """
    if not values:
        return (0.0, 0.0)
    if len(values) == 1:
        return (float(values[0]), float(values[0]))
    rng = np.random.default_rng(seed)
    data = np.asarray(values, dtype=float)
    # Indexing with rng.integers draws exactly what rng.choice(data, replace=True) draws, without
    # its argument checks (the runner calls this once per batch).
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    means.sort()
    tail = (1 - confidence) / 2
    # np.percentile's linear rule on the sorted means, without its generic machinery (which cost
    # more than drawing the resamples).
    return (_quantile(means, tail), _quantile(means, 1 - tail))


def _quantile(ordered: np.ndarray, q: float) -> float:
    """The ``q`` quantile of an ascending array, interpolated linearly between order statistics."""
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (pos - low))


def sign_flip_p(diffs: Sequence[float], resamples: int = 20_000, rng: random.Random | None = None) -> float:
    """One-sided p-value of ``mean(diffs) > 0`` under random sign flips of the paired differences.

    Under "no difference" each difference is as likely positive as negative, so the p-value is the
    share of sign assignments whose mean is at least the observed one. A zero difference is the same
    under either sign, so only the m nonzero ones are flipped: exact (every one of the 2^m
    assignments) when ``2^m <= resamples``, as it is for most task suites, where few tasks change;
    else ``resamples`` random assignments from ``rng`` (default ``random.Random(0)``), with the
    observed one counted in (``(hits + 1) / (resamples + 1)``, never 0). (Flipping all n by random
    draws instead put 4 of 30 tasks flipped at p = 0.047, their exact p being 1/16.) No
    differences, or all zero: 1.0.
    """
    moved = [d for d in diffs if d]
    if not moved:
        return 1.0
    observed = sum(moved)  # comparing sums over the same n is comparing means
    m = len(moved)
    if 2 ** m <= resamples:
        hits = sum(1 for mask in range(2 ** m)
                   if sum(d if mask >> i & 1 else -d for i, d in enumerate(moved)) >= observed - 1e-9)
        return hits / 2 ** m
    rng = rng or random.Random(0)
    hits = sum(1 for _ in range(resamples)
               if sum(d if rng.random() < 0.5 else -d for d in moved) >= observed - 1e-9)
    return (hits + 1) / (resamples + 1)


def bootstrap_p(diffs: Sequence[float], resamples: int = 2000, rng: random.Random | None = None) -> float:
    """One-sided paired bootstrap p-value of ``mean(diffs) > 0``: the share of resamples of the
    differences (with replacement, from ``rng``, default ``random.Random(0)``) whose mean is <= 0,
    the observed sample counted in. No differences, or all zero: 1.0."""
    n = len(diffs)
    if n == 0 or not any(diffs):
        return 1.0
    rng = rng or random.Random(0)
    at_or_below = sum(1 for _ in range(resamples) if fmean(diffs[rng.randrange(n)] for _ in range(n)) <= 0)
    return (at_or_below + 1) / (resamples + 1)


def mcnemar_exact(wins: int, losses: int) -> float:
    """Exact two-sided McNemar p-value of paired pass/fail outcomes: ``wins`` tasks only the first
    arm solved, ``losses`` only the second. Under "no difference" each discordant task is a fair
    coin, so p = min(1, 2 · P(Binomial(wins + losses, 1/2) <= min(wins, losses))); 1.0 with none."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean of ``values`` (sample standard deviation / sqrt(n)); 0 for fewer
    than two values (one observation says nothing about spread)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = fmean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)
