"""Judges: read a turn's next state and say whether the reply helped (+1 / -1 / 0), with a hint.

Each judge is one strategy behind the :class:`Judge` protocol:

* ``auto`` (the default) — the stacked judge when its label model is pulled and verified, else
  the classifier; never downloads (``choice.py``: :func:`choose_judge`, :class:`JudgeChoice`).
* :class:`ClassifierJudge` (``classifier``) — a logistic regression over a sentence
  embedding and lexical cues of the person's message, fitted on a labelled feedback set; hears
  polite, indirect, sarcastic and non-English corrections, and reads negated praise ("not
  helpful") as a correction. ``classifier.py``.
* :class:`RuleJudge` (``rule``) — keyword rules, free and instant; misses most everyday phrasings.
  ``rules.py``.
* :class:`ModelJudge` (``model``) — a chat model as a process reward model, voting. ``model.py``.
* :class:`StackedJudge` (``stacked``) — the classifier's probabilities weighed with a local model's
  reading of the message as one of the three labels (log-probabilities, nothing generated), the two
  weighed by weights and thresholds fitted on the development sets. ``stacked.py``, ``labels.py``.

The classifier, rule and stacked judges read a tool's output (a next state starting with ``tool:``)
with a tool-output reader (``tools.py``: parsed facts before loose words, 0 where they disagree; the
stacked judge's label model checks the facts), and all of them
hint a corrected turn with the instruction the correction states (``hints.py``). :func:`build_judge`
wraps each in :class:`RepeatGuard` (``progress.py``): a call that repeats an earlier one of the
conversation and gets the same output back is judged 0, not rewarded. ``scoring.py`` measures a
judge on a labelled feedback set.
"""

from __future__ import annotations

from typing import Protocol

from ratchet.contracts import Model
from ratchet.online.judge.choice import JudgeChoice, choose_judge
from ratchet.online.judge.classifier import ClassifierJudge, FeedbackClassifier
from ratchet.online.judge.hints import instruction_of
from ratchet.online.judge.model import (
    HINT_SYSTEM,
    PRM_SYSTEM,
    ModelJudge,
    judge_prompt,
    majority,
    parse_hint,
    parse_vote,
)
from ratchet.online.judge.progress import RepeatGuard, repeats_without_progress
from ratchet.online.judge.rules import RuleJudge, correction_hint, is_tool_output, tool_vote
from ratchet.online.judge.stacked import StackedJudge
from ratchet.online.records import Judgement, Turn

JUDGE_KINDS = ("auto", "classifier", "rule", "model", "stacked")


class Judge(Protocol):
    name: str

    def judge(self, turn: Turn, next_state: str) -> Judgement: ...


def build_judge(kind: str, *, learn: str = "combine", model: Model | None = None, votes: int = 3,
                temperature: float = 0.6, max_tokens: int = 256, hint_style: str = "instruction",
                min_confidence: float | None = None, label_model: str | None = None, threads: int = 1,
                hints: bool | None = None) -> Judge:
    """The judge of ``kind`` for a learning mode: rewards for binary/combine, hints for opd/combine
    (``hints`` True or False says so whatever the mode: a served playbook learns from them).

    ``min_confidence`` None is the judge's own (the classifier's 0.6, the stacked judge's fitted
    value); ``label_model`` is the stacked judge's label model (None: the one it was fitted with).
    ``auto`` is the kind :func:`choose_judge` picks for it.
    """
    kind = choose_judge(kind, label_model).kind if kind == "auto" else kind
    rewards = learn in ("binary", "combine", "off")
    hints = learn in ("opd", "combine") if hints is None else hints
    judge: Judge
    if kind == "classifier":
        judge = ClassifierJudge.default(min_confidence=0.6 if min_confidence is None else min_confidence, hints=hints)
    elif kind == "stacked":
        judge = StackedJudge.default(model=label_model, threads=threads, min_confidence=min_confidence, hints=hints)
    elif kind == "rule":
        judge = RuleJudge(hints=hints, hint_style=hint_style)
    elif kind != "model":
        raise ValueError(f"unknown judge kind {kind!r}; known: {', '.join(JUDGE_KINDS)}")
    elif model is None:
        raise ValueError("a model judge needs a model")
    else:
        judge = ModelJudge(model, votes=votes, temperature=temperature, max_tokens=max_tokens, rewards=rewards,
                           hints=hints)
    return RepeatGuard(judge)  # a loop of the same call and the same output is never rewarded


__all__ = [
    "HINT_SYSTEM",
    "JUDGE_KINDS",
    "PRM_SYSTEM",
    "ClassifierJudge",
    "FeedbackClassifier",
    "Judge",
    "JudgeChoice",
    "ModelJudge",
    "RepeatGuard",
    "RuleJudge",
    "StackedJudge",
    "build_judge",
    "choose_judge",
    "correction_hint",
    "instruction_of",
    "is_tool_output",
    "judge_prompt",
    "majority",
    "parse_hint",
    "parse_vote",
    "repeats_without_progress",
    "tool_vote",
]
