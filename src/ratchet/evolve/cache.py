"""Nothing paid twice: an evaluation cache in the run store.

:class:`CachedEvaluator` keys every task result by (candidate id, task id, seed, evaluator
fingerprint) and appends it to ``evolve/evals.jsonl`` the moment it exists, so a killed run's
finished evaluations are read back, not rerun, and a candidate met again (the same files) costs
nothing.

Model replies are journaled by :class:`ratchet.models.journal.JournaledModel` (re-exported here
with the run's journal files, where the engine's callers have always found them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from functools import partial
from typing import Any

from ratchet.contracts import Candidate, Evaluator, Executor, Failure, Task, TaskResult
from ratchet.executors.units import unit_scope
from ratchet.models.journal import REPLIES, JournaledModel, request_key

__all__ = ["EVALS", "PROPOSER_REPLIES", "REPLIES", "CachedEvaluator", "JournaledModel", "evaluate_task",
           "request_key", "result_from_record", "unit_name"]

EVALS = "evolve/evals.jsonl"
PROPOSER_REPLIES = "evolve/proposer_replies.jsonl"  # the replies of a run's proposer_model


def result_from_record(record: dict[str, Any]) -> TaskResult:
    """A TaskResult back from its JSON form."""
    failures = tuple(Failure.from_record(f) for f in record.get("failures") or ())
    return TaskResult(record["task_id"], int(record["seed"]), float(record["score"]), record.get("trace", ""),
                      failures, dict(record.get("metrics") or {}))


def unit_name(candidate_id: str, task_id: str, seed: int) -> str:
    """The name an evaluation's model calls are journaled under (see :mod:`ratchet.executors.units`)."""
    return json.dumps([candidate_id, task_id, seed])


def evaluate_task(inner: Evaluator, candidate: Candidate, seed: int, task: Task) -> TaskResult:
    """One (candidate, task, seed) evaluation: the unit of work an executor runs anywhere. Its model
    calls are numbered within it, so that a rerun of it is given the replies already journaled."""
    with unit_scope(unit_name(candidate.id, task.id, seed)):
        [result] = inner.evaluate(candidate, [task], seed)
    return result


class CachedEvaluator:
    """Wraps an evaluator; runs only the (task, seed) pairs not already in the run's cache.

    ``paid`` counts task evaluations actually run by this process, ``hits`` those served from the
    cache. ``on_paid(n)`` is called before the n-th task evaluation of a batch is let run (a
    budget check that may raise; the ones let run before it still run and are kept);
    ``on_result(candidate, task, seed, result)`` after each is on disk (progress).
    The inner evaluator is called one task at a time, through ``executor`` (in this process when
    none is given); results come back here and each is on disk, in task order, before the next is
    taken, so a kill loses at most the tasks in flight, never a finished one.
    """

    def __init__(self, inner: Evaluator, run: Any, on_paid: Any = None, executor: Executor | None = None,
                 on_result: Any = None) -> None:
        self.inner = inner
        self.run = run
        self.name = inner.name
        self.on_paid = on_paid
        self.on_result = on_result
        self.executor = executor
        self._fingerprint = inner.fingerprint()
        self._cache: dict[tuple[str, str, int], TaskResult] = {}
        for record in run.read_jsonl(EVALS):
            if record["fingerprint"] == self._fingerprint:
                self._cache[(record["candidate"], record["task_id"], int(record["seed"]))] = result_from_record(record)
        self.paid = 0
        self.hits = 0

    def fingerprint(self) -> str:
        return self._fingerprint

    def cached(self, candidate_id: str, task_id: str, seed: int) -> TaskResult | None:
        return self._cache.get((candidate_id, task_id, seed))

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        missing = [t for t in tasks if (candidate.id, t.id, seed) not in self._cache]
        self.hits += len(tasks) - len(missing)
        admitted: list[Task] = []
        stop: BaseException | None = None
        for task in missing:  # as many as the budget allows, exactly as if run one after another
            try:
                if self.on_paid is not None:
                    self.on_paid(len(admitted) + 1)
            except BaseException as exc:  # noqa: BLE001 - re-raised once the admitted ones are kept
                stop = exc
                break
            admitted.append(task)
        if admitted:
            work = partial(evaluate_task, self.inner, candidate, seed)
            results = self.executor.map(work, admitted) if self.executor is not None else map(work, admitted)
            for task, result in zip(admitted, results):
                record = {"candidate": candidate.id, "fingerprint": self._fingerprint, **asdict(result),
                          "recorded_at": time.time()}
                self.run.append_jsonl(EVALS, record)
                self._cache[(candidate.id, task.id, seed)] = result
                self.paid += 1
                if self.on_result is not None:
                    self.on_result(candidate, task, seed, result)
        if stop is not None:
            raise stop
        return [self._cache[(candidate.id, t.id, seed)] for t in tasks]
