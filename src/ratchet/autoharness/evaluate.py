"""Code-only rollouts of a harness judged as an engine evaluator (:class:`LegalityEvaluator`): the
harness plays as an envs agent (:class:`ratchet.envs.harness.player.HarnessPlayer`), and every
failure carries what the refiner needs: board, action, verdict, env reason or traceback, and which
function it blames (see refine.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ratchet.envs.harness.dense import harness_value, policy_value, run_checks
from ratchet.envs.harness.runtime import HarnessRuntime, RuntimeFactory
from ratchet.contracts import Candidate, Task, TaskResult
from ratchet.envs import measure
from ratchet.envs.explore import EnvFactory
from ratchet.envs.harness import player
from ratchet.envs.harness.player import HarnessPlayer
from ratchet.store.fingerprint import fingerprint


class LegalityEvaluator:
    """The search's legality judge as an engine :class:`ratchet.contracts.Evaluator`: a task is an
    environment seed, its result the harness's play there (in lockstep with the other tasks',
    stopped at its first failure); score: that legal rate (0 with no step), with its failures.
    Seed 0 plays the task's own game seed (the search's evaluation); seed s > 0 other games of
    that env, none of those seed 0 plays."""

    name = "legality"

    def __init__(self, env_factory: EnvFactory, runtime_factory: RuntimeFactory, seeds: Sequence[int], steps_per_env: int,
                 step_cap: int = 200, action_shape: str | None = None, game: str = "",
                 dense: Sequence[Any] = (), policy: bool = False) -> None:
        self.env_factory, self.runtime_factory, self.seeds = env_factory, runtime_factory, list(seeds)
        self.steps, self.step_cap, self.action_shape, self.game = steps_per_env, step_cap, action_shape, game
        #: Dense checks (``dense.DenseCheck``) run once per evaluation on the loaded harness: each
        #: task's score is then ``dense.harness_value`` of its primary score and their metrics.
        self.dense = list(dense)
        #: Score a task by the policy value (``policy`` mode), not the legal rate.
        self.policy = policy

    def tasks(self) -> list[Task]:
        return [Task(f"{self.game}#{seed}", {"seed": seed}) for seed in self.seeds]

    def fingerprint(self) -> str:
        settings = {"evaluator": self.name, "game": self.game, "steps": self.steps, "step_cap": self.step_cap, "shape": self.action_shape}
        if self.dense or self.policy:  # only then: a plain judge keeps the fingerprint its cached results have
            settings.update(dense=[c.name for c in self.dense], policy=self.policy)
        return fingerprint(settings, [Path(__file__), Path(player.__file__), Path(measure.__file__)])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        code = candidate.files.get("harness.py", "")
        with self.runtime_factory(dict(candidate.files)) as runtime:
            played = self.lockstep(runtime, tasks, seed)
            checked, found = run_checks(self.dense, runtime, code) if self.dense and tasks else ({}, [])
        results = []
        for k, (t, p) in enumerate(zip(tasks, played.envs)):
            rate = 0.0 if p.legal_rate is None else p.legal_rate
            primary = policy_value(p) if self.policy else rate
            # The dense checks judge the whole harness, not a task: their failures go with the first
            # task's, so the refiner is shown them once.
            failures = [replace(f, task_id=t.id) for f in p.failures + (found if k == 0 else [])]
            results.append(TaskResult(t.id, seed, harness_value(primary, checked), f"{p.steps} steps, {p.illegal} illegal, {p.games} games",
                                      tuple(failures), {"steps": float(p.steps), "illegal": float(p.illegal), "games": float(p.games),
                                                        "reward": sum(p.rewards), "legal_rate": rate, **checked}))
        return results

    def lockstep(self, runtime: HarnessRuntime, tasks: Sequence[Task], seed: int = 0) -> measure.Lockstep:
        """The tasks' envs played together by a harness already loaded: per env what :meth:`evaluate`
        scores, and the total the search scores (it runs its dense checks on the same runtime)."""
        bases = [measure.game_seed(int(t.input["seed"]), seed * (self.steps + 1)) for t in tasks]
        return measure.lockstep(self.env_factory, HarnessPlayer(runtime, self.action_shape), bases, self.steps, self.step_cap)
