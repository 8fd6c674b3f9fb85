"""Learning a playbook: online (``observe`` after each task) and offline (over stored trajectories).

One step: choose the items for the task (token budget, least relevance), let the reflector tag
them and name a lesson, let the curator turn the lesson into operations, fold near-duplicate ADDs,
keep the tags the evidence supports (:mod:`.tagging`), apply everything deterministically (an
ADD's item keeps the task it came from, its scope), prune, save the file atomically and record
the version in the run store. The counts of malformed reflector/curator output are kept in
:attr:`ContextLearner.stats` and in each history line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ratchet.context.budget import prune, select
from ratchet.context.config import ContextConfig
from ratchet.context.history import PlaybookHistory
from ratchet.context.operations import Problem, apply_operations, op_record
from ratchet.context.playbook import Playbook
from ratchet.context.roles import Curation, Curator, Prompts, Reflection, Reflector, playbook_tokens
from ratchet.context.similarity import Deduplicator, Embedder
from ratchet.context.tagging import tag_policy
from ratchet.contracts import BudgetExceeded, Model, RatchetError
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


def outcome_text(score: float) -> str:
    if score >= 1.0:
        return f"success (score {score:g})"
    return f"failure (score {score:g})" if score <= 0.0 else f"partial (score {score:g})"


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
        prompts = Prompts.load(self.config.prompts)
        c = self.config
        self.reflector = Reflector(reflector_model, prompts, temperature=c.temperature, max_tokens=c.max_tokens,
                                   use_grammar=c.use_grammar)
        self.curator = Curator(curator_model or reflector_model, prompts, temperature=c.temperature,
                               max_tokens=c.max_tokens, max_retries=c.max_retries, use_grammar=c.use_grammar,
                               operations=c.curator_operations)
        self.embedder = embedder
        self.dedup = Deduplicator(embedder, c.dedup_threshold) if embedder is not None and c.dedup else None
        self.tags = tag_policy(c.tags)
        self.history = PlaybookHistory(run, name) if run is not None else None
        self.stats = LearnStats()
        entries = self.history.entries() if self.history else []
        self.done: set[str] = {e["trajectory"] for e in entries if e.get("trajectory")}
        recorded = max((e["version"] for e in entries), default=0)
        if self.history is not None and recorded > self.playbook.version:
            self.playbook = self.history.load(recorded)  # killed after recording, before saving the file

    def observe(self, task: str, trajectory: str, outcome: float, *, trajectory_id: str = "",
                shown: frozenset[str] | None = None) -> dict[str, Any]:
        """Learn from one finished attempt (the online call); ``shown``: the ids of the items its
        prompt held, when the caller knows them (None: those the learner selects for the task now).
        Returns the step's history entry."""
        return self.learn_one(Trajectory(trajectory_id or f"t{self.stats.steps + 1}", task, trajectory, outcome,
                                         shown=shown))

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
        outcome = outcome_text(t.score)
        # A call the model refuses (a prompt past its context window: an unbudgeted playbook that
        # grew too long) is a problem of this step, counted and recorded; the learning goes on.
        try:
            reflection = self.reflector.reflect(t.task, t.trace[-c.trace_chars:], outcome, chosen)
        except BudgetExceeded:
            raise
        except RatchetError as exc:
            reflection = Reflection(problems=[Problem(None, f"the reflector's call failed: {exc}"[:300])])
        curation = None
        if reflection.lesson:
            try:
                curation = self.curator.curate(self.playbook, chosen, reflection.lesson, outcome)
            except BudgetExceeded:
                raise
            except RatchetError as exc:
                curation = Curation(problems=[Problem(None, f"the curator's call failed: {exc}"[:300])], attempts=1)
        ops = list(reflection.tags) + (curation.ops if curation else [])
        duplicates = []
        if self.dedup is not None:
            ops, duplicates = self.dedup.rewrite(self.playbook, ops)
        # A tag is evidence only about an item the attempt saw, whoever emits it (the reflector, the
        # curator, or de-duplication turning a repeated ADD into "helpful"): a trajectory made
        # without the playbook (offline) moves no counter. Measured before: one item +17 over 17
        # unrelated HumanEval problems none of which saw it, from tags and from re-ADDs alike.
        # The tag strategy (``tags``) may refuse more, and says why for each.
        shown = {i.id for i in chosen} if t.shown is None else t.shown
        ops, refused = self.tags.filter(ops, shown, t.score)
        applied = apply_operations(self.playbook, ops, source=t.id, origin=t.task)
        book = applied.playbook
        cuts = prune(book, margin=c.prune_margin, max_items=c.max_items)
        if cuts:
            pruned = apply_operations(book, cuts)
            pruned.playbook.version = book.version  # one learning step is one version
            book = pruned.playbook
        self.playbook = book
        s = self.stats
        s.steps += 1
        s.applied += len(applied.applied)
        s.duplicates += len(duplicates)
        s.pruned += len(cuts)
        s.reflector_problems += len(reflection.problems)
        s.curator_problems += len(curation.problems) if curation else 0
        s.curator_problems += len(applied.problems)
        s.curator_calls += curation.attempts if curation else 0
        s.tags_dropped += len(refused)
        s.sizes.append(len(book))
        entry = {"trajectory": t.id, "score": t.score, "tokens": playbook_tokens(book), "lesson": reflection.lesson,
                 "tags_dropped": [asdict(d) for d in refused],  # {id, tag, why}
                 "applied": applied.applied, "pruned": [op_record(op) for op in cuts],
                 "duplicates": [asdict(d) for d in duplicates],
                 "problems": [asdict(p) for p in (reflection.problems + (curation.problems if curation else [])
                                                  + applied.problems)]}
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

