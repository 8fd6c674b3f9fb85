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

import re
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
    """Refuses a teacher reply that does not answer: one that hands the turn back (ends with a
    question to the user: an echo of the question, "How can I help you?"), one that refuses
    (a sentence that opens with an apology or an "I can't": "Ahoy! I'm sorry, but I can't assist
    with that.", measured passing this rule before it looked past the greeting), or an empty one.

    A reply cut at the length limit mid-answer does not end with "?", so long answers pass; a
    reply whose LAST sentence asks something ("…Does that help?") is refused too, which loses a
    few good targets and no bad ones in what was measured. A refusal is recognised by how its
    sentence starts, so an answer that quotes an apology mid-sentence still passes.
    """

    name = "answers"
    #: How a refusing sentence opens (lower case; apostrophes straight or curly).
    REFUSALS = ("i'm sorry", "i am sorry", "sorry,", "i apologize", "i apologise", "i can't", "i cannot",
                "i can not", "i'm unable", "i am unable", "i'm not able", "i am not able", "as an ai")

    def keep(self, target: str) -> bool:
        text = target.strip().rstrip("\"')*`").rstrip()
        return bool(text) and not text.endswith("?") and not self.refuses(text)

    def refuses(self, text: str) -> bool:
        sentences = re.split(r"(?<=[.!?])\s+", text.replace("\u2019", "'").lower())
        return any(s.lstrip("\"'*_ ").startswith(self.REFUSALS) for s in sentences)


def target_filter(name: TargetFilterName) -> TargetFilter:
    return {"none": KeepAll, "answers": AnswersOnly}[name]()


__all__ = ["AnswersOnly", "KeepAll", "TargetFilter", "TargetFilterName", "target_filter"]
