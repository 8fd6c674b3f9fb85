"""The ``noisy`` suite: a synthetic evaluator with a known truth, for tests and the gate benches.

A candidate's ``harness.json`` declares per-task pass probabilities
(``{"default": 0.5, "p": {"t03": 0.9}}``). Each (task, seed) is one Bernoulli draw seeded by the
candidate's id, the task and the seed, so re-evaluating a candidate gives the same answers, while
any change to its files — a cosmetic one included — redraws them, as a sampling model would answer
a reworded prompt differently. Whether a change really helps is therefore known exactly, which is
what the A/A and planted-improvement benchmarks need.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import Candidate, Failure, Task, TaskResult
from ratchet.evolve.canary import Canary
from ratchet.evolve.context import EngineContext

VERSION = 1


class NoisyOptions(Settings):
    """Options of the synthetic suite."""

    tasks: int = Field(default=40, ge=1)
    """How many tasks (ids t00, t01, …)."""
    file: str = "harness.json"
    """The candidate file that declares the pass probabilities."""
    salt: int = 0
    """Changes every draw (another, independent instance of the suite)."""


def task_id(i: int) -> str:
    return f"t{i:02d}"


class NoisySuite:
    """Bernoulli tasks whose pass probability the candidate declares."""

    name = "noisy"

    def __init__(self, options: NoisyOptions, ctx: EngineContext | None = None) -> None:
        self.options = options

    def tasks(self) -> list[Task]:
        return [Task(task_id(i), {"index": i}) for i in range(self.options.tasks)]

    def fingerprint(self) -> str:
        text = json.dumps({"suite": self.name, "version": VERSION, **self.options.model_dump()}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def probabilities(self, candidate: Candidate) -> tuple[float, dict[str, float]]:
        """(default, per-task) probabilities; an unreadable file means 0 everywhere."""
        try:
            data = json.loads(candidate.files.get(self.options.file, ""))
            return float(data.get("default", 0.0)), {k: float(v) for k, v in (data.get("p") or {}).items()}
        except (ValueError, TypeError, AttributeError):
            return 0.0, {}

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        default, per_task = self.probabilities(candidate)
        results = []
        for task in tasks:
            p = min(1.0, max(0.0, per_task.get(task.id, default)))
            draw = random.Random(f"{self.options.salt}:{candidate.id}:{task.id}:{seed}").random()
            solved = draw < p
            failures = () if solved else (Failure("wrong_answer", f"task {task.id} failed (declared p = {p:.2f})", task.id),)
            results.append(TaskResult(task.id, seed, 1.0 if solved else 0.0,
                                      f"task {task.id}: {'solved' if solved else 'failed'}", failures, {"p": p}))
        return results

    def canaries(self) -> list[Canary]:
        """A candidate that declares p = 0 must fail, and one that declares p = 1 must pass."""
        first = self.tasks()[0]
        return [Canary("always-wrong", first, {self.options.file: json.dumps({"default": 0.0})}, 0.0),
                Canary("always-right", first, {self.options.file: json.dumps({"default": 1.0})}, 1.0)]
