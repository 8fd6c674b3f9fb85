"""The gate before promotion: a new weight version is served only if it does not regress.

A held-out case is a conversation with a preferred and a dispreferred reply (written by the
person running the server, or collected from judged turns kept out of training). A policy's score
is the mean log-probability margin ``log p(preferred) − log p(dispreferred)`` over the cases:
it rises when the model moves toward the behaviour users rewarded. A candidate is promoted when
its score is not below the current version's by more than ``tolerance`` (nats).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import RatchetError


@dataclass(frozen=True)
class HeldOutCase:
    """A prompt (chat messages) with the reply users prefer and the one they correct."""

    messages: list[dict[str, Any]]
    preferred: str
    dispreferred: str


class SequenceScorer(Protocol):
    """Anything that gives log p(response | messages), e.g. :class:`ratchet.online.trainer.Trainer`."""

    def sequence_logprob(self, messages: Sequence[dict[str, Any]], response: str, *, base: bool = False) -> float: ...


def load_cases(path: str | Path) -> list[HeldOutCase]:
    """Read held-out cases from JSONL: one ``{"messages", "preferred", "dispreferred"}`` per line."""
    cases = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            cases.append(HeldOutCase(list(data["messages"]), str(data["preferred"]), str(data["dispreferred"])))
        except (ValueError, KeyError, TypeError) as exc:
            raise RatchetError(
                f"{path}:{number}: not a held-out case ({exc})",
                hint='each line: {"messages": [...], "preferred": "...", "dispreferred": "..."}',
            ) from None
    if not cases:
        raise RatchetError(f"{path} holds no held-out cases")
    return cases


def margins(scorer: SequenceScorer, cases: Sequence[HeldOutCase], *, base: bool = False) -> list[tuple[float, float]]:
    """(log p(preferred), log p(dispreferred)) per case."""
    return [
        (scorer.sequence_logprob(c.messages, c.preferred, base=base),
         scorer.sequence_logprob(c.messages, c.dispreferred, base=base))
        for c in cases
    ]


class EvaluationHook:
    """Scores policies on held-out cases and decides promotion."""

    def __init__(self, cases: Sequence[HeldOutCase], tolerance: float = 0.5) -> None:
        if not cases:
            raise RatchetError("the evaluation hook needs at least one held-out case")
        self.cases = list(cases)
        self.tolerance = tolerance

    @classmethod
    def from_jsonl(cls, path: str | Path, tolerance: float = 0.5) -> EvaluationHook:
        return cls(load_cases(path), tolerance)

    def score(self, scorer: SequenceScorer) -> float:
        """Mean log-prob margin preferred − dispreferred of the scorer's current policy."""
        pairs = margins(scorer, self.cases)
        return sum(p - d for p, d in pairs) / len(pairs)

    def evaluate(self, scorer: SequenceScorer, baseline: float) -> dict[str, Any]:
        """Score the candidate (the scorer's current weights) against ``baseline`` (the current version).

        The returned record goes into the version's metrics: both scores, the tolerance, and the
        decision ``promote``.
        """
        pairs = margins(scorer, self.cases)
        score = sum(p - d for p, d in pairs) / len(pairs)
        return {
            "score": score,
            "baseline": baseline,
            "tolerance": self.tolerance,
            "preferred_logprob": sum(p for p, _ in pairs) / len(pairs),
            "dispreferred_logprob": sum(d for _, d in pairs) / len(pairs),
            "cases": len(pairs),
            "promote": score >= baseline - self.tolerance,
        }
