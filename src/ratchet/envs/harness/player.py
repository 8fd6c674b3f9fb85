"""A harness as an envs agent (:class:`HarnessPlayer`): its code plays a game alone, batched over
the envs of the lockstep loop, each failure (a code error, a proposal its own check rejects, a move
the env rejects) a :class:`~ratchet.contracts.Failure` naming the function it blames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ratchet.contracts import Failure, Observation
from ratchet.envs import measure
from ratchet.envs.agents import Attempt
from ratchet.envs.harness.runtime import HarnessRuntime
from ratchet.sandbox.errors import feedback_of

#: Failure kinds, and which functions each one says to refine (the paper's rule; ``ratchet.autoharness.refine``).
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


def _failure(kind: str, function: str, action: str | None, verdict: bool | None, feedback: str) -> Failure:
    return Failure(kind, feedback, detail={"function": function, "action": action, "verdict": verdict})


def _not_text(value: Any, shape: str | None) -> str:
    """What to add to an illegal-move message when the code returned no string."""
    if isinstance(value, str):
        return ""
    wanted = f" shaped like {shape}" if shape and shape != "(unknown)" else ""
    return (f"; propose_action returned the {type(value).__name__} {value!r}, not the action text: "
            f"return a string{wanted}, written the way the rules show it")
