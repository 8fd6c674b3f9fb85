"""Which accepted candidate becomes the next parent: one small class per idea.

- :class:`GreedySelector`: the best score (the oldest on ties).
- :class:`DgmSelector` (Darwin Gödel Machine): p ∝ sigmoid(λ(score − midpoint)) × 1/(1 + children).
- :class:`ThompsonSelector` (REx, the AutoHarness tree): θ ~ Beta(1 + C·h, 1 + C·(1−h) + children).
- :class:`ParetoSelector` (GEPA): among the candidates best on at least one task and dominated by
  none, sampled in proportion to how many tasks each is best on.
- :class:`IslandsSelector` (OpenEvolve): islands taking turns, ring migration of each island's
  best, and inside an island a MAP-Elites grid over declared features against diversity collapse.

Every selector reads the archive only through :class:`ratchet.contracts.ArchiveView`, draws only
from the ``rng`` it is given (so a resumed run draws the same), and says why it chose in ``last``
(the loop stores that in the child's meta: the islands selector reads its island back from it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import fmean
from typing import Any, TypeVar

from ratchet.contracts import ArchiveView, Candidate, RatchetError
from ratchet.evolve.archive import per_task_means
from ratchet.evolve.config import (
    DgmOptions,
    IslandsOptions,
    ParetoOptions,
    ScoredSelectorOptions,
    ThompsonOptions,
)
from ratchet.evolve.context import EngineContext

T = TypeVar("T")


class _ScoredSelector:
    """Shared by every selector: the accepted candidates and their scores on one split.

    Built as ``Cls(options, ctx)`` with ``options`` of the class's ``Options`` model."""

    name = "scored"
    Options = ScoredSelectorOptions

    def __init__(self, options: ScoredSelectorOptions, ctx: EngineContext) -> None:
        self.options = options
        self.ctx = ctx
        self.last: dict[str, Any] = {}

    def pool(self, archive: ArchiveView) -> list[tuple[Candidate, float]]:
        split = self.options.split
        if self.options.pool == "scored":
            scored = [(c, archive.score(c.id, split)) for c in archive.candidates()]
            pool = [(c, s) for c, s in scored if s is not None]
        else:
            pool = [(c, archive.score(c.id, split) or 0.0) for c in archive.candidates("accepted")]
        if not pool:
            raise RatchetError(f"the archive holds no {self.options.pool} candidate to select from",
                               hint="the loop adds the original workspace first; was the run's archive deleted?")
        return pool


class GreedySelector(_ScoredSelector):
    name = "greedy"
    Options = ScoredSelectorOptions

    def select(self, archive: ArchiveView, rng: Any) -> Candidate:
        best, score = max(self.pool(archive), key=lambda pair: pair[1])  # max keeps the first of ties
        self.last = {"score": score}
        return best


class DgmSelector(_ScoredSelector):
    name = "dgm"
    Options = DgmOptions
    options: DgmOptions

    def weights(self, archive: ArchiveView) -> list[tuple[Candidate, float]]:
        o = self.options
        return [(c, 1.0 / (1.0 + math.exp(-o.sharpness * (s - o.midpoint))) / (1 + len(archive.children(c.id))))
                for c, s in self.pool(archive)]

    def select(self, archive: ArchiveView, rng: Any) -> Candidate:
        weighted = self.weights(archive)
        chosen = rng.choices([c for c, _ in weighted], weights=[w for _, w in weighted])[0]
        self.last = {"weight": dict((c.id, w) for c, w in weighted)[chosen.id]}
        return chosen


def thompson_draw(arms: Sequence[tuple[T, float, int]], rng: Any, c: float = 1.0,
                  extra: tuple[float, float] | None = None) -> tuple[T | None, float]:
    """REx's draw over ``arms``, each (key, h, visits): θ ~ Beta(1 + C·h, 1 + C·(1−h) + visits) for
    every arm in order, the argmax winning (the first on ties). With ``extra`` (the Beta parameters
    of one arm that is not a candidate) one more draw follows, which wins only when strictly
    higher; then the key is None. Returns the winner and its θ.

    What counts as a visit is the caller's: the engine counts a candidate's children in the
    archive; the AutoHarness tree counts refinements, failed and duplicate ones included, and adds
    its fresh-root arm as ``extra``."""
    draws = [(key, rng.betavariate(1.0 + c * h, 1.0 + c * (1.0 - h) + visits)) for key, h, visits in arms]
    best: tuple[T | None, float] = max(draws, key=lambda pair: pair[1]) if draws else (None, float("-inf"))
    if extra is not None:
        theta = rng.betavariate(*extra)
        if not draws or theta > best[1]:
            return None, theta
    return best


def pooled_arm(scores: Sequence[float], c: float = 1.0) -> tuple[float, float]:
    """Beta parameters of an arm that stands for drawing something new, pooled over the scores h of
    what such draws gave so far: Beta(1 + C·Σh, 1 + C·Σ(1−h)). AutoHarness's fresh-root arm (one
    score per root request, the best of its samples) is ``thompson_draw``'s ``extra``: with one root
    it is that root's own prior as a node, so a root refined without progress soon draws below it;
    every further root narrows it around the mean root score."""
    return 1.0 + c * sum(scores), 1.0 + c * sum(1.0 - h for h in scores)


