"""A JSONL task suite (:mod:`ratchet.envs.tasks`) as an engine evaluator.

Each task is played through :class:`ratchet.envs.tasks.TaskEnvironment` on the runner's game loop
(:func:`ratchet.envs.runner.play_episode`), so its verifier (a command or a callable) runs out of
process and its turns are stepped exactly as for ``ratchet play``; the candidate's workflow
(:mod:`ratchet.evolve.suites.workflow`) answers each turn. The workflow sees
``{"task_id", "prompt", "turn", "previous": [[prompt, answer], ...]}``, never the verifier.
"""

from __future__ import annotations

import importlib.util
from dataclasses import asdict
from collections.abc import Sequence
from pathlib import Path

from ratchet.contracts import Candidate, Failure, Observation, RatchetError, Task, TaskResult
from ratchet.envs import runner
from ratchet.envs import tasks as task_suites
from ratchet.envs.runner import RolloutConfig, play_episode
from ratchet.envs.tasks import TaskEnvironment, load_suite, make_task_env
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites import workflow
from ratchet.evolve.suites.config import JsonlOptions
from ratchet.store.fingerprint import fingerprint
from ratchet.evolve.suites.workflow import WorkflowDriver

VERSION = 1


class JsonlSuite:
    """The tasks of one JSONL file, judged by their own verifiers."""

    name = "jsonl"

    def __init__(self, options: JsonlOptions, ctx: EngineContext | None = None) -> None:
        self.options = options
        self.ctx = ctx
        self.workspace = Path(ctx.workspace) if ctx is not None else Path.cwd()
        path = Path(options.path)
        path = path if path.is_absolute() else self.workspace / path
        # A shipped suite's name goes through the same lookup as ``ratchet play tasks/NAME``.
        suite = load_suite(path) if path.is_file() else make_task_env(f"tasks/{options.path}").tasks
        self.label = path.name if path.is_file() else options.path
        self.suite = suite[: options.limit]
        self.by_id = {t.id: t for t in self.suite}

    def tasks(self) -> list[Task]:
        return [Task(t.id, {"task_id": t.id, "prompt": t.turns[0], "turns": len(t.turns)}) for t in self.suite]

    def sandbox_files(self) -> dict[str, str]:
        """The libraries the workflow's sandbox holds beside the candidate (``workflow.libraries``)."""
        return workflow.library_files(self.options.workflow)

    def fingerprint(self) -> str:
        files = [Path(task_suites.__file__), Path(runner.__file__), Path(__file__), Path(workflow.__file__)]
        files += [self.workspace / f for f in self.options.grader_files] + workflow.library_paths(self.options.workflow)
        for task in self.suite:
            module = task.verifier.get("callable", "").partition(":")[0]
            spec = importlib.util.find_spec(module) if module else None
            if spec is not None and spec.origin and Path(spec.origin).is_file():
                files.append(Path(spec.origin))
        settings = {"suite": self.name, "version": VERSION, **self.options.model_dump()}
        return fingerprint(settings, files, [asdict(t) for t in self.suite])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        model = self.ctx.model if self.ctx is not None else None
        with WorkflowDriver(candidate, self.options.workflow, model) as driver:
            return [self._one(driver, task.id, seed) for task in tasks]

    def _one(self, driver: WorkflowDriver, task_id: str, seed: int) -> TaskResult:
        task = self.by_id.get(task_id)
        if task is None:
            raise RatchetError(f"jsonl: task {task_id!r} is not in {self.label}")
        env = TaskEnvironment(f"jsonl:{self.label}", [task])
        player = _TurnPlayer(driver, task.id, seed)
        try:  # the runner's one game loop: the env's one task, the workflow answering each turn
            episode = play_episode(env, {0: player}, player, 0, seed=0, config=_ONE_TASK, env_id=env.env_id)
        except _NoAnswer as stop:
            failures = [Failure(f.kind, f.message, task.id) for f in stop.failures]
            failures.append(Failure("no_answer", f"the workflow gave no answer to turn {len(player.previous)}", task.id))
            return TaskResult(task.id, seed, 0.0, "\n".join(player.traces), tuple(failures), {"model_calls": player.calls, "tokens": player.tokens})
        last = episode.steps[-1]
        score = float(episode.summary.rewards.get(0, 0.0))
        output = (last.extra.get("verdict") or {}).get("output", "") or last.illegal_reason or ""
        traces = [*player.traces, f"[verifier] {'passed' if score >= 1.0 else 'failed'}: {output}"]
        failures: tuple[Failure, ...] = ()
        if score < 1.0:
            kind = "no_code" if not last.legal else "wrong_answer"
            failures = (Failure(kind, (output or kind).strip()[:300], task.id, {"output": output}),)
        return TaskResult(task.id, seed, score, "\n".join(traces), failures, {"model_calls": player.calls, "tokens": player.tokens})


#: One task's episode: no step cap beyond the task's turns, no observations kept (the traces are).
_ONE_TASK = RolloutConfig(keep_observations=False)


class _NoAnswer(Exception):
    """The workflow gave no answer to a turn: the task ends there, failed, with its failures."""

    def __init__(self, failures: Sequence[Failure]) -> None:
        super().__init__("no answer")
        self.failures = list(failures)


class _TurnPlayer:
    """The candidate's workflow as the runner's agent on one task: each turn one run of it, seeing
    ``{"task_id", "prompt", "turn", "previous"}``; its traces and model calls are kept here."""

    name = "workflow"

    def __init__(self, driver: WorkflowDriver, task_id: str, seed: int) -> None:
        self.driver, self.task_id, self.seed = driver, task_id, seed
        self.previous: list[list[str]] = []
        self.traces: list[str] = []
        self.calls = 0
        self.tokens = 0  # prompt + reply tokens: the cost beside the calls, as the HumanEval suite records

    def reset(self, seed: int) -> None:
        pass  # one task, one episode: nothing carries over

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        run = self.driver.run({"task_id": self.task_id, "prompt": observation.text, "turn": len(self.previous),
                               "previous": self.previous}, self.seed)
        self.calls += run.model_calls
        self.tokens += run.tokens
        self.traces.append(run.trace())
        if run.answer is None:
            raise _NoAnswer(run.failures)
        self.previous.append([observation.text, run.answer])
        return run.answer
