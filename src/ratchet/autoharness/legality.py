"""AutoHarness's legality judge as an engine suite: a candidate's ``harness.py`` plays a TextArena
game by code alone, each task one env seed, scored by its legal-action rate there, or with the
``dense`` option by h = 0.5·legal + 0.5·dense (``dense.harness_value``, the dedicated search's
formula), the dense checks run once per evaluation on the game explored on ``harvest_seeds``.

A run config names it by import path, as the engine names every configuration's parts:
``suite: {name: "ratchet.autoharness.legality:LegalitySuite", options: {game: TicTacToe-v0, ...}}``.

The suite builds its judge, :class:`LegalityEvaluator`, from its options: the
game's env factory (valid-move lists stripped, as the search evaluates) and the runtime the
``ratchet autoharness`` search runs harness code in, the sandbox, with ``harnesslib`` importable.
Candidate code never runs in the engine's process: only a test may hand in another runtime
factory, as ``ctx.extra["harness_runtime"]`` (e.g. ``InProcessHarness``).

With the ``heldout`` option the suite has a report stage (:class:`ratchet.evolve.report.ReportingSuite`):
after the engine's final report, the best harness's code-alone held-out check, the held-out protocol
with the play model and the adoption verdict (:mod:`ratchet.autoharness.heldout`). The play model is
``ctx.extra["play_model"]`` when given, else the run's model; a batch's library copy is
``ctx.extra["harness_library"]``; ``ctx.extra["on_phase"]`` hears the stage's phases.

The engine evaluates one task at a time, so each env plays alone here, where the search plays its
envs in lockstep; an env's legal rate does not depend on the others, but the harness's own random
draws are seeded per batched call, so a randomized harness may play differently than in the search.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from ratchet.envs.harness import dense, runtime, transitions
from ratchet.envs.harness import player as harness_player
from ratchet.envs.harness.dense import DenseCheck, build_checks, harness_value, policy_value, run_checks
from ratchet.envs.harness.player import HarnessPlayer
from ratchet.autoharness.heldout import HeldoutOptions, run_stage
from ratchet.autoharness.pipeline import accounted
from ratchet.autoharness import refine
from ratchet.envs.harness.runtime import HarnessRuntime, RuntimeFactory, sandbox_runtime_factory
from ratchet.config import Settings
from ratchet.contracts import Candidate, Failure, Model, Task, TaskResult
from ratchet.envs import explore, measure, registry, textarena_env
from ratchet.envs.explore import EnvFactory, harvest
from ratchet.envs.registry import env_factory_for
from ratchet.evolve.canary import Canary
from ratchet.evolve.context import EngineContext
from ratchet.evolve.report import StageReport
from ratchet.store.fingerprint import fingerprint

VERSION = 1

#: The canary: code that fails on every call must score 0 (a grader that counted a code error as a
#: legal step would accept anything).
CRASHING_HARNESS = """def propose_action(board):
    raise RuntimeError("canary: this harness fails on every call")


def is_legal_action(board, action):
    raise RuntimeError("canary: this harness fails on every call")
"""


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
        return fingerprint(settings, [Path(__file__), Path(harness_player.__file__), Path(measure.__file__), Path(refine.__file__)])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        code = candidate.files.get("harness.py", "")
        problem = refine.check_signatures(code)
        if problem:
            # Code that does not parse or lacks a function the game calls plays no step: every task
            # scores 0 with the problem as its failure, in the words the refiner is to act on.
            failure = Failure(harness_player.CODE_ERROR, problem, detail={"function": "both", "action": None, "verdict": None})
            return [TaskResult(t.id, seed, 0.0, problem, (replace(failure, task_id=t.id),),
                               {"steps": 0.0, "illegal": 0.0, "games": 0.0, "reward": 0.0, "legal_rate": 0.0})
                    for t in tasks]
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


class LegalityOptions(Settings):
    """AutoHarness's legality judge (:class:`LegalityEvaluator`): the
    candidate's ``harness.py`` (``propose_action(board)``, ``is_legal_action(board, action)``) plays
    a TextArena game by code alone, in self-play, in the sandbox the ``ratchet autoharness`` search
    uses; a task is one env seed, its score the legal-action rate there (0 with no step)."""

    game: str = "TicTacToe-v0"
    """TextArena game id; its observations have the game's own lists of valid moves stripped."""
    seeds: list[int] = Field(default_factory=lambda: list(range(10)), min_length=1)
    """Env seeds, one task each (``GAME#SEED``); the run's ``splits`` assign them to search, held-in,
    held-out and test. Evaluation seed 0 plays each env's own game; seed s > 0 other games of it."""
    steps_per_env: int = Field(default=100, ge=1)
    """Most harness steps per env (games auto-reset); an env stops at its first failed step."""
    step_cap: int = Field(default=200, ge=1)
    """Most steps of a single game before it is cut and reset (games can loop)."""
    call_timeout_s: float = Field(default=1.0, gt=0)
    """Seconds one harness function call may take in the sandbox before it counts as a code error."""
    action_shape: str | None = None
    """The game's action grammar in words (e.g. ``[N]``), named in the feedback when the code returns
    something other than the action text; None names none."""
    dense: list[Literal["transitions", "legal_actions"]] = Field(default_factory=list)
    """Dense checks averaged with the legal rate, h = 0.5·legal + 0.5·dense (``dense.harness_value``,
    the dedicated search's score): ``transitions`` (``is_legal_action`` on labelled transitions of
    the explored game, the ``transitions`` idea) and ``legal_actions`` (a scaffolded harness's
    ``legal_actions`` against the game's own legal lists, the ``scaffold`` idea's check). Empty:
    the legal rate alone."""
    explain_failures: bool = False
    """The ``explain_failures`` idea: the ``legal_actions`` check names an inverted condition, a
    hard-coded answer or a test never true plainly, before the wrong states it shows."""
    harvest_seeds: list[int] = Field(default_factory=lambda: [0, 1, 2, 3])
    """Env seeds the game is explored on (once, before the first evaluation) for the dense checks;
    the search's seeds, so the checks hold no state of a held-in or test game's own play."""
    transitions_per_seed: int = Field(default=60, ge=1)
    """Labelled transitions explored per harvest seed."""
    rng_seed: int = 0
    """Seed of the exploration and of the unit tests' balanced subset (the search's ``rng_seed``)."""
    mode: Literal["verifier", "filter", "policy"] = "verifier"
    """``policy`` scores a task by the harness's policy value (0 if any move failed, else 0.5 +
    0.5·mean reward), as the search scores the policy mode; the others by the legal rate."""
    heldout: HeldoutOptions | None = None
    """The report stage on the best harness (:mod:`ratchet.autoharness.heldout`): held-out seeds,
    protocol, adoption rules, library. None: no report stage. Decides no task's score, so it is no
    part of the fingerprint (a resumed run may be given another protocol)."""


