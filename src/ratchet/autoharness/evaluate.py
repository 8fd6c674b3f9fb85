"""Code-only rollouts of a harness (the search's evaluation, as in the paper): the harness as an
agent that plays batched (:class:`HarnessPlayer`, one sandbox call per function per step of all
the envs' lockstep loop) and its judge as an engine evaluator (:class:`LegalityEvaluator`). Every
failure carries what the refiner needs: board, action, verdict, env reason or traceback, and which
function it blames (see refine.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ratchet.autoharness.dense import harness_value, run_checks
from ratchet.autoharness.refine import check_signatures
from ratchet.autoharness.runtime import HarnessRuntime, RuntimeFactory
from ratchet.contracts import Candidate, Failure, Observation, Task, TaskResult
from ratchet.envs import measure
from ratchet.envs.agents import Attempt
from ratchet.envs.explore import EnvFactory
from ratchet.store.fingerprint import fingerprint
from ratchet.sandbox.errors import feedback_of

#: Failure kinds, and which functions each one says to refine (the paper's rule; see refine.py).
CODE_ERROR = "code_error"
SELF_REJECTED = "rejected_by_harness"
ENV_REJECTED = "rejected_by_env"


class HarnessPlayer:
    """A harness as an agent: ``propose_action`` for every board, then ``is_legal_action`` on the
    proposals that came back, each one ``call_many``. A code error, a proposal its own check
    rejects and a move the env rejects are failed attempts with their failures. Played one
    env at a time (``act``, seeded as lockstep seeds a lone env's first game) a failed attempt sends
    "" (``last_info["failure"]`` has its :class:`Failure`), so the runner counts it illegal as lockstep does.
    ``action_shape`` (the game's action grammar, described) is named in the feedback when code
    returns no action text (e.g. a tuple): the refiner is told what the game wants."""

    name = "harness"

    def __init__(self, runtime: HarnessRuntime, action_shape: str | None = None) -> None:
        self.runtime, self.action_shape = runtime, action_shape
        self._seed = self._step = 0

    def reset(self, seed: int) -> None:
        self._seed, self._step = seed, 0

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        [attempt] = self.act_many([observation], seed=measure.move_seed(self._seed, self._step))
        self._step += 1
        self.last_info: dict[str, Any] = {"failure": attempt.failure} if attempt.failure else {}
        return "" if attempt.failure else str(attempt.action)

    def act_many(self, observations: Sequence[Observation], seed: int) -> list[Attempt]:
        proposals = self.runtime.call_many("propose_action", [(o.text,) for o in observations], seed=seed)
        checks_for = [(k, str(value)) for k, (status, value) in enumerate(proposals) if status == "ok"]
        checked = (self.runtime.call_many("is_legal_action", [(observations[k].text, a) for k, a in checks_for], seed=seed)
                   if checks_for else [])
        verdicts = dict(zip([k for k, _ in checks_for], checked))
        attempts: list[Attempt] = []
        for k, (status, value) in enumerate(proposals):
            if status != "ok":
                attempts.append(Attempt(None, _failure(CODE_ERROR, "propose_action", None, None, feedback_of(value))))
                continue
            action = str(value)
            vstatus, verdict = verdicts[k]
            if vstatus != "ok":
                attempts.append(Attempt(action, _failure(CODE_ERROR, "is_legal_action", action, None, feedback_of(verdict))))
            elif not bool(verdict):
                attempts.append(Attempt(action, _failure(SELF_REJECTED, "propose_action", action, False,
                                                         "is_legal_action returned False for the action propose_action proposed")))
            else:
                attempts.append(Attempt(action, raw=value))
        return attempts

    def rejected(self, attempt: Attempt, reason: str | None) -> Failure:
        return _failure(ENV_REJECTED, "both", attempt.action, True,
                        f"the environment rejected it: {reason or 'invalid move'}" + _not_text(attempt.raw, self.action_shape))


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
        return fingerprint(settings, [Path(__file__), Path(measure.__file__)])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        code = candidate.files.get("harness.py", "")
        problem = check_signatures(code)
        if problem:
            # Code that does not parse or lacks a function the game calls plays no step: every task
            # scores 0 with the problem as its failure, in the words the refiner is to act on.
            failure = _failure(CODE_ERROR, "both", None, None, problem)
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


def policy_value(stats: measure.PlayStats) -> float:
    """Harness-as-policy value H: 0 if any move failed, else 0.5 + 0.5·mean reward in [0, 1]."""
    if stats.failures or not stats.rewards:
        return 0.0
    return 0.5 + 0.5 * min(1.0, max(0.0, sum(stats.rewards) / len(stats.rewards)))


def _failure(kind: str, function: str, action: str | None, verdict: bool | None, feedback: str) -> Failure:
    return Failure(kind, feedback, detail={"function": function, "action": action, "verdict": verdict})


def _not_text(value: Any, shape: str | None) -> str:
    """What to add to an illegal-move message when the code returned no string."""
    if isinstance(value, str):
        return ""
    wanted = f" shaped like {shape}" if shape and shape != "(unknown)" else ""
    return (f"; propose_action returned the {type(value).__name__} {value!r}, not the action text: "
            f"return a string{wanted}, written the way the rules show it")
