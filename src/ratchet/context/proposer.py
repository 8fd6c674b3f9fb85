"""The playbook as an engine surface: a proposer whose only change is ``playbook.md``.

A run config names it by import path, as any proposer:
``{name: "ratchet.context.proposer:CuratorProposer", options: {...}}``.

For a parent it reads the parent's playbook (an absent file is an empty playbook) and the parent's
per-task results on the split it may read; each failed task (worst seed first, at most
``max_failures``) is one ACE step: the reflector reads the task's trace and failures and names a
lesson (and tags the items chosen for it), the curator turns the lesson into operations, which are
applied by deterministic code (:func:`ratchet.context.operations.apply_operations`), near-duplicate
ADDs folded when an encoder is given, the result pruned. The new playbook is the whole proposal;
the engine's gate judges it on held-in evidence like any other candidate. When no operation
survives (nothing failed, no lesson, every operation malformed) it returns a
:class:`~ratchet.contracts.Skip` naming why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pydantic import Field

from ratchet.config import Settings
from ratchet.context.budget import prune, select
from ratchet.context.config import ContextConfig
from ratchet.context.learner import outcome_text
from ratchet.context.operations import Add, Operation, Tag, apply_operations
from ratchet.context.playbook import Playbook, PlaybookError
from ratchet.context.roles import Curator, Prompts, Reflector
from ratchet.context.similarity import Deduplicator, Embedder
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


def _fold_exact(book: Playbook, ops: list[Operation]) -> tuple[list[Operation], int]:
    """Without an encoder, an ADD whose text is an item's (case and spacing aside) is that lesson
    learned again: a helpful TAG of the item, as de-duplication by meaning would make it; a repeat
    within the same list is dropped. Returns the operations and how many were folded."""
    def key(text: str) -> str:
        return " ".join(text.lower().split())

    known = {key(item.text): item.id for item in book.items.values()}
    out: list[Operation] = []
    seen: set[str] = set()
    folded = 0
    for op in ops:
        if isinstance(op, Add):
            k = key(op.text)
            if k in known or k in seen:
                folded += 1
                if k in known:
                    out.append(Tag(known[k], "helpful"))
                continue
            seen.add(k)
        out.append(op)
    return out, folded


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
        prompts = Prompts.load(c.prompts)
        self.reflector = Reflector(ctx.model, prompts, temperature=c.temperature, max_tokens=c.max_tokens,
                                   use_grammar=c.use_grammar)
        self.curator = Curator(ctx.model, prompts, temperature=c.temperature, max_tokens=c.max_tokens,
                               max_retries=c.max_retries, use_grammar=c.use_grammar)
        if embedder is None and options.embed:
            from ratchet.context.similarity import SentenceEmbedder

            embedder = SentenceEmbedder(c.encoder)
        self.embedder = embedder
        self.dedup = Deduplicator(embedder, c.dedup_threshold) if embedder is not None and c.dedup else None

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
        steps, lessons, problems, applied_total = [], [], 0, 0
        for result in failed[: o.max_failures]:
            trace = _trajectory(result)
            chosen = select(book, trace, c.budget_tokens, embedder=self.embedder, record_weight=c.record_weight,
                            min_relevance=c.min_relevance).items
            outcome = outcome_text(result.score)
            reflection = self.reflector.reflect(f"task {result.task_id}", trace[-c.trace_chars:], outcome, chosen)
            curation = self.curator.curate(book, chosen, reflection.lesson, outcome) if reflection.lesson else None
            ops = list(reflection.tags) + (curation.ops if curation else [])
            duplicates, folded = [], 0
            if self.dedup is not None:
                ops, duplicates = self.dedup.rewrite(book, ops)
            else:
                ops, folded = _fold_exact(book, ops)
            applied = apply_operations(book, ops, source=f"{parent.id}/{o.split}/{result.task_id}@{result.seed}")
            book = applied.playbook
            applied_total += len(applied.applied)
            found = len(reflection.problems) + (len(curation.problems) if curation else 0) + len(applied.problems)
            problems += found
            if reflection.lesson:
                lessons.append(reflection.lesson)
            steps.append({"task": result.task_id, "lesson": reflection.lesson, "applied": applied.applied,
                          "duplicates": [asdict(d) for d in duplicates], "folded": folded,
                          "problems": found})
        cuts = prune(book, margin=c.prune_margin, max_items=c.max_items)
        if cuts:
            version = book.version
            book = apply_operations(book, cuts).playbook
            book.version = version  # pruning is part of the same proposal, not a version of its own
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
                              "problems": problems, "pruned": len(cuts), "items": len(book), "steps": steps})