class LegalitySuite:
    """Env seeds of one TextArena game as tasks, judged by the harness's legal rate."""

    name = "legality"

    def __init__(self, options: LegalityOptions, ctx: EngineContext | None = None) -> None:
        self.options = options
        # Kept instead of ctx: the suite calls no model, and the default factory is built per
        # evaluation so that the suite pickles for the process executors.
        self.injected: RuntimeFactory | None = None if ctx is None else ctx.extra.get("harness_runtime")
        self._checks: list[DenseCheck] | None = None

    def checks(self) -> list[DenseCheck]:
        """The dense checks, the game explored for them once (in this process) on ``harvest_seeds``."""
        o = self.options
        if self._checks is None:
            transitions = (harvest(env_factory_for(o.game), env_factory_for(o.game, hints=True), o.harvest_seeds,
                                   o.transitions_per_seed, random.Random(o.rng_seed)) if o.dense else [])
            self._checks = build_checks(o.dense, transitions, o.rng_seed, o.explain_failures)
        return self._checks

    def judge(self) -> LegalityEvaluator:
        o = self.options
        runtime_factory = self.injected or sandbox_runtime_factory(o.call_timeout_s)
        return LegalityEvaluator(env_factory_for(o.game), runtime_factory, o.seeds, o.steps_per_env, o.step_cap,
                                 o.action_shape, o.game, self.checks(), o.mode == "policy")

    def tasks(self) -> list[Task]:
        return self.judge().tasks()

    def canaries(self) -> list[Canary]:
        return [Canary("crashing-harness", self.tasks()[0], {"harness.py": CRASHING_HARNESS}, 0.0)]

    def fingerprint(self) -> str:
        try:
            arena = version("textarena")
        except PackageNotFoundError:
            arena = "missing"
        where = "sandbox" if self.injected is None else f"injected:{getattr(self.injected, '__qualname__', '?')}"
        settings = {"suite": self.name, "version": VERSION, "textarena": arena, "runtime": where,
                    "judge": self.judge().fingerprint(), **self.options.model_dump(exclude={"heldout"})}
        # harnesslib: what a harness may import decides its score as much as the harness does.
        sources = [Path(m.__file__) for m in (runtime, registry, textarena_env, dense, transitions, explore)]
        return fingerprint(settings, [*sources, runtime.HARNESSLIB_PATH, Path(__file__)])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        return self.judge().evaluate(candidate, tasks, seed)

    def report_stage(self, best: Candidate, report: Mapping[str, Any], ctx: EngineContext,
                     model: Model | None) -> StageReport | None:
        """The held-out stage on the best harness (see the module's docstring); None without ``heldout``."""
        o = self.options
        if o.heldout is None:
            return None
        player = ctx.extra.get("play_model") or (accounted(model, ctx.run, "autoharness.heldout") if model is not None else None)
        return run_stage(o.heldout, game=o.game, mode=o.mode, step_cap=o.step_cap, best=best, run=ctx.run,
                         play_model=player, runtime_factory=self.injected or sandbox_runtime_factory(o.call_timeout_s),
                         library=ctx.extra.get("harness_library"), model_name=getattr(model, "name", None),
                         on_phase=ctx.extra.get("on_phase"))
