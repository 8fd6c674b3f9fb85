"""Code-only rollouts of a candidate harness (the search's evaluation, as in the paper).

Actions come from the candidate's ``propose_action``, are checked by its ``is_legal_action`` and
stepped in the environment. ``eval_envs`` environments advance in lockstep (one batched sandbox
call per function per step), auto-reset when a game ends, and each stops at its first failure:
a harness code error, a proposal its own check rejects, or a move the environment rejects.
Every failure carries what the refiner needs: board, action, verdict, env reason or traceback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ratchet.autoharness.runtime import HarnessRuntime
from ratchet.sandbox.errors import feedback_of
from ratchet.envs.explore import EnvFactory
from ratchet.envs.measure import PlayStats, game_seed

#: Failure kinds, and which functions each one says to refine (the paper's rule; see refine.py).
CODE_ERROR = "code_error"
SELF_REJECTED = "rejected_by_harness"
ENV_REJECTED = "rejected_by_env"


@dataclass
class RolloutStats(PlayStats):
    """What code-only rollouts of one candidate measured: a failed attempt (a code error, a
    proposal its own check rejects, a move the env rejects) is one illegal step, with its failure."""

    failures: list[dict[str, Any]] = field(default_factory=list)
    cut: bool = False
    """True when the rollout stopped at its deadline before every env had taken its steps."""

    def policy_value(self) -> float:
        """Harness-as-policy value H: 0 if any move failed, else 0.5 + 0.5·mean reward in [0, 1]."""
        if self.failures or not self.rewards:
            return 0.0
        mean = sum(self.rewards) / len(self.rewards)
        return 0.5 + 0.5 * min(1.0, max(0.0, mean))


def _reward_01(rewards: dict[int, float] | None, player: int, num_players: int) -> float:
    """End-of-game reward of ``player`` in [0, 1] (2-player rewards in [-1, 1] are rescaled)."""
    if not rewards:
        return 0.0
    r = float(rewards.get(player, 0.0))
    return (r + 1.0) / 2.0 if num_players > 1 else r


def rollout(
    runtime: HarnessRuntime,
    env_factory: EnvFactory,
    seeds: list[int],
    steps_per_env: int,
    step_cap: int = 200,
    keep_going: bool = False,
    action_shape: str | None = None,
    deadline: float | None = None,
) -> RolloutStats:
    """Run ``len(seeds)`` environments in lockstep for up to ``steps_per_env`` steps each.

    ``keep_going=False`` (the search) stops an environment at its first failure. With
    ``keep_going=True`` a failed step is counted and the env is reset to its next game instead,
    so a legal rate over a fixed number of steps can be measured. ``action_shape`` (the game's
    action grammar, described) is named in the feedback when code returns something other than
    action text, e.g. a tuple of coordinates: the refiner is told what the game wants. With a
    ``deadline`` (a ``time.monotonic()`` value) no step starts after it; ``stats.cut`` says so.
    """
    stats = RolloutStats()
    envs = [env_factory() for _ in seeds]
    game_index = [0] * len(seeds)
    game_steps = [0] * len(seeds)
    done_steps = [0] * len(seeds)
    obs = [env.reset(game_seed(seed, 0)) for env, seed in zip(envs, seeds)]
    active = list(range(len(seeds)))

    def next_game(i: int) -> None:
        game_index[i] += 1
        game_steps[i] = 0
        obs[i] = envs[i].reset(game_seed(seeds[i], game_index[i]))

    try:
        while active:
            if deadline is not None and time.monotonic() >= deadline:
                stats.cut = True
                break
            step_seed = [game_seed(seeds[i], game_index[i]) * 7 + done_steps[i] for i in active]
            proposals = runtime.call_many("propose_action", [(obs[i].text,) for i in active], seed=step_seed[0])
            checks_for = [(i, str(p[1])) for i, p in zip(active, proposals) if p[0] == "ok"]
            checked = (runtime.call_many("is_legal_action", [(obs[i].text, a) for i, a in checks_for], seed=step_seed[0])
                       if checks_for else [])
            verdicts = dict(zip([i for i, _ in checks_for], checked))
            still: list[int] = []
            for i, (status, value) in zip(active, proposals):
                board = obs[i].text
                base = {"env_seed": game_seed(seeds[i], game_index[i]), "step": game_steps[i], "player": obs[i].player_id, "board": board}
                stats.steps += 1
                done_steps[i] += 1
                failure: dict[str, Any] | None = None
                if status != "ok":
                    failure = {**base, "kind": CODE_ERROR, "function": "propose_action", "action": None, "verdict": None, "feedback": feedback_of(value)}
                else:
                    action = str(value)
                    vstatus, verdict = verdicts[i]
                    if vstatus != "ok":
                        failure = {**base, "kind": CODE_ERROR, "function": "is_legal_action", "action": action, "verdict": None, "feedback": feedback_of(verdict)}
                    elif not bool(verdict):
                        failure = {**base, "kind": SELF_REJECTED, "function": "propose_action", "action": action, "verdict": False,
                                   "feedback": "is_legal_action returned False for the action propose_action proposed"}
                    else:
                        result = envs[i].step(action)
                        if not result.legal and not result.losing_not_illegal:
                            failure = {**base, "kind": ENV_REJECTED, "function": "both", "action": action, "verdict": True,
                                       "feedback": f"the environment rejected it: {result.illegal_reason or 'invalid move'}"
                                                   + _not_text(value, action_shape)}
                        else:
                            game_steps[i] += 1
                            if result.done or result.observation is None:
                                stats.games += 1
                                stats.rewards.append(_reward_01(result.rewards, obs[i].player_id, getattr(envs[i], "num_players", 1)))
                                next_game(i)
                            else:
                                obs[i] = result.observation
                                if game_steps[i] >= step_cap:
                                    next_game(i)
                if failure is not None:
                    stats.illegal += 1
                    stats.failures.append(failure)
                    if not keep_going:
                        continue
                    next_game(i)
                if done_steps[i] < steps_per_env:
                    still.append(i)
            active = still
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:  # closing a finished TextArena game can raise; nothing to recover
                pass
    return stats


def _not_text(value: Any, shape: str | None) -> str:
    """What to add to an illegal-move message when the code returned no string."""
    if isinstance(value, str):
        return ""
    wanted = f" shaped like {shape}" if shape and shape != "(unknown)" else ""
    return (f"; propose_action returned the {type(value).__name__} {value!r}, not the action text: "
            f"return a string{wanted}, written the way the rules show it")
