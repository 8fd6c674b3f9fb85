"""Learning a playbook: online (``observe`` after each task) and offline (over stored trajectories).

One step: choose the items for the task (token budget, least relevance), then the step every
path shares (:class:`ratchet.context.step.LearningStep`: reflector, curator, folding of repeated
ADDs, the tags the evidence supports, deterministic application, pruning), then save the file
atomically and record the version in the run store. The counts of malformed reflector/curator output are kept in
:attr:`ContextLearner.stats` and in each history line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.context.budget import select
from ratchet.context.config import ContextConfig
from ratchet.context.history import PlaybookHistory
from ratchet.context.operations import Add
from ratchet.context.playbook import Playbook
from ratchet.context.roles import playbook_tokens
from ratchet.context.similarity import Embedder
from ratchet.context.step import LearningStep
from ratchet.contracts import Model
from ratchet.store.run import Run


@dataclass(frozen=True)
class Trajectory:
    """One attempt at a task: what was asked, what happened (text), and how it went (score in
    [0, 1]). ``id`` names it in the items' provenance."""

    id: str
    task: str
    trace: str
    score: float
    shown: frozenset[str] | None = None
    """The ids of the playbook items that were in the attempt's context, which alone its outcome
    can say anything about: only they get the reflector's helpful/harmful tags. None: the items the
    learner selects for the task now (an attempt just made with this playbook, ``observe``); empty:
    none (an attempt stored before the playbook existed, as offline learning reads them)."""
    stated: Add | None = None
    """A lesson the evidence already states (a served turn's correction, in the user's words), as
    the ADD that files it: applied as it stands, no reflector or curator asked. None: the reflector
    reads the trace and the curator files its lesson."""


@dataclass
class LearnStats:
    steps: int = 0
    applied: int = 0
    duplicates: int = 0
    pruned: int = 0
    curator_problems: int = 0
    reflector_problems: int = 0
    curator_calls: int = 0
    tags_dropped: int = 0
    sizes: list[int] = field(default_factory=list)


class ContextLearner:
    """Keeps the playbook at ``path`` (loaded now, saved after every step)."""

    def __init__(self, path: str | Path, *, reflector_model: Model, curator_model: Model | None = None,
                 config: ContextConfig | None = None, embedder: Embedder | None = None,
                 run: Run | None = None, name: str = "playbook") -> None:
        self.path = Path(path)
        self.config = config or ContextConfig()
        self.playbook = Playbook.load(self.path)
        self.embedder = embedder
        self.step = LearningStep(self.config, reflector_model, curator_model, embedder)
        self.history = PlaybookHistory(run, name) if run is not None else None
        self.stats = LearnStats()
        entries = self.history.entries() if self.history else []
        self.done: set[str] = {e["trajectory"] for e in entries if e.get("trajectory")}
        recorded = max((e["version"] for e in entries), default=0)
        if self.history is not None and recorded > self.playbook.version:
            self.playbook = self.history.load(recorded)  # killed after recording, before saving the file

    def observe(self, task: str, trajectory: str, outcome: float, *, trajectory_id: str = "",
                shown: frozenset[str] | None = None, stated: Add | None = None) -> dict[str, Any]:
        """Learn from one finished attempt (the online call); ``shown``: the ids of the items its
        prompt held, when the caller knows them (None: those the learner selects for the task now);
        ``stated``: a lesson the evidence states (:attr:`Trajectory.stated`). Returns the step's
        history entry."""
        return self.learn_one(Trajectory(trajectory_id or f"t{self.stats.steps + 1}", task, trajectory, outcome,
                                         shown=shown, stated=stated))

    def learn(self, trajectories: Iterable[Trajectory]) -> LearnStats:
        """Learn from stored attempts in order (offline). Trajectories already in this run's
        history are skipped, so a killed learn resumes where it stopped."""
        for t in trajectories:
            if t.id not in self.done:
                self.learn_one(t)
        return self.stats

    def learn_one(self, t: Trajectory) -> dict[str, Any]:
        c = self.config
        chosen = select(self.playbook, t.task, c.budget_tokens, embedder=self.embedder,
                        record_weight=c.record_weight, min_relevance=c.min_relevance).items
        # The reflector judges the items the attempt had, whether or not they are chosen for the task now.
        chosen += [item for key, item in self.playbook.items.items() if t.shown and key in t.shown and item not in chosen]
        shown = {i.id for i in chosen} if t.shown is None else t.shown
        step = self.step.run(self.playbook, task=t.task, trace=t.trace, score=t.score, chosen=chosen, shown=shown,
                             source=t.id, origin=t.task, stated=t.stated)
        book = self.playbook = step.playbook
        reflection, curation = step.reflection, step.curation
        s = self.stats
        s.steps += 1
        s.applied += len(step.applied)
        s.duplicates += len(step.duplicates)
        s.pruned += len(step.pruned)
        s.reflector_problems += len(reflection.problems)
        s.curator_problems += len(curation.problems) if curation else 0
        s.curator_problems += len(step.apply_problems)
        s.curator_calls += curation.attempts if curation else 0
        s.tags_dropped += len(step.refused)
        s.sizes.append(len(book))
        record = step.record()
        entry = {"trajectory": t.id, "score": t.score, "tokens": playbook_tokens(book), "lesson": record.pop("lesson"),
                 **record}
        # The run's history first, the file second: a run killed between them resumes from the
        # history (see __init__), so the file never holds a step the history lacks.
        if self.history is not None:
            self.history.record(book, entry)
        book.save(self.path)
        self.done.add(t.id)
        return {"version": book.version, "items": len(book), **entry}

    def sizes(self) -> list[dict[str, Any]]:
        """The playbook's size after every learning step so far: items and tokens per version."""
        return self.history.sizes() if self.history is not None else []

