"""AFlow's soft mixed-probability selection: the formula, the pool, and the draw over many tries."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from ratchet.contracts import Candidate, Selector
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.workflows.selection import SoftMixedOptions, SoftMixedSelector, mixed_probabilities


class Archive:
    def __init__(self, scores: list[float]) -> None:
        self.items = [Candidate(f"c{i}", "wf", {"f": str(i)}) for i in range(len(scores))]
        self.scores = {c.id: s for c, s in zip(self.items, scores)}

    def candidates(self, status=None):
        return list(self.items)

    def score(self, cid, split):
        return self.scores[cid]


def selector(tmp_path, **options) -> SoftMixedSelector:
    return SoftMixedSelector(SoftMixedOptions(**options), EngineContext(Manifest(name="wf", editable=["f"]), tmp_path))


def test_mixed_probabilities_follow_aflows_formula() -> None:
    probs = mixed_probabilities([0.5, 0.6, 0.4], alpha=0.2, uniform_share=0.3)
    soft = [math.exp(0.2 * 100 * (s - 0.6)) for s in (0.5, 0.6, 0.4)]
    assert probs == pytest.approx([0.3 / 3 + 0.7 * w / sum(soft) for w in soft])
    assert sum(probs) == pytest.approx(1.0)
    assert mixed_probabilities([0.1, 0.9], alpha=0.2, uniform_share=1.0) == pytest.approx([0.5, 0.5])
    assert mixed_probabilities([0.5, 0.5, 0.5], alpha=5.0, uniform_share=0.0) == pytest.approx([1 / 3] * 3)


def test_pool_is_the_original_and_the_best_top_k(tmp_path) -> None:
    archive = Archive([0.2, 0.9, 0.1, 0.5, 0.7])
    pool = selector(tmp_path, top_k=2).candidates_and_probabilities(archive)
    assert [c.id for c, _ in pool] == ["c0", "c1", "c4"]  # the original always, then the two best others
    assert isinstance(selector(tmp_path), Selector)


def test_draws_match_the_probabilities_and_keep_every_member_reachable(tmp_path) -> None:
    archive = Archive([0.3, 0.6, 0.5])
    sel = selector(tmp_path)
    expected = {c.id: p for c, p in sel.candidates_and_probabilities(archive)}
    rng = random.Random(7)
    counts = Counter(sel.select(archive, rng).id for _ in range(4000))
    for cid, p in expected.items():
        assert counts[cid] / 4000 == pytest.approx(p, abs=0.03)
    assert counts["c0"] > 0 and expected["c0"] < 0.15  # the weak original still drawn, through the uniform part
    assert sel.last["pool"] == 3 and 0 < sel.last["probability"] <= 1
