"""Code-only rollouts of a candidate harness (the search's evaluation, as in the paper).

The harness is a batched player (:class:`HarnessPlayer`) of the envs' lockstep loop
(:func:`ratchet.envs.measure.lockstep`): actions come from its ``propose_action``, are checked by
its ``is_legal_action`` and stepped in the environment, one batched sandbox call per function per
step of all environments. Every failure carries what the refiner needs: board, action, verdict,
env reason or traceback, and which function it says to refine (the paper's rule; see refine.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratchet.autoharness.runtime import HarnessRuntime
from ratchet.contracts import Observation
from ratchet.envs.agents import Attempt
from ratchet.envs.explore import EnvFactory
from ratchet.envs.measure import PlayStats, lockstep
from ratchet.sandbox.errors import feedback_of

#: Failure kinds, and which functions each one says to refine (the paper's rule; see refine.py).
CODE_ERROR = "code_error"
SELF_REJECTED = "rejected_by_harness"
ENV_REJECTED = "rejected_by_env"


class HarnessPlayer:
    """A harness as a batched agent: ``propose_action`` for every board, then ``is_legal_action``
    on the proposals that came back, each one ``call_many``. A code error, a proposal its own check
    rejects and a move the env rejects are failed attempts with their failure records.

    ``action_shape`` (the game's action grammar, described) is named in the feedback when code
    returns something other than action text, e.g. a tuple of coordinates: the refiner is told
    what the game wants.
    """

    def __init__(self, runtime: HarnessRuntime, action_shape: str | None = None) -> None:
        self.runtime = runtime
        self.action_shape = action_shape

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

    def rejected(self, attempt: Attempt, reason: str | None) -> dict[str, Any]:
        return _failure(ENV_REJECTED, "both", attempt.action, True,
                        f"the environment rejected it: {reason or 'invalid move'}" + _not_text(attempt.raw, self.action_shape))


def rollout(runtime: HarnessRuntime, env_factory: EnvFactory, seeds: list[int], steps_per_env: int, step_cap: int = 200,
            keep_going: bool = False, action_shape: str | None = None) -> PlayStats:
    """The harness alone in ``len(seeds)`` environments in lockstep, up to ``steps_per_env`` steps each.

    ``keep_going=False`` (the search) stops an environment at its first failure. With
    ``keep_going=True`` a failed step is counted and the env moves on to its next game instead,
    so a legal rate over a fixed number of steps can be measured.
    """
    return lockstep(env_factory, HarnessPlayer(runtime, action_shape), seeds, steps_per_env, step_cap,
                    stop_at_failure=not keep_going).total


def policy_value(stats: PlayStats) -> float:
    """Harness-as-policy value H: 0 if any move failed, else 0.5 + 0.5·mean reward in [0, 1]."""
    if stats.failures or not stats.rewards:
        return 0.0
    mean = sum(stats.rewards) / len(stats.rewards)
    return 0.5 + 0.5 * min(1.0, max(0.0, mean))


def _failure(kind: str, function: str, action: str | None, verdict: bool | None, feedback: str) -> dict[str, Any]:
    return {"kind": kind, "function": function, "action": action, "verdict": verdict, "feedback": feedback}


def _not_text(value: Any, shape: str | None) -> str:
    """What to add to an illegal-move message when the code returned no string."""
    if isinstance(value, str):
        return ""
    wanted = f" shaped like {shape}" if shape and shape != "(unknown)" else ""
    return (f"; propose_action returned the {type(value).__name__} {value!r}, not the action text: "
            f"return a string{wanted}, written the way the rules show it")
