"""The engine's Thompson draw (``evolve.selectors.thompson_draw``), which AutoHarness's selector uses:
Beta(1 + C·h, 1 + C·(1−h) + visits) per node, and an extra arm that wins only strictly."""

from __future__ import annotations

import random

from ratchet.evolve.selectors import thompson_draw


def test_the_draw_counts_visits_and_the_extra_arm_wins_only_strictly():
    rng, twin = random.Random(3), random.Random(3)
    key, theta = thompson_draw([("a", 0.9, 0), ("b", 0.5, 4)], rng, 2.0)
    draws = {"a": twin.betavariate(1 + 2 * 0.9, 1 + 2 * 0.1), "b": twin.betavariate(1 + 2 * 0.5, 1 + 2 * 0.5 + 4)}
    assert key == max(draws, key=draws.get) and theta == max(draws.values())
    assert thompson_draw([("a", 0.5, 0)], random.Random(0), 1.0, (1e6, 1.0))[0] is None
    assert thompson_draw([("a", 0.5, 0)], random.Random(0), 1.0, (1.0, 1e6))[0] == "a"
    assert thompson_draw([], random.Random(0), 1.0, (1.0, 1.0))[0] is None
