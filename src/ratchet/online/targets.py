"""Which of the hinted teacher's own replies the student is taught (``distill_target=teacher``).

The teacher is the base model with the hint in its prompt; a small base model told "Always start
your reply with the greeting 'Ahoy!'" sometimes obeys the hint *instead of* answering: it echoes the
question back ("Ahoy! How can I reverse a string in Python?") or offers help ("Ahoy! I'm here to
help you with any questions or tasks you might have. What do you need assistance with?"). Distilled,
such a reply teaches the student, without the hint, not to answer; measured on the 0.5B
(``bench/results/online_inner_loop.md``), two updates with 3 such targets among 8 made the student
write "Ahoy! I'm ready to help" and "I'm sorry, but I can't assist with that." on held-out
questions and neutral tasks, replies none of the targets contained.

Each filter is one rule with one method; the trainer drops a target it refuses (the sample keeps
its other signals) and counts it in the version's record.
"""

from __future__ import annotations

from typing import Literal, Protocol

TargetFilterName = Literal["none", "answers"]


class TargetFilter(Protocol):
    name: str

    def keep(self, target: str) -> bool:
        """Whether ``target`` (the hinted teacher's reply, as text) is worth teaching."""
        ...


class KeepAll:
    """Every teacher reply is taught (the behaviour before filters existed)."""

    name = "none"

    def keep(self, target: str) -> bool:
        return True


class AnswersOnly:
    """Refuses a teacher reply that hands the turn back instead of answering: one that ends with a
    question to the user (an echo of the question, "How can I help you?"), or one that is empty.

    A reply cut at the length limit mid-answer does not end with "?", so long answers pass; a
    reply whose LAST sentence asks something ("…Does that help?") is refused too, which loses a
    few good targets and no bad ones in what was measured.
    """

    name = "answers"

    def keep(self, target: str) -> bool:
        text = target.strip().rstrip("\"')*`").rstrip()
        return bool(text) and not text.endswith("?")


def target_filter(name: TargetFilterName) -> TargetFilter:
    return {"none": KeepAll, "answers": AnswersOnly}[name]()


__all__ = ["AnswersOnly", "KeepAll", "TargetFilter", "TargetFilterName", "target_filter"]