class ThompsonSelector(_ScoredSelector):
    name = "thompson"
    Options = ThompsonOptions
    options: ThompsonOptions

    def select(self, archive: ArchiveView, rng: Any) -> Candidate:
        arms = [(cand, h, len(archive.children(cand.id))) for cand, h in self.pool(archive)]
        chosen, theta = thompson_draw(arms, rng, self.options.c)
        assert chosen is not None  # the pool is never empty (it raises)
        self.last = {"theta": theta}
        return chosen


class ParetoSelector(_ScoredSelector):
    name = "pareto"
    Options = ParetoOptions

    def front(self, archive: ArchiveView) -> dict[str, int]:
        """Candidate id -> number of tasks it is best on, for the non-dominated ones."""
        pool = [c for c, _ in self.pool(archive)]
        means = {c.id: per_task_means(archive.results(c.id, self.options.split)) for c in pool}
        tasks = sorted({t for m in means.values() for t in m})
        wins: dict[str, set[str]] = {c.id: set() for c in pool}
        for task in tasks:
            top = max(m.get(task, 0.0) for m in means.values())
            for cid, m in means.items():
                if m.get(task, 0.0) == top:
                    wins[cid].add(task)
        # A candidate whose winning tasks are a strict subset of another's adds nothing to the front.
        front = {cid: w for cid, w in wins.items()
                 if w and not any(w < other for o, other in wins.items() if o != cid)}
        return {cid: len(w) for cid, w in front.items()} or {pool[0].id: 1}

    def select(self, archive: ArchiveView, rng: Any) -> Candidate:
        front = self.front(archive)
        members = [c for c in archive.candidates("accepted") if c.id in front]  # oldest first: a stable order
        chosen = rng.choices(members, weights=[front[c.id] for c in members])[0]
        self.last = {"front": len(front), "wins": front[chosen.id]}
        return chosen


class IslandsSelector(_ScoredSelector):
    name = "islands"
    Options = IslandsOptions

    def __init__(self, options: IslandsOptions, ctx: EngineContext) -> None:
        super().__init__(options, ctx)
        self.options: IslandsOptions = options
        self.features = options.features if options.features is not None else list(ctx.manifest.features) or ["length"]

    def island_of(self, c: Candidate) -> int | None:
        """The island a candidate was bred on (None for the original, which belongs to all)."""
        return (c.meta.get("selection") or {}).get("island")

    def members(self, archive: ArchiveView, island: int, step: int) -> list[tuple[Candidate, float]]:
        pool = self.pool(archive)
        own = [(c, s) for c, s in pool if self.island_of(c) in (None, island)]
        if step >= self.options.migrate_every:
            # Ring migration: the neighbour's best lives here too (virtually: nothing is copied).
            neighbour = (island - 1) % self.options.islands
            theirs = [(c, s) for c, s in pool if self.island_of(c) == neighbour]
            if theirs:
                own.append(max(theirs, key=lambda pair: pair[1]))
        return own

    def feature_vector(self, archive: ArchiveView, c: Candidate) -> list[float]:
        results = archive.results(c.id, self.options.split)
        vector = []
        for name in self.features:
            if name == "length":
                vector.append(float(sum(len(text) for text in c.files.values())))
            else:
                values = [r.metrics[name] for r in results if name in r.metrics]
                vector.append(fmean(values) if values else 0.0)
        return vector

    def grid(self, archive: ArchiveView, members: list[tuple[Candidate, float]]) -> dict[tuple[int, ...], tuple[Candidate, float]]:
        """MAP-Elites: each cell of the feature grid keeps its best member (the oldest on ties)."""
        vectors = {c.id: self.feature_vector(archive, c) for c, _ in members}
        lows = [min(v[i] for v in vectors.values()) for i in range(len(self.features))]
        highs = [max(v[i] for v in vectors.values()) for i in range(len(self.features))]
        cells: dict[tuple[int, ...], tuple[Candidate, float]] = {}
        for c, s in members:
            cell = tuple(min(self.options.bins - 1, int((v - lo) / (hi - lo) * self.options.bins)) if hi > lo else 0
                         for v, lo, hi in zip(vectors[c.id], lows, highs))
            if cell not in cells or s > cells[cell][1]:
                cells[cell] = (c, s)
        return cells

    def select(self, archive: ArchiveView, rng: Any) -> Candidate:
        step = len(archive.candidates()) - 1  # proposals made so far: the islands take turns
        island = step % self.options.islands
        members = self.members(archive, island, step)
        cells = self.grid(archive, members)
        if rng.random() < self.options.explore:
            cell = rng.choice(sorted(cells))
        else:
            cell = max(sorted(cells), key=lambda k: cells[k][1])
        chosen = cells[cell][0]
        self.last = {"island": island, "cell": list(cell), "cells": len(cells)}
        return chosen
