"""Canaries: known-answer checks that catch a grader which passes everything (or nothing).

A suite may offer ``canaries() -> list[Canary]``: a deliberately wrong (or right) candidate, a
task, and the score a working grader must give it. The loop runs them at start, on resume and
every ``canaries.every`` steps, straight through the evaluator (never the cache), and stops the
run on the first wrong answer: a grader that passes a wrong canary would accept anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ratchet.contracts import Candidate, Evaluator, RatchetError, Task


class CanaryFailed(RatchetError):
    """The grader gave a known-answer task the wrong score."""


@dataclass(frozen=True)
class Canary:
    """``files`` (a candidate's editable files) must score ``expected`` (± ``tolerance``) on ``task``."""

    name: str
    task: Task
    files: dict[str, str]
    expected: float
    tolerance: float = 0.0
    seed: int = 0


@runtime_checkable
class Canaried(Protocol):
    """A suite that offers known-answer checks of its grader."""

    def canaries(self) -> list[Canary]: ...


def check_canaries(evaluator: Evaluator, kind: str, required: bool = False) -> int:
    """Run the suite's canaries; raise :class:`CanaryFailed` on a wrong score. Returns how many ran."""
    canaries = list(evaluator.canaries()) if isinstance(evaluator, Canaried) else []
    if not canaries and required:
        raise CanaryFailed(f"suite {evaluator.name!r} declares no canaries",
                           hint="add canaries() to the suite, or set canaries.required=false")
    for canary in canaries:
        candidate = Candidate.from_files(kind, dict(canary.files), None, canary=canary.name)
        [result] = evaluator.evaluate(candidate, [canary.task], canary.seed)
        if abs(result.score - canary.expected) > canary.tolerance:
            raise CanaryFailed(
                f"canary {canary.name!r} on task {canary.task.id}: the grader gave {result.score:.3f}, "
                f"a working grader gives {canary.expected:.3f}; the run is stopped",
                hint="the evaluator passes (or fails) everything: fix its grader before evolving against it",
            )
    return len(canaries)
