"""One-player TextArena games as an engine evaluator, played by the one rollout runner.

A task is one (game, game seed) episode. The candidate's workflow (:mod:`ratchet.evolve.suites.
workflow`) is the player: each move is one run of it, seeing ``{"game", "observation", "feedback",
"turn"}`` and answering the move (it may call the model first). The episodes are played by
:func:`ratchet.envs.runner.run_rollouts` in this process (one worker: the workflow's sandbox and the
accounted model live here), so legality, rewards and truncation mean what they mean everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ratchet.contracts import Candidate, EpisodeSummary, Failure, Observation, StepRecord, Task, TaskResult
from ratchet.envs import runner, textarena_env
from ratchet.envs.runner import RolloutConfig, run_rollouts
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites import workflow
from ratchet.evolve.suites.config import TextArenaOptions
from ratchet.store.fingerprint import fingerprint
from ratchet.evolve.suites.workflow import WorkflowDriver

VERSION = 1


class WorkflowAgent:
    """An :class:`ratchet.envs.agents.Agent` whose every move is one run of the candidate's workflow."""

    def __init__(self, driver: WorkflowDriver, game: str, seed: int) -> None:
        self.driver, self.game, self.seed = driver, game, seed
        self.name = "workflow"
        self.turn = 0
        self.failures: list[Failure] = []
        self.model_calls = 0
        self.tokens = 0  # prompt + reply tokens: the cost beside the calls, as the HumanEval suite records

    def reset(self, seed: int) -> None:
        self.turn = 0

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        run = self.driver.run({"game": self.game, "observation": observation.text, "feedback": feedback,
                               "turn": self.turn}, self.seed * 1000 + self.turn)
        self.turn += 1
        self.model_calls += run.model_calls
        self.tokens += run.tokens
        self.failures += run.failures
        return run.answer if run.answer is not None else ""


class _Steps:
    """Keeps the runner's step records in memory (the run store's writer interface, nothing stored)."""

    def __init__(self) -> None:
        self.steps: dict[str, list[StepRecord]] = {}

    @contextmanager
    def step_writer(self, episode_id: str) -> Iterator[Any]:
        records = self.steps.setdefault(episode_id, [])

        class Writer:
            def write(self, step: StepRecord) -> None:
                records.append(step)

            def write_many(self, steps: list[StepRecord]) -> None:  # how the runner hands a finished episode over
                records.extend(steps)

        yield Writer()

    def add_episode(self, summary: EpisodeSummary) -> None:
        pass


def task_id(game: str, seed: int) -> str:
    return f"{game}#{seed}"


class TextArenaSuite:
    """Episodes of one-player TextArena games."""

    name = "textarena"

    def __init__(self, options: TextArenaOptions, ctx: EngineContext | None = None) -> None:
        self.options = options
        self.ctx = ctx

    def tasks(self) -> list[Task]:
        o = self.options
        return [Task(task_id(game, seed), {"game": game, "seed": seed})
                for game in o.games for seed in range(o.first_seed, o.first_seed + o.episodes)]

    def sandbox_files(self) -> dict[str, str]:
        """The libraries the workflow's sandbox holds beside the candidate (``workflow.libraries``)."""
        return workflow.library_files(self.options.workflow)

    def fingerprint(self) -> str:
        try:
            arena = version("textarena")
        except PackageNotFoundError:
            arena = "missing"
        settings = {"suite": self.name, "version": VERSION, "textarena": arena, **self.options.model_dump()}
        sources = [Path(m.__file__) for m in (runner, textarena_env, workflow)] + [Path(__file__)]
        sources += workflow.library_paths(self.options.workflow)
        return fingerprint(settings, sources)

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        model = self.ctx.model if self.ctx is not None else None
        config = RolloutConfig(workers=1, env=self.options.env, alternate_seats=False)
        by_id: dict[str, TaskResult] = {}
        with WorkflowDriver(candidate, self.options.workflow, model) as driver:
            for task in tasks:
                game, game_seed = task.input["game"], int(task.input["seed"])
                agent = WorkflowAgent(driver, game, seed)
                steps = _Steps()
                report = run_rollouts(game, lambda: agent, [game_seed], config, run=steps)
                [episode] = report.episodes
                by_id[task.id] = self._result(task.id, seed, episode, steps.steps.get(episode.episode_id, []), agent)
        return [by_id[t.id] for t in tasks]

    def _result(self, tid: str, seed: int, episode: EpisodeSummary, steps: list[StepRecord],
                agent: WorkflowAgent) -> TaskResult:
        reward = float(episode.rewards.get(0, 0.0))
        solved = reward >= 1.0
        score = (1.0 if solved else 0.0) if self.options.score == "solved" else min(max(reward, 0.0), 1.0)
        lines = [f"{episode.env_id} seed {episode.seed}: reward {reward:g} after {episode.steps} moves"]
        for step in steps[-12:]:
            mark = "" if step.legal else f"  ILLEGAL: {step.illegal_reason}"
            lines.append(f"move {step.index}: {step.action!r}{mark}")
        if steps:
            lines.append("last observation:\n" + steps[-1].observation[-800:])
        failures = [Failure(f.kind, f.message, tid) for f in agent.failures[:5]]
        if episode.illegal_steps:
            reasons = sorted({s.illegal_reason or "?" for s in steps if not s.legal})
            failures.append(Failure("illegal_action", f"{episode.illegal_steps} illegal moves: {'; '.join(reasons)[:300]}", tid))
        if not solved:
            how = "truncated" if episode.extra.get("truncated") else "ended by an illegal move" if episode.ended_by_illegal else "lost"
            failures.append(Failure("lost", f"not solved ({how}, reward {reward:g})", tid))
        metrics = {"reward": reward, "moves": float(episode.steps), "illegal": float(episode.illegal_steps),
                   "model_calls": float(agent.model_calls), "tokens": float(agent.tokens)}
        return TaskResult(tid, seed, score, "\n".join(lines), tuple(failures), metrics)
