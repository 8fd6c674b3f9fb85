"""Measuring a playbook on an engine suite: empty vs after offline vs after online learning.

The playbook reaches a candidate the way a person would add it: the items chosen for each task
(token budget, relevance to the task's text) are appended to one prompt file of the candidate
(``prompt_file``, e.g. ``prompts/system.md``), and the suite evaluates that candidate on that one
task, in its sandbox, as the engine would. So any suite with a prompt file works (HumanEval, the
coding suite, a TextArena harness).

Phases, each a JSONL file under the trial run (``trial/<phase>.jsonl``), one line a task:

- ``train-empty`` / ``test-empty``: the original, no playbook.
- offline: learn from ``train-empty``'s trajectories; with a gate, ``heldin-empty`` and
  ``heldin-offline`` evaluate the empty and the learned playbook on held-in tasks (disjoint from
  train and test), the engine's gate judges the pair (``trial/gate-offline.json``), and
  ``test-offline`` uses the learned playbook only when the gate keeps it, else the empty one.
- online: ``train-online`` evaluates each train task with the playbook so far and ``observe``s it;
  then ``test-online``.
- ``test-best-of-N``: the original sampled N times per test task (a suite built with a sampling
  temperature), for the same extra model calls.

Offline and online learning run once per :class:`Arm`, a way of learning (its own
:class:`ContextConfig`): ``ratchet`` (de-duplication, a token budget, pruning; its phases keep the
plain names above) and ``ace-add-only`` (:data:`ACE_ADD_ONLY`: the official ACE code's curation;
its phases are ``train-ace-add-only-online``, ``test-ace-add-only-offline``…, its playbooks
``trial/ace-add-only-offline.md``…). Each learning step's playbook size (items, tokens) is in the
arm's history (:meth:`PlaybookTrial.sizes`).

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
from ratchet.context.history import PlaybookHistory
from ratchet.context.learner import ContextLearner, Trajectory
from ratchet.context.playbook import Playbook
from ratchet.context.roles import render_items
from ratchet.context.similarity import Embedder
from ratchet.contracts import Candidate, Gate, Model, RatchetError, Task, TaskResult
from ratchet.evolve.gate import noise_band
from ratchet.store.run import Run

LESSONS_HEADER = "\n\nLessons learned on earlier problems (follow those that apply):\n"

#: The official ACE code's curation (ace-agent/ace): the curator may only ADD; no de-duplication,
#: no pruning, no cap, the whole playbook enters every prompt (no token budget, no least
#: relevance), and the reflector's tags count as given.
ACE_ADD_ONLY: dict[str, Any] = {"curator_operations": ["ADD"], "dedup": False, "prune_margin": None,
                                "max_items": None, "budget_tokens": None, "min_relevance": None,
                                "tags": "reflector"}
#: Settings each learner arm lays over the trial's own (``ratchet``: none).
ARM_SETTINGS: dict[str, dict[str, Any]] = {"ratchet": {}, "ace-add-only": ACE_ADD_ONLY}
DEFAULT_ARM = "ratchet"


@dataclass(frozen=True)
class Arm:
    """One way of learning a playbook, measured beside the others on the same tasks."""

    name: str
    config: ContextConfig

    @classmethod
    def named(cls, name: str, base: ContextConfig) -> Arm:
        if name not in ARM_SETTINGS:
            raise RatchetError(f"unknown learner arm {name!r}", hint=f"use one of: {', '.join(ARM_SETTINGS)}")
        return cls(name, ContextConfig.model_validate({**base.model_dump(), **ARM_SETTINGS[name]}))

    def learner_name(self, mode: str) -> str:
        """The playbook (and phase suffix) of this arm's ``offline`` or ``online`` learning; the
        default arm keeps the names trials had before arms, so their runs resume."""
        return mode if self.name == DEFAULT_ARM else f"{self.name}-{mode}"


class Suite(Protocol):
    """What a trial needs of an engine suite."""

    def tasks(self) -> list[Task]: ...

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]: ...


def task_text(task: Task) -> str:
    """The text a task is about (its prompt when it has one), for relevance and the reflector."""
    for key in ("prompt", "question", "description", "instruction", "statement"):
        if isinstance(task.input.get(key), str):
            return task.input[key]
    return f"{task.id}: {task.input}"


def _result(record: dict[str, Any]) -> TaskResult:
    """A phase's stored line as the gate reads a result (task, seed, score, cost)."""
    calls = record.get("model_calls")
    return TaskResult(record["task_id"], record["seed"], record["score"],
                      metrics={} if calls is None else {"model_calls": float(calls)})


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
    curator; ``sampling_suite`` (the same suite at a sampling temperature) serves best-of-N.
    ``calls`` counts the solver's model calls so far: a task's calls are recorded from it when
    the suite's result does not count them (its ``model_calls`` metric)."""

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
    calls: Callable[[], int] | None = None
    gate: Callable[[], Gate] | None = None
    """Makes the engine's gate (:mod:`ratchet.evolve.gate`, as the suite's run config names it)
    that judges an offline playbook on held-in tasks before the test phase uses it; None: the
    playbook is used unchecked (how trials ran before the gate). A fresh gate per decision: each
    arm's playbook is the first test of its own gate, so the level does not depend on which arms
    ran or on a resume."""

    def arm(self, name: str = DEFAULT_ARM) -> Arm:
        return Arm.named(name, self.config)

    def _done(self, phase: str) -> dict[str, dict[str, Any]]:
        return {r["task_id"]: r for r in self.run.read_jsonl(f"trial/{phase}.jsonl")}

    def _playbook_path(self, name: str) -> Path:
        return self.run.path(f"trial/{name}.md")

    def evaluate(self, phase: str, tasks: Sequence[Task], playbook: Playbook | None, *, suite: Suite | None = None,
                 seed: int | None = None, after: Callable[[Task, TaskResult, dict[str, Any]], None] | None = None,
                 config: ContextConfig | None = None) -> list[dict[str, Any]]:
        """Each task once with the items ``playbook`` gives it (under ``config``'s budget, the
        trial's by default); skips tasks ``phase`` already holds."""
        done = self._done(phase)
        c = config or self.config
        for task in tasks:
            if task.id in done:
                continue
            items = select(playbook, task_text(task), c.budget_tokens, embedder=self.embedder,
                           record_weight=c.record_weight, min_relevance=c.min_relevance).items if playbook is not None else []
            candidate = Candidate.from_files("playbook-trial", with_playbook(self.files, self.prompt_file,
                                                                             render_items(items) if items else ""))
            before = self.calls() if self.calls is not None else None
            (result,) = (suite or self.suite).evaluate(candidate, [task], self.seed if seed is None else seed)
            calls = result.metrics.get("model_calls")
            if calls is None and before is not None:
                calls = self.calls() - before
            record = {"task_id": task.id, "seed": result.seed, "score": result.score,
                      "model_calls": calls, "items": [i.id for i in items],
                      "trace": result.trace[-self.config.trace_chars:]}
            self.run.append_jsonl(f"trial/{phase}.jsonl", record)
            done[task.id] = record
            if after is not None:
                after(task, result, record)
            if self.progress is not None:
                self.progress(phase, result)
        return [done[t.id] for t in tasks]

    def learner(self, name: str, config: ContextConfig | None = None) -> ContextLearner:
        return ContextLearner(self._playbook_path(name), reflector_model=self.learner_model,
                              config=config or self.config, embedder=self.embedder, run=self.run, name=name)

    def empty(self, train: Sequence[Task], test: Sequence[Task]) -> None:
        self.evaluate("train-empty", train, None)
        self.evaluate("test-empty", test, None)

    def offline(self, train: Sequence[Task], test: Sequence[Task], arm: Arm | None = None,
                heldin: Sequence[Task] = ()) -> None:
        """Learn from ``train-empty``, then (with a gate) judge the playbook on ``heldin``, then
        measure ``test`` with the playbook, or with none when the gate refused it."""
        arm = arm or self.arm()
        name = arm.learner_name("offline")
        texts = {t.id: task_text(t) for t in train}
        records = self.evaluate("train-empty", train, None)
        learner = self.learner(name, arm.config)
        # made with the empty playbook: no item was in their context
        learner.learn(Trajectory(r["task_id"], texts[r["task_id"]], r["trace"], r["score"], shown=frozenset()) for r in records)
        book: Playbook | None = learner.playbook
        if self.gate is not None:
            book = book if self.gated(name, heldin, learner.playbook, arm.config)["kept"] else None
        self.evaluate(f"test-{name}", test, book, config=arm.config)

    def gated(self, name: str, heldin: Sequence[Task], playbook: Playbook, config: ContextConfig) -> dict[str, Any]:
        """The gate's verdict on ``playbook`` against the empty one, paired per held-in task
        (``heldin-empty`` and ``heldin-<name>``), kept in ``trial/gate-<name>.json``; a resumed
        trial reads it back. No held-in tasks: the gate has no evidence and refuses."""
        path = f"trial/gate-{name}.json"
        stored = self.run.read_json(path)
        if stored is not None:
            return stored
        if self.gate is None:
            raise RatchetError("this trial has no gate to judge a playbook with")
        parent = [_result(r) for r in self.evaluate("heldin-empty", heldin, None)]
        child = [_result(r) for r in self.evaluate(f"heldin-{name}", heldin, playbook, config=config)]
        decision = self.gate().decide({"heldin": parent}, {"heldin": child}, {"heldin": noise_band(parent)})
        verdict = {"kept": decision.accepted, "reason": decision.reason, "numbers": decision.numbers,
                   "heldin": [t.id for t in heldin], "playbook_version": playbook.version, "items": len(playbook),
                   "test_uses": "the learned playbook" if decision.accepted else "the empty playbook"}
        self.run.write_json(path, verdict)
        return verdict

    def verdict(self, name: str) -> dict[str, Any] | None:
        """The gate's stored verdict on playbook ``name`` (None: not gated)."""
        return self.run.read_json(f"trial/gate-{name}.json")

    def online(self, train: Sequence[Task], test: Sequence[Task], arm: Arm | None = None) -> None:
        arm = arm or self.arm()
        name = arm.learner_name("online")
        learner = self.learner(name, arm.config)

        def observe(task: Task, result: TaskResult, record: dict[str, Any]) -> None:
            learner.observe(task_text(task), result.trace[-self.config.trace_chars:], result.score,
                            trajectory_id=task.id, shown=frozenset(record["items"]))

        # One task at a time, so each sees the playbook its predecessors taught. A task evaluated
        # but not yet observed when a run was killed is observed from its stored record.
        done = self._done(f"train-{name}")
        for task in train:
            record = done.get(task.id)
            if record is None:
                self.evaluate(f"train-{name}", [task], learner.playbook, after=observe, config=arm.config)
            elif task.id not in learner.done:
                learner.observe(task_text(task), record["trace"], record["score"], trajectory_id=task.id,
                                shown=frozenset(record["items"]))
        self.evaluate(f"test-{name}", test, learner.playbook, config=arm.config)

    def sizes(self, name: str) -> list[dict[str, Any]]:
        """The size (items, tokens) of playbook ``name`` (``offline``, ``ace-add-only-online``…)
        after each of its learning steps."""
        return PlaybookHistory(self.run, name).sizes()

    def best_of(self, n: int, test: Sequence[Task]) -> None:
        if self.sampling_suite is None:
            raise RatchetError("best-of-N needs a sampling suite (the same suite at a temperature above 0)")
        for k in range(n):
            self.evaluate(f"test-best-of-{n}-sample-{k}", test, None, suite=self.sampling_suite, seed=self.seed + 1 + k)

    def phase(self, name: str) -> list[dict[str, Any]]:
        return list(self._done(name).values())
