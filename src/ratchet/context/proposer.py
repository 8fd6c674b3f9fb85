"""The playbook as an engine surface: a proposer whose only change is ``playbook.md``.

A run config names it by import path, as any proposer:
``{name: "ratchet.context.proposer:CuratorProposer", options: {...}}``.

For a parent it reads the parent's playbook (an absent file is an empty playbook) and the parent's
per-task results on the split it may read; each failed task (worst seed first, at most
``max_failures``) is one ACE step, the learner's own (:class:`ratchet.context.step.LearningStep`):
the reflector reads the task's trace and failures and names a lesson (and tags the items chosen for
it), the curator turns the lesson into operations, a repeated ADD is folded (by meaning with an
encoder, by exact text without), the tag strategy ``context.tags`` (default ``evidence``) keeps the
tags the task's score supports and records the others with why in ``meta.steps``, the operations
are applied by deterministic code, the result pruned. The new playbook is the whole proposal;
the engine's gate judges it on held-in evidence like any other candidate. When no operation
survives (nothing failed, no lesson, every operation malformed) it returns a
:class:`~ratchet.contracts.Skip` naming why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from ratchet.config import Settings
from ratchet.context.budget import select
from ratchet.context.config import ContextConfig
from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.context.similarity import Embedder
from ratchet.context.step import LearningStep
from ratchet.contracts import ArchiveView, Candidate, Claim, Proposal, RatchetError, Skip, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.proposers.base import BaseProposer


class CuratorProposerOptions(Settings):
    """ACE's reflector and curator over the parent's failed tasks, proposing a new playbook file."""

    surface: str = "playbook.md"
    """The playbook file of the candidate; the proposal changes only this file."""
    split: str = "search"
    """The split whose per-task results are read (the one proposers may see, never held-in)."""
    max_failures: int = Field(4, ge=1)
    """Most failed tasks reflected on per proposal (lowest score first): each costs one reflector
    call and, when it names a lesson, up to ``1 + context.max_retries`` curator calls."""
    context: ContextConfig = Field(default_factory=ContextConfig)
    """Budget, pruning, de-duplication and sampling of the reflector and curator (as ``ratchet context``)."""
    embed: bool = False
    """Use the sentence encoder (``context.encoder``, pulled with ``ratchet models pull``) to fold
    near-duplicate ADDs and rank items by relevance; off: items are chosen by their record alone."""


def _failed(results: Sequence[TaskResult]) -> list[TaskResult]:
    """One result per task that was not solved: its worst seed, worst first, then by id."""
    worst: dict[str, TaskResult] = {}
    for r in results:
        if r.score < 1.0 and (r.task_id not in worst or r.score < worst[r.task_id].score):
            worst[r.task_id] = r
    return sorted(worst.values(), key=lambda r: (r.score, r.task_id))


def _trajectory(result: TaskResult) -> str:
    """What the reflector reads of a failed task: its failures, then its trace."""
    lines = [f"- {f.kind}: {f.message}" for f in result.failures[:5]]
    return "\n".join(([("Failures:\n" + "\n".join(lines))] if lines else []) + [result.trace])


class CuratorProposer(BaseProposer):
    """Reflects on the parent's failed tasks and curates its playbook (see the module docstring)."""

    name = "curator"
    Options = CuratorProposerOptions
    deterministic = False

    def __init__(self, options: CuratorProposerOptions, ctx: EngineContext | None = None,
                 embedder: Embedder | None = None) -> None:
        self.options = options
        self.ctx = ctx
        if ctx is None or ctx.model is None:
            raise RatchetError("the curator proposer needs the run's model (reflector and curator)",
                               hint="set model: in the evolve config")
        c = options.context
        if embedder is None and options.embed:
            from ratchet.context.similarity import SentenceEmbedder

            embedder = SentenceEmbedder(c.encoder)
        self.embedder = embedder
        # The learner's step: the same folding of repeated ADDs and the same tag strategy (``context.tags``).
        self.step = LearningStep(c, ctx.model, embedder=embedder)

    def propose(self, parent: Candidate, archive: ArchiveView, rng: Any = None) -> Proposal | Skip:
        o, c = self.options, self.options.context
        try:
            book = Playbook.parse(parent.files.get(o.surface, ""), f"{parent.id}:{o.surface}")
        except PlaybookError as exc:
            return self.skip(parent, f"the parent's {o.surface} does not parse: {exc}")
        failed = _failed(archive.results(parent.id, o.split))
        if not failed:
            return self.skip(parent, f"the parent fails no {o.split} task: no failure to reflect on")
        start = book.render()
        steps, lessons, problems, applied_total, pruned = [], [], 0, 0, 0
        for result in failed[: o.max_failures]:
            # What the proposer knows of the task is its trace (the reply, the test output): the text
            # items are chosen for and the scope an ADD's item keeps.
            trace = _trajectory(result)
            chosen = select(book, trace, c.budget_tokens, embedder=self.embedder, record_weight=c.record_weight,
                            min_relevance=c.min_relevance).items
            # The parent's attempt had the items its workflow chose for the task; these are the ones
            # chosen here by the same rule, as an online learner counts what it would show now.
            step = self.step.run(book, task=f"task {result.task_id}", trace=trace, score=result.score,
                                 chosen=chosen, shown={i.id for i in chosen},
                                 source=f"{parent.id}/{o.split}/{result.task_id}@{result.seed}", origin=trace)
            book = step.playbook
            applied_total += len(step.applied)
            pruned += len(step.pruned)
            problems += len(step.problems)
            if step.reflection.lesson:
                lessons.append(step.reflection.lesson)
            steps.append({"task": result.task_id, **step.record()})
        text = book.render()
        reflected = len(steps)
        if applied_total == 0 or text == start:
            why = ("no lesson was named" if not lessons else
                   f"{len(lessons)} lessons gave no operation that applies ({problems} problems)")
            return self.skip(parent, f"no playbook operation survived for {reflected} failed {o.split} tasks: {why}",
                             steps=steps)
        target = f"{len(failed)} failed {o.split} tasks: {', '.join(r.task_id for r in failed[:8])}"
        claim = Claim(target=target, root_cause="; ".join(lessons)[:600] or "counters of the items the failures used",
                      predicted_flips=tuple(r.task_id for r in failed[:reflected] if r.score < 0.5))
        return Proposal(files={o.surface: text}, claim=claim, proposer=self.name, parents=(parent.id,),
                        meta={"surfaces": [o.surface], "reflected": reflected, "applied": applied_total,
                              "problems": problems, "pruned": pruned, "items": len(book), "steps": steps})
