"""Measuring a playbook on an engine suite: empty vs after offline vs after online learning.

The playbook reaches a candidate the way a person would add it: the items chosen for each task
(token budget, relevance to the task's text) are appended to one prompt file of the candidate
(``prompt_file``, e.g. ``prompts/system.md``), and the suite evaluates that candidate on that one
task, in its sandbox, as the engine would. So any suite with a prompt file works (HumanEval, the
coding suite, a TextArena harness).

Phases, each a JSONL file under the trial run (``trial/<phase>.jsonl``), one line a task:

- ``train-empty`` / ``test-empty``: the original, no playbook.
- offline: learn from ``train-empty``'s trajectories, then ``test-offline``.
- online: ``train-online`` evaluates each train task with the playbook so far and ``observe``s it;
  then ``test-online``.
- ``test-best-of-N``: the original sampled N times per test task (a suite built with a sampling
  temperature), for the same extra model calls.

Everything is written as it happens; a trial run resumed (same store, same run) skips the tasks
each phase already holds and the trajectories each learner already learned from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ratchet.context.budget import select
from ratchet.context.config import ContextConfig
from ratchet.context.learner import ContextLearner, Trajectory
from ratchet.context.playbook import Playbook
from ratchet.context.roles import render_items
from ratchet.context.similarity import Embedder
from ratchet.contracts import Candidate, Model, RatchetError, Task, TaskResult
from ratchet.store.run import Run

LESSONS_HEADER = "\n\nLessons learned on earlier problems (follow those that apply):\n"


class Suite(Protocol):
    """What a trial needs of an engine suite."""

    def tasks(self) -> list[Task]: ...

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]: ...


def task_text(task: Task) -> str:
    """The text a task is about (its prompt when it has one), for relevance and the reflector."""
    for key in ("prompt", "question", "description", "instruction"):
        if isinstance(task.input.get(key), str):
            return task.input[key]
    return f"{task.id}: {task.input}"


def with_playbook(files: dict[str, str], prompt_file: str, items_text: str) -> dict[str, str]:
    if prompt_file not in files:
        raise RatchetError(f"the candidate has no {prompt_file} to put the playbook in",
                           hint=f"name one of its files as prompt_file: {', '.join(sorted(files))}")
    if not items_text:
        return dict(files)
    return {**files, prompt_file: files[prompt_file].rstrip("\n") + LESSONS_HEADER + items_text + "\n"}


@dataclass
class PlaybookTrial:
    """One suite, one original candidate, one trial run. ``learner_model`` plays reflector and
    curator; ``sampling_suite`` (the same suite at a sampling temperature) serves best-of-N."""

    suite: Suite
    files: dict[str, str]
    prompt_file: str
    run: Run
    learner_model: Model
    config: ContextConfig
    embedder: Embedder | None = None
    sampling_suite: Suite | None = None
    seed: int = 0
    progress: Callable[[str, TaskResult], None] | None = None

    def _done(self, phase: str) -> dict[str, dict[str, Any]]:
        return {r["task_id"]: r for r in self.run.read_jsonl(f"trial/{phase}.jsonl")}

    def _playbook_path(self, name: str) -> Path:
        return self.run.path(f"trial/{name}.md")

    def evaluate(self, phase: str, tasks: Sequence[Task], playbook: Playbook | None, *, suite: Suite | None = None,
                 seed: int | None = None, after: Callable[[Task, TaskResult], None] | None = None) -> list[dict[str, Any]]:
        """Each task once with the items ``playbook`` gives it; skips tasks ``phase`` already holds."""
        done = self._done(phase)
        for task in tasks:
            if task.id in done:
                continue
            items = select(playbook, task_text(task), self.config.budget_tokens, embedder=self.embedder,
                           record_weight=self.config.record_weight).items if playbook is not None else []
            candidate = Candidate.from_files("playbook-trial", with_playbook(self.files, self.prompt_file,
                                                                             render_items(items) if items else ""))
            (result,) = (suite or self.suite).evaluate(candidate, [task], self.seed if seed is None else seed)
            record = {"task_id": task.id, "seed": result.seed, "score": result.score,
                      "model_calls": result.metrics.get("model_calls"), "items": [i.id for i in items],
                      "trace": result.trace[-self.config.trace_chars:]}
            self.run.append_jsonl(f"trial/{phase}.jsonl", record)
            done[task.id] = record
            if after is not None:
                after(task, result)
            if self.progress is not None:
                self.progress(phase, result)
        return [done[t.id] for t in tasks]

    def learner(self, name: str) -> ContextLearner:
        return ContextLearner(self._playbook_path(name), reflector_model=self.learner_model, config=self.config,
                              embedder=self.embedder, run=self.run, name=name)

    def empty(self, train: Sequence[Task], test: Sequence[Task]) -> None:
        self.evaluate("train-empty", train, None)
        self.evaluate("test-empty", test, None)

    def offline(self, train: Sequence[Task], test: Sequence[Task]) -> None:
        texts = {t.id: task_text(t) for t in train}
        records = self.evaluate("train-empty", train, None)
        learner = self.learner("offline")
        # made with the empty playbook: no item was in their context
        learner.learn(Trajectory(r["task_id"], texts[r["task_id"]], r["trace"], r["score"], shown=frozenset()) for r in records)
        self.evaluate("test-offline", test, learner.playbook)

    def online(self, train: Sequence[Task], test: Sequence[Task]) -> None:
        learner = self.learner("online")

        def observe(task: Task, result: TaskResult) -> None:
            learner.observe(task_text(task), result.trace[-self.config.trace_chars:], result.score,
                            trajectory_id=task.id)

        # One task at a time, so each sees the playbook its predecessors taught. A task evaluated
        # but not yet observed when a run was killed is observed from its stored record.
        done = self._done("train-online")
        for task in train:
            record = done.get(task.id)
            if record is None:
                self.evaluate("train-online", [task], learner.playbook, after=observe)
            elif task.id not in learner.done:
                learner.observe(task_text(task), record["trace"], record["score"], trajectory_id=task.id)
        self.evaluate("test-online", test, learner.playbook)

    def best_of(self, n: int, test: Sequence[Task]) -> None:
        if self.sampling_suite is None:
            raise RatchetError("best-of-N needs a sampling suite (the same suite at a temperature above 0)")
        for k in range(n):
            self.evaluate(f"test-best-of-{n}-sample-{k}", test, None, suite=self.sampling_suite, seed=self.seed + 1 + k)

    def phase(self, name: str) -> list[dict[str, Any]]:
        return list(self._done(name).values())
