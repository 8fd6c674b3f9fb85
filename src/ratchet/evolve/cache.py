"""Nothing paid twice: an evaluation cache and a journal of model replies, both in the run store.

:class:`CachedEvaluator` keys every task result by (candidate id, task id, seed, evaluator
fingerprint) and appends it to ``evolve/evals.jsonl`` the moment it exists, so a killed run's
finished evaluations are read back, not rerun, and a candidate met again (the same files) costs
nothing.

:class:`JournaledModel` generalizes the AutoHarness reply journal to any caller: a ``Model`` that
records each reply (fsynced) before handing it back, keyed by a hash of the exact request. The
loop checkpoints the journal's call count at each step; on resume, replies recorded from that
count on (the interrupted step's) are given back, each once, to the request that matches them,
so the resumed step makes the calls an uninterrupted one makes and sees the same replies. The
AutoHarness search journals its refiner replies with it too, in its own file of the run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import asdict, replace
from functools import partial
from typing import Any

from ratchet.contracts import (Candidate, Completion, ComputedElsewhere, Evaluator, Executor, Failure, Message, Model, Task,
                               TaskResult, Usage)
from ratchet.executors.units import unit_scope

EVALS = "evolve/evals.jsonl"
REPLIES = "evolve/replies.jsonl"
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


def request_key(model_name: str, messages: Sequence[Message], params: dict[str, Any]) -> str:
    """A hash of the exact request: equal only for the same model, messages and parameters."""
    text = json.dumps({"model": model_name, "messages": [dict(m) for m in messages], "params": params},
                      sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class JournaledModel:
    """A ``Model`` whose replies are durable before they are used, and replayed after a kill.

    Wrap the *accounted* model, so a replayed reply is not counted again: it was paid for (and
    logged in the run's model calls) when it first arrived.

    Calls made inside a unit of work (an evaluation: :func:`complete_for`, through
    :class:`ratchet.executors.units.ScopedModel` here or the gateway from another machine) are
    journaled with the unit and their index in it, and the ``index``-th call of a unit is answered
    from the journal whenever it was answered before for the same request: a unit rerun after a
    lost worker or a killed driver pays only for the calls no earlier attempt got. Thread-safe.
    """

    def __init__(self, inner: Model, run: Any, path: str = REPLIES) -> None:
        self.inner = inner
        self.run = run
        self.path = path
        self.name = inner.name
        records = run.read_jsonl(path)
        self.calls = len(records)
        self.replayed = 0
        self._pending: dict[str, deque[dict[str, Any]]] = {}
        self._units = {(r["unit"], r["index"]): r for r in records if r.get("unit") is not None}
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, int], threading.Lock] = {}

    def calls_in(self, units: Collection[str]) -> int:
        """How many replies are journaled inside ``units``: what those evaluations cost in model
        calls, whether they were paid in this process or before a resume."""
        with self._lock:
            return sum(1 for unit, _ in self._units if unit in units)

    def resume(self, calls: int) -> int:
        """Replies recorded outside units at call index ``calls`` or later become replayable;
        returns how many (replies of units are replayable always, by unit)."""
        self._pending = {}
        count = 0
        for record in self.run.read_jsonl(self.path):
            if record["call"] >= calls and record.get("unit") is None:
                self._pending.setdefault(record["key"], deque()).append(record)
                count += 1
        return count

    def complete(self, messages: Sequence[Message], **params: Any) -> Completion:
        key = request_key(self.name, messages, params)
        with self._lock:
            queue = self._pending.get(key)
            record = queue.popleft() if queue else None
            if record is not None:
                self.replayed += 1
        if record is not None:
            return self._replay(record)
        completion = self._ask(messages, params)
        self._append(key, completion, {})
        return completion

    def complete_for(self, unit: str | None, index: int, messages: Sequence[Message], *,
                     computed_by: Model | None = None, **params: Any) -> Completion:
        """The ``index``-th call of ``unit``: from the journal when answered before for this request.
        ``computed_by``: a copy of the model elsewhere (a node's model server) that computes a reply
        this journal has not got; it is accounted and journaled here all the same."""
        if unit is None:
            return self.complete(messages, **params)
        key = request_key(self.name, messages, params)
        slot = (unit, index)
        with self._lock:
            slot_lock = self._slots.setdefault(slot, threading.Lock())
        with slot_lock:  # two attempts of one unit asking at once: the second waits and replays
            record = self._units.get(slot)
            if record is not None and record["key"] == key:
                with self._lock:
                    self.replayed += 1
                return self._replay(record)
            completion = self._ask(messages, params, computed_by)
            self._units[slot] = self._append(key, completion, {"unit": unit, "index": index})
        return completion

    def _replay(self, r: dict[str, Any]) -> Completion:
        # Journals written before replies carried a finish reason have none.
        return Completion(r["text"], Usage(r["prompt_tokens"], r["completion_tokens"]), 0.0, self.name, r.get("finish_reason", "stop"))

    def _ask(self, messages: Sequence[Message], params: dict[str, Any],
             computed_by: Model | None = None) -> Completion:
        inner = self.inner
        if computed_by is not None:  # the inner model's accounting (if any) around the copy that computes
            inner = inner.computed_by(computed_by) if isinstance(inner, ComputedElsewhere) else computed_by
        completion = inner.complete(messages, **params)
        # A backend can pass undecodable bytes through as lone surrogates; they are not text (no
        # parser, store or prompt takes them), so they become "?" here, once, for every reader.
        text = completion.text.encode("utf-8", errors="replace").decode("utf-8")
        return completion if text == completion.text else replace(completion, text=text)

    def _append(self, key: str, completion: Completion, where: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            record = {"call": self.calls, "key": key, **where, "text": completion.text,
                      "prompt_tokens": completion.usage.prompt_tokens,
                      "completion_tokens": completion.usage.completion_tokens,
                      "finish_reason": completion.finish_reason, "recorded_at": time.time()}
            self.run.append_jsonl(self.path, record)
            self.calls += 1
        return record

    async def acomplete(self, messages: Sequence[Message], **params: Any) -> Completion:
        # The engine's loop is synchronous; an async caller gets the same journaled path.
        return self.complete(messages, **params)
