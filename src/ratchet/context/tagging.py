"""Which helpful/harmful tags move an item's counters: one small strategy per ``ContextConfig.tags``.

The counters are what pruning reads, so a tag is a claim about evidence. In the first HumanEval
trial (docs/context.md) the 1.5B reflector tagged items ``helpful`` 72 times and ``harmful``
never, after failed problems too, so the rule that broke integer inputs ended at +33/-0 and was
never pruned. A strategy sees one learning step's operations (the reflector's tags, the curator's
operations, the helpful tags de-duplication makes of repeated ADDs), the ids of the items that
were in the attempt's prompt and the graded score, and returns the operations to apply and a
:class:`DroppedTag` for every tag it refused, saying why; the learner records those in the
history, so no tag disappears unexplained.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from ratchet.context.operations import Operation, Tag

NOT_SHOWN = "the item was not in the attempt's prompt"
HELPFUL_ON_FAILURE = "helpful on a failed attempt (score {score:g})"
HARMFUL_ON_SUCCESS = "harmful on a passed attempt (score {score:g})"
MODEL_TAG = "the outcome strategy tags by the grader's verdict, not by a model"


@dataclass(frozen=True)
class DroppedTag:
    """A tag that moved no counter: the item, the tag, and why (the history's record)."""

    id: str
    tag: str
    why: str


class TagPolicy(Protocol):
    name: str

    def filter(self, ops: Sequence[Operation], shown: Collection[str],
               score: float) -> tuple[list[Operation], list[DroppedTag]]:
        """The operations to apply for an attempt that showed items ``shown`` and scored ``score``,
        and the tags refused."""
        ...


class ReflectorTags:
    """The tags as the models gave them, for items the attempt showed (an attempt says nothing
    about an item it never saw)."""

    name = "reflector"

    def filter(self, ops: Sequence[Operation], shown: Collection[str],
               score: float) -> tuple[list[Operation], list[DroppedTag]]:
        kept: list[Operation] = []
        dropped: list[DroppedTag] = []
        for op in ops:
            why = self.refuse(op, shown, score) if isinstance(op, Tag) else None
            if why is None:
                kept.append(op)
            else:
                dropped.append(DroppedTag(op.id, op.tag, why))
        return kept, dropped

    def refuse(self, tag: Tag, shown: Collection[str], score: float) -> str | None:
        return NOT_SHOWN if tag.id not in shown else None


class EvidenceTags(ReflectorTags):
    """The models' tags where the graded outcome does not contradict them: no ``helpful`` on a
    failed attempt (score 0), no ``harmful`` on a passed one (score 1). A partial score may carry
    either: an item can help a reply that still loses points elsewhere."""

    name = "evidence"

    def refuse(self, tag: Tag, shown: Collection[str], score: float) -> str | None:
        why = super().refuse(tag, shown, score)
        if why is not None:
            return why
        if tag.tag == "helpful" and score <= 0.0:
            return HELPFUL_ON_FAILURE.format(score=score)
        if tag.tag == "harmful" and score >= 1.0:
            return HARMFUL_ON_SUCCESS.format(score=score)
        return None


class OutcomeTags:
    """No model's tags: every shown item is tagged by the grader's verdict, ``helpful`` on a pass
    (score 1), ``harmful`` on a failure (score 0), nothing on a partial score. Credit is shared by
    all the items in the prompt; what tells them apart is which prompts each enters."""

    name = "outcome"

    def filter(self, ops: Sequence[Operation], shown: Collection[str],
               score: float) -> tuple[list[Operation], list[DroppedTag]]:
        dropped = [DroppedTag(op.id, op.tag, MODEL_TAG) for op in ops if isinstance(op, Tag)]
        rest = [op for op in ops if not isinstance(op, Tag)]
        verdict = "helpful" if score >= 1.0 else "harmful" if score <= 0.0 else None
        # Before the curator's operations, as the reflector's tags are: a DELETE or MERGE of the
        # same item later in the step then finds the counters already moved.
        tags: list[Operation] = [Tag(key, verdict) for key in sorted(shown)] if verdict else []
        return tags + rest, dropped


TAG_POLICIES: dict[str, type[ReflectorTags] | type[OutcomeTags]] = {
    p.name: p for p in (ReflectorTags, EvidenceTags, OutcomeTags)}


def tag_policy(name: str) -> TagPolicy:
    """The strategy ``ContextConfig.tags`` names."""
    return TAG_POLICIES[name]()
