"""Every selector against a small in-memory archive: the choice follows its rule, draws come only
from the given RNG, and the bias each is known for shows up over many draws."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from ratchet.contracts import Candidate, Decision, TaskResult
from ratchet.evolve.config import DgmOptions, IslandsOptions, ParetoOptions, ScoredSelectorOptions, ThompsonOptions
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.selectors import DgmSelector, GreedySelector, IslandsSelector, ParetoSelector, ThompsonSelector


class MemoryArchive:
    """ArchiveView over plain dicts: per-task held-in scores, children counts, statuses."""

    def __init__(self) -> None:
        self.items: list[tuple[Candidate, str]] = []
        self.per_task: dict[str, dict[str, float]] = {}

    def add(self, name: str, per_task: dict[str, float], parent: str | None = None, status: str = "accepted",
            size: int = 10, **meta) -> Candidate:
        c = Candidate(name, "k", {"f.txt": "x" * size}, parent, meta)
        self.items.append((c, status))
        self.per_task[name] = per_task
        return c

    def candidates(self, status: str | None = None) -> list[Candidate]:
        return [c for c, s in self.items if status is None or s == status]

    def results(self, candidate_id: str, split: str) -> list[TaskResult]:
        return [TaskResult(t, 0, v) for t, v in self.per_task.get(candidate_id, {}).items()]

    def score(self, candidate_id: str, split: str) -> float | None:
        scores = list(self.per_task[candidate_id].values())
        return sum(scores) / len(scores) if scores else None

    def children(self, candidate_id: str) -> list[str]:
        return [c.id for c, _ in self.items if c.parent_id == candidate_id]

    def rejected(self, limit: int = 10) -> list[tuple[Candidate, Decision]]:
        return []


def ctx(features: list[str] | None = None) -> EngineContext:
    return EngineContext(Manifest(name="k", editable=["*"], features=features or []), Path("."))


def counts(selector, archive, n: int = 2000, seed: int = 0) -> Counter:
    rng = random.Random(seed)
    return Counter(selector.select(archive, rng).id for _ in range(n))


def test_greedy_takes_the_best_and_the_oldest_on_ties() -> None:
    a = MemoryArchive()
    a.add("root", {"t1": 0.5})
    a.add("good", {"t1": 0.9}, "root")
    a.add("tie", {"t1": 0.9}, "root")
    a.add("lost", {"t1": 1.0}, "root", status="rejected")
    assert counts(GreedySelector(ScoredSelectorOptions(), ctx()), a, 20) == Counter({"good": 20})


def test_dgm_weights_are_sigmoid_times_inverse_children() -> None:
    a = MemoryArchive()
    a.add("root", {"t": 0.6})
    a.add("busy", {"t": 0.8}, "root")
    for i in range(3):
        a.add(f"kid{i}", {"t": 0.1}, "busy", status="rejected")
    selector = DgmSelector(DgmOptions(sharpness=10, midpoint=0.5), ctx())
    weights = {c.id: w for c, w in selector.weights(a)}
    assert weights["root"] == pytest.approx(1 / (1 + math.exp(-1.0)) / 2)  # one child: busy
    assert weights["busy"] == pytest.approx(1 / (1 + math.exp(-3.0)) / 4)  # three children
    seen = counts(selector, a)
    share = seen["root"] / sum(seen.values())
    assert abs(share - weights["root"] / sum(weights.values())) < 0.04  # the better one is picked less: it is busy


def test_thompson_draws_beta_with_a_children_penalty() -> None:
    a = MemoryArchive()
    a.add("root", {"t": 0.5})
    a.add("best", {"t": 0.9}, "root")
    selector = ThompsonSelector(ThompsonOptions(c=1.0), ctx())
    rng, twin = random.Random(7), random.Random(7)
    chosen = selector.select(a, rng)
    draws = {"root": twin.betavariate(1.5, 1.5 + 1), "best": twin.betavariate(1.9, 1.1)}
    assert chosen.id == max(draws, key=draws.get) and selector.last["theta"] == max(draws.values())
    fresh = counts(selector, a)
    anyone = ThompsonSelector(ThompsonOptions(pool="scored"), ctx())
    a.add("lost", {"t": 1.0}, "root", status="rejected")  # the AutoHarness tree: rejected versions are nodes too
    assert counts(anyone, a, 200)["lost"] > 0 and "lost" not in counts(selector, a, 200)
    a.items.pop()
    for i in range(8):  # refining "best" eight times without progress makes it far less attractive
        a.add(f"kid{i}", {"t": 0.0}, "best", status="rejected")
    tired = counts(selector, a)
    assert fresh["best"] > fresh["root"] and tired["best"] < fresh["best"] / 2


def test_pareto_samples_the_non_dominated_by_their_wins() -> None:
    a = MemoryArchive()
    a.add("root", {"t1": 0.0, "t2": 0.0, "t3": 0.0, "t4": 0.0})
    a.add("wide", {"t1": 1.0, "t2": 1.0, "t3": 0.0, "t4": 0.5}, "root")
    a.add("niche", {"t1": 0.0, "t2": 0.0, "t3": 1.0, "t4": 0.0}, "root")
    a.add("shadow", {"t1": 1.0, "t2": 0.0, "t3": 0.0, "t4": 0.5}, "root")  # best only where "wide" is too
    selector = ParetoSelector(ParetoOptions(), ctx())
    assert selector.front(a) == {"wide": 3, "niche": 1}
    seen = counts(selector, a)
    assert set(seen) == {"wide", "niche"} and abs(seen["wide"] / 2000 - 0.75) < 0.04


def test_islands_take_turns_migrate_and_keep_map_elites_cells() -> None:
    a = MemoryArchive()
    a.add("root", {"t": 0.2}, size=10)
    a.add("i0-long", {"t": 0.5}, "root", size=1000, selection={"island": 0})
    a.add("i0-short", {"t": 0.4}, "root", size=12, selection={"island": 0})
    a.add("i1-best", {"t": 0.9}, "root", size=500, selection={"island": 1})
    selector = IslandsSelector(IslandsOptions(islands=2, migrate_every=10, bins=2, explore=0.0), ctx(["length"]))
    # 4 candidates -> step 3 -> island 1; before migration island 1 sees only its own and the root.
    assert {c.id for c, _ in selector.members(a, 1, 3)} == {"root", "i1-best"}
    assert selector.select(a, random.Random(0)).id == "i1-best" and selector.last["island"] == 1
    assert {c.id for c, _ in selector.members(a, 1, 10)} == {"root", "i1-best", "i0-long"}  # migrant arrives
    cells = selector.grid(a, selector.members(a, 0, 2))
    elites = {c.id for c, _ in cells.values()}
    assert elites == {"i0-long", "i0-short"}  # two length cells: the short one survives beside the better long one
    a.add("i1-kid", {"t": 0.0}, "i1-best", status="rejected", selection={"island": 1})  # step 4 -> island 0
    explorer = IslandsSelector(IslandsOptions(islands=2, migrate_every=10, bins=2, explore=1.0), ctx(["length"]))
    assert set(counts(explorer, a, 400)) == {"i0-long", "i0-short"}
    exploiter = IslandsSelector(IslandsOptions(islands=2, migrate_every=10, bins=2, explore=0.0), ctx(["length"]))
    assert set(counts(exploiter, a, 50)) == {"i0-long"}
