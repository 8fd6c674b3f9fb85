"""The statistics Ratchet decides with: one implementation of each.

- :func:`sign_flip_p`: the one-sided paired test of "mean difference > 0" (a permutation test
  that flips the signs of the paired differences), as the engine's gate decides with.
- :func:`standard_error`: of a mean, for noise bands measured in standard errors.

Depends on nothing of the project, so the engine, the online gate and the benches can all import it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from statistics import fmean

__all__ = ["sign_flip_p", "standard_error"]


def sign_flip_p(diffs: Sequence[float], resamples: int = 20_000, rng: random.Random | None = None) -> float:
    """One-sided p-value of ``mean(diffs) > 0`` under random sign flips of the paired differences.

    Under "no difference" each difference is as likely positive as negative, so the p-value is the
    share of sign assignments whose mean is at least the observed one. Exact (every one of the 2^n
    assignments) when ``2^n <= resamples``; else ``resamples`` random assignments from ``rng``
    (default ``random.Random(0)``), with the observed one counted in (``(hits + 1) / (resamples + 1)``,
    never 0). No differences, or all zero: 1.0.
    """
    n = len(diffs)
    if n == 0 or not any(diffs):
        return 1.0
    observed = fmean(diffs)
    if 2 ** n <= resamples:
        hits = sum(1 for mask in range(2 ** n)
                   if fmean(d if mask >> i & 1 else -d for i, d in enumerate(diffs)) >= observed - 1e-12)
        return hits / 2 ** n
    rng = rng or random.Random(0)
    hits = sum(1 for _ in range(resamples)
               if fmean(d if rng.random() < 0.5 else -d for d in diffs) >= observed - 1e-12)
    return (hits + 1) / (resamples + 1)


def standard_error(values: Sequence[float]) -> float:
    """Standard error of the mean of ``values`` (sample standard deviation / sqrt(n)); 0 for fewer
    than two values (one observation says nothing about spread)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = fmean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)
