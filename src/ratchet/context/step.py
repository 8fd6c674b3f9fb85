"""One ACE learning step, the same for every path that learns a playbook.

The learner (offline and online, ``ratchet serve`` included) and the engine's curator proposer
both run :meth:`LearningStep.run`: the reflector reads the attempt and tags the items it was shown,
the curator turns the lesson into operations, repeated ADDs are folded (:func:`folder`), the tag
strategy of ``ContextConfig.tags`` keeps the tags the evidence supports and records the others
with why, everything is applied by code (an ADD's item keeps the task it came from, its scope),
and the result is pruned. Before this module the proposer applied the reflector's tags itself and
so counted a ``helpful`` on a failed task, which the first HumanEval trial showed is how a harmful
rule collects +33/-0 and is never pruned.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ratchet.context.budget import prune
from ratchet.context.config import ContextConfig
from ratchet.context.operations import Add, Delete, Problem, apply_operations, op_record
from ratchet.context.playbook import Item, Playbook
from ratchet.context.roles import Curation, Curator, Prompts, Reflection, Reflector
from ratchet.context.similarity import Deduplicator, Duplicate, Embedder, ExactDuplicates
from ratchet.context.tagging import DroppedTag, TagPolicy, tag_policy
from ratchet.contracts import BudgetExceeded, Model, RatchetError


def outcome_text(score: float) -> str:
    if score >= 1.0:
        return f"success (score {score:g})"
    return f"failure (score {score:g})" if score <= 0.0 else f"partial (score {score:g})"


def folder(config: ContextConfig, embedder: Embedder | None) -> Deduplicator | ExactDuplicates | None:
    """What folds an ADD that repeats an item: by meaning with an encoder, by exact text (case and
    spacing aside) without one, nothing when ``dedup`` is off (ACE's add-only arm)."""
    if not config.dedup:
        return None
    return Deduplicator(embedder, config.dedup_threshold) if embedder is not None else ExactDuplicates()


@dataclass
class StepResult:
    """What one step did: the new playbook (pruned) and everything the history records of it."""

    playbook: Playbook
    reflection: Reflection
    curation: Curation | None
    applied: list[dict] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    refused: list[DroppedTag] = field(default_factory=list)
    pruned: list[Delete] = field(default_factory=list)
    apply_problems: list[Problem] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return self.reflection.problems + (self.curation.problems if self.curation else []) + self.apply_problems

    def record(self) -> dict[str, Any]:
        """The step's history fields (a learner's history line, a proposal's ``meta.steps``)."""
        return {"lesson": self.reflection.lesson,
                "tags_dropped": [asdict(d) for d in self.refused],  # {id, tag, why}
                "applied": self.applied, "pruned": [op_record(op) for op in self.pruned],
                "duplicates": [asdict(d) for d in self.duplicates],
                "problems": [asdict(p) for p in self.problems]}


class LearningStep:
    """The reflector, curator, folding and tag strategy of one ``ContextConfig``."""

    def __init__(self, config: ContextConfig, reflector_model: Model, curator_model: Model | None = None,
                 embedder: Embedder | None = None, tags: TagPolicy | None = None) -> None:
        c = self.config = config
        prompts = Prompts.load(c.prompts, c.prompt_set)
        self.reflector = Reflector(reflector_model, prompts, temperature=c.temperature, max_tokens=c.max_tokens,
                                   use_grammar=c.use_grammar)
        self.curator = Curator(curator_model or reflector_model, prompts, temperature=c.temperature,
                               max_tokens=c.max_tokens, max_retries=c.max_retries, use_grammar=c.use_grammar,
                               operations=c.curator_operations)
        self.folder = folder(c, embedder)
        self.tags = tags or tag_policy(c.tags)

    def run(self, book: Playbook, *, task: str, trace: str, score: float, chosen: list[Item],
            shown: frozenset[str] | set[str], source: str, origin: str, stated: Add | None = None) -> StepResult:
        """One step on ``book`` (left unchanged) for an attempt at ``task`` that scored ``score``:
        ``chosen`` are the items the reflector and curator read, ``shown`` the ids of those the
        attempt had in its prompt (the only ones a tag may count for), ``source`` the attempt's
        name in the provenance and ``origin`` the task text an ADD's item keeps. ``stated``: a
        lesson the evidence states, applied as it stands (folded into an item it repeats) with no
        reflector or curator call, so no model's tags: the 1.5B as curator, handed five users'
        instructions in their words, dropped two and overwrote a third with the next one."""
        c = self.config
        outcome = outcome_text(score)
        # A call the model refuses (a prompt past its context window: an unbudgeted playbook that
        # grew too long) is a problem of this step, counted and recorded; the learning goes on.
        try:
            reflection = (Reflection(lesson=stated.text) if stated is not None
                          else self.reflector.reflect(task, trace[-c.trace_chars:], outcome, chosen))
        except BudgetExceeded:
            raise
        except RatchetError as exc:
            reflection = Reflection(problems=[Problem(None, f"the reflector's call failed: {exc}"[:300])])
        curation = None
        if stated is not None:
            curation = Curation(ops=[stated])
        elif reflection.lesson:
            try:
                curation = self.curator.curate(book, chosen, reflection.lesson, outcome)
            except BudgetExceeded:
                raise
            except RatchetError as exc:
                curation = Curation(problems=[Problem(None, f"the curator's call failed: {exc}"[:300])], attempts=1)
        ops = list(reflection.tags) + (curation.ops if curation else [])
        duplicates: list[Duplicate] = []
        if self.folder is not None:
            ops, duplicates = self.folder.rewrite(book, ops)
        # A tag is evidence only about an item the attempt saw, whoever emits it (the reflector, the
        # curator, or folding turning a repeated ADD into "helpful"): a trajectory made without the
        # playbook (offline) moves no counter. Measured before: one item +17 over 17 unrelated
        # HumanEval problems none of which saw it. The tag strategy may refuse more, and says why.
        ops, refused = self.tags.filter(ops, shown, score)
        applied = apply_operations(book, ops, source=source, origin=origin)
        new = applied.playbook
        cuts = prune(new, margin=c.prune_margin, max_items=c.max_items)
        if cuts:
            pruned = apply_operations(new, cuts)
            pruned.playbook.version = new.version  # one learning step is one version
            new = pruned.playbook
        return StepResult(new, reflection, curation, applied.applied, duplicates, refused, cuts, applied.problems)
