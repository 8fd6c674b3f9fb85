"""The synthetic ``noisy`` suite with a pause per task, so that a task is still running when a test
kills its worker. Named in configs as ``slow_suite:SlowSuite`` (this folder is on the workers' path)."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from ratchet.contracts import Candidate, Task, TaskResult
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite


class SlowOptions(NoisyOptions):
    pause_s: float = Field(default=0.05, ge=0)
    """Seconds each task evaluation sleeps before answering."""


class SlowSuite(NoisySuite):
    name = "slow-noisy"

    def __init__(self, options: SlowOptions, ctx: EngineContext | None = None) -> None:
        super().__init__(options, ctx)
        self.options: SlowOptions = options

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        time.sleep(self.options.pause_s * len(tasks))
        return super().evaluate(candidate, tasks, seed)


class ModelSuite(NoisySuite):
    """A suite that keeps the engine's context, model included, as the workflow suites do."""

    name = "model-noisy"

    def __init__(self, options: NoisyOptions, ctx: EngineContext | None = None) -> None:
        super().__init__(options, ctx)
        self.ctx = ctx


def die(item: int) -> int:
    """Kills its own worker process for odd items (a worker that always dies on that unit)."""
    if item % 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return item


#: The item :func:`hold_once` holds.
HELD = 3


def hold_once(job: tuple[int, str]) -> int:
    """``(item, folder)`` -> the item's square after half a second; the first attempt at item
    ``HELD`` leaves a file named by its process id in ``folder`` and then waits (a minute), so a
    test can take its node down while it certainly runs; a later attempt goes straight on."""
    item, folder = job
    if item == HELD and not any(Path(folder).iterdir()):
        Path(folder, str(os.getpid())).touch()
        time.sleep(60)
    elif item == HELD:
        Path(folder, "retried").touch()
    time.sleep(0.5)
    return item * item


class CallingOptions(SlowOptions):
    marker_dir: str | None = None
    """If set, each evaluation leaves a file named by its process id here right after its model
    call returned, then pauses: a test kills that process when the reply is journaled and the
    evaluation's result not yet sent."""


class CallingSuite(NoisySuite):
    """Every task's pass probability is half the candidate's declared one and half the model's reply
    to a question about (candidate, task, seed): its evaluations call the model, as the workflow
    suites' do."""

    name = "calling-noisy"

    def __init__(self, options: CallingOptions, ctx: EngineContext | None = None) -> None:
        super().__init__(options, ctx)
        self.options: CallingOptions = options
        self.ctx = ctx

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        default, _ = self.probabilities(candidate)
        results = []
        for task in tasks:
            reply = self.ctx.model.complete([{"role": "user", "content": f"grade {candidate.id} on {task.id} at {seed}"}],
                                            max_tokens=8, seed=seed).text
            if self.options.marker_dir:
                Path(self.options.marker_dir, str(os.getpid())).touch()
            time.sleep(self.options.pause_s)
            p = (default + float(reply)) / 2
            solved = random.Random(f"{candidate.id}:{task.id}:{seed}").random() < p
            results.append(TaskResult(task.id, seed, 1.0 if solved else 0.0, f"reply {reply}", (), {"p": p}))
        return results
