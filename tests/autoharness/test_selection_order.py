"""The tree's node choice is the engine's Thompson draw, and choosing through it kept the order the
AutoHarness tree's own copy chose in: sequences of 40 choices (with and without the fresh-root arm,
two values of C, three seeds, failed expansions counting as refinements) recorded from that copy
in ``data/selection_order.json`` before it was replaced."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ratchet.autoharness.tree import Tree, select_action
from ratchet.evolve.selectors import pooled_arm as fresh_root_arm
from ratchet.evolve.selectors import thompson_draw

RECORDED = json.loads((Path(__file__).parent / "data" / "selection_order.json").read_text())


def sequence(seed: int, c: float, fresh: bool) -> list[str | None]:
    rng, grow = random.Random(seed), random.Random(1000 + seed)
    tree = Tree()
    tree.add("n0", None, 0.3)
    roots, picks = [0.3], []
    for step in range(40):
        node = select_action(tree, rng, c, fresh_root_arm(roots, c) if fresh else None)
        pid = node.candidate_id if node else None
        picks.append(pid)
        h = round(grow.random(), 3)
        if grow.random() < 0.2 and pid is not None:  # a failed expansion or a duplicate: only the refinement counts
            tree.nodes[pid].refinements += 1
            continue
        if pid is None:
            roots.append(h)
        tree.add(f"n{step + 1}", pid, h)
    return picks


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_selection_order_is_the_recorded_one(key):
    seed, c, fresh = key.split("-")
    assert sequence(int(seed), float(c), fresh == "True") == RECORDED[key]


def test_the_recorded_orders_explore():
    """Each sequence refines several nodes, and the fresh arm wins sometimes: the pins pin choices."""
    for key, picks in RECORDED.items():
        assert len(set(picks)) >= 10
        assert (None in picks) == key.endswith("True")


def test_the_draw_counts_visits_and_the_extra_arm_wins_only_strictly():
    rng, twin = random.Random(3), random.Random(3)
    key, theta = thompson_draw([("a", 0.9, 0), ("b", 0.5, 4)], rng, 2.0)
    draws = {"a": twin.betavariate(1 + 2 * 0.9, 1 + 2 * 0.1), "b": twin.betavariate(1 + 2 * 0.5, 1 + 2 * 0.5 + 4)}
    assert key == max(draws, key=draws.get) and theta == max(draws.values())
    assert thompson_draw([("a", 0.5, 0)], random.Random(0), 1.0, (1e6, 1.0))[0] is None
    assert thompson_draw([("a", 0.5, 0)], random.Random(0), 1.0, (1.0, 1e6))[0] == "a"
    assert thompson_draw([], random.Random(0), 1.0, (1.0, 1.0))[0] is None
