"""AFlow's soft mixed-probability parent selection (arXiv 2410.10762, section 3.3).

AFlow keeps the original workflow and the ``top_k`` best others as the pool, and draws a parent
from a mix of a uniform and a score-softmax distribution::

    P(i) = λ · 1/n + (1 − λ) · exp(α (s_i − s_max)) / Σ_j exp(α (s_j − s_max))

with scores in percent (AFlow multiplies its 0..1 scores by 100), α = 0.2 and λ = 0.3 as in its
code. The uniform share keeps every pool member reachable (exploration); the softmax leans to the
best (exploitation). Like the engine's selectors, it reads the archive only through
:class:`~ratchet.contracts.ArchiveView` and draws only from the rng it is given.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from ratchet.contracts import ArchiveView, Candidate
from ratchet.evolve.config import ScoredSelectorOptions
from ratchet.evolve.selectors import _ScoredSelector


class SoftMixedOptions(ScoredSelectorOptions):
    """AFlow's soft mixed-probability selection over the original and the best ``top_k`` others."""

    top_k: int = Field(default=6, ge=1)
    """Pool size besides the original: the best ``top_k`` candidates by score (AFlow: 6 rounds)."""
    alpha: float = Field(default=0.2, ge=0.0)
    """Softmax temperature on scores in percent (AFlow: 0.2); 0 makes the softmax part uniform."""
    uniform_share: float = Field(default=0.3, ge=0.0, le=1.0)
    """λ, the uniform part of the mix (AFlow: 0.3); 1 is a uniform draw, 0 a pure softmax."""
    scale: float = Field(default=100.0, gt=0.0)
    """Scores are multiplied by this before the softmax (AFlow works in percent)."""


def mixed_probabilities(scores: list[float], alpha: float, uniform_share: float, scale: float = 100.0) -> list[float]:
    """λ·uniform + (1−λ)·softmax(α·scale·(s − max)) for each score, in order (they sum to 1)."""
    top = max(scores)
    weights = [math.exp(alpha * scale * (s - top)) for s in scores]
    total = sum(weights)
    n = len(scores)
    return [uniform_share / n + (1.0 - uniform_share) * w / total for w in weights]


class SoftMixedSelector(_ScoredSelector):
    """``ratchet.workflows.selection:SoftMixedSelector``: AFlow's parent choice (see the module)."""

    name = "soft_mixed"
    Options = SoftMixedOptions
    options: SoftMixedOptions

    def candidates_and_probabilities(self, archive: ArchiveView) -> list[tuple[Candidate, float]]:
        pool = self.pool(archive)  # oldest first: the original leads
        original, rest = pool[0], pool[1:]
        best = sorted(rest, key=lambda pair: -pair[1])[: self.options.top_k]  # sorted() is stable on ties
        members = [original] + best
        probs = mixed_probabilities([s for _, s in members], self.options.alpha, self.options.uniform_share,
                                    self.options.scale)
        return [(c, p) for (c, _), p in zip(members, probs)]

    def select(self, archive: ArchiveView, rng: Any) -> Candidate:
        weighted = self.candidates_and_probabilities(archive)
        chosen = rng.choices([c for c, _ in weighted], weights=[p for _, p in weighted])[0]
        self.last = {"probability": {c.id: p for c, p in weighted}[chosen.id], "pool": len(weighted)}
        return chosen
