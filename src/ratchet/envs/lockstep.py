"""The runner's lockstep mode: one agent's self-play in many environments at once, as the
AutoHarness legality judge measures a harness.

It is the same game loop as :func:`ratchet.envs.runner.play_episode`, not a second one: every step
is judged by :func:`~ratchet.envs.runner.judge_step` and counted by
:func:`~ratchet.envs.runner.legal_rate`, so a step counts the same whichever mode played it. It
lives apart from the one-episode loop because it plays many environments per call (one
``act_many`` for all of them) and keeps per-environment counts and located failures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ratchet.contracts import Failure
from ratchet.envs.agents import Agent, BatchedAgent, OneAtATime
from ratchet.envs.runner import judge_step, legal_rate


def game_seed(base: int, game_index: int) -> int:
    """Seed of the ``game_index``-th game of the env started at ``base``: injective on
    (base, index) so search and held-out seed sets stay disjoint after auto-resets."""
    return base if game_index == 0 else base * 1_000_003 + game_index


def move_seed(game: int, step: int) -> int:
    """The seed a batched agent's call gets for the ``step``-th move of the game seeded ``game``
    (its code's random choices follow it); one formula, so an agent played one env at a time
    draws as the lockstep mode draws for a lone env."""
    return game * 7 + step


@dataclass
class PlayStats:
    """An agent's counts over games: its steps, the illegal ones (:func:`legal_rate`), finished
    games and their rewards, illegal reasons and, in the lockstep mode, its failures."""

    steps: int = 0
    illegal: int = 0
    losing_not_illegal: int = 0
    games: int = 0
    rewards: list[float] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    """The agent's failed attempts in :func:`play_lockstep`, in order (``detail`` holds where: the
    ``env_seed``, ``step``, ``player`` and ``board``)."""
    cut: bool = False
    """True when :func:`play_lockstep` stopped at its deadline before every environment took its steps."""

    @property
    def legal_rate(self) -> float | None:
        return legal_rate(self.steps, self.illegal)

    def to_dict(self) -> dict[str, Any]:
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else None
        return {"steps": self.steps, "illegal": self.illegal, "losing_not_illegal": self.losing_not_illegal,
                "legal_rate": self.legal_rate, "games": self.games, "mean_reward": mean,
                "illegal_reasons": dict(sorted(self.reasons.items(), key=lambda kv: -kv[1])[:5])}


@dataclass
class Lockstep:
    """What :func:`play_lockstep` measured: each environment's own counts (in the order of the
    seeds) and their total, in which rewards and failures are in the order they happened."""

    envs: list[PlayStats]
    total: PlayStats


def play_lockstep(env_factory: Callable[[], Any], agent: Agent, seeds: list[int], steps_per_env: int,
                  step_cap: int = 200, stop_at_failure: bool = True, deadline: float | None = None) -> Lockstep:
    """The game loop's lockstep mode: self-play of ``agent`` in one environment per seed, each
    step judged by :func:`judge_step` as :func:`play_episode` judges it. A batched agent
    (:class:`BatchedAgent`) advances them all together: each step is one ``act_many`` call for
    every environment still playing. Any other agent plays them through :class:`OneAtATime`: one
    ``act`` per step, each environment's games to the end before the next environment's, reset and
    bound per game as the runner does (so its counts are :func:`play_episode`'s, game by game). An
    environment auto-resets when a game ends (or is cut at ``step_cap`` steps) and plays up to
    ``steps_per_env`` attempts.

    A failed attempt (the agent's own failure, or an action the env rejects) is one illegal step
    with its :class:`Failure` (what the agent says, its detail joined by ``{env_seed, step,
    player, board}``); with ``stop_at_failure`` its environment stops there, else it moves on to its
    next game. A move that merely loses is a legal step. A finished game adds the reward of the
    seat that moved last, in [0, 1] (2-player rewards in [-1, 1] rescaled). With a ``deadline`` (a
    ``time.monotonic()`` value) no step starts after it, and ``total.cut`` says play was cut: a game
    whose reset is slow (Sokoban builds each room by a depth-first search) must not hold a
    measurement for an hour.
    """
    player: BatchedAgent | OneAtATime = agent if isinstance(agent, BatchedAgent) else OneAtATime(agent)
    total = PlayStats()
    parts = [PlayStats() for _ in seeds]
    envs = [env_factory() for _ in seeds]
    game_index = [0] * len(seeds)
    game_steps = [0] * len(seeds)
    obs = [env.reset(game_seed(seed, 0)) for env, seed in zip(envs, seeds)]
    active = list(range(len(seeds)))

    def next_game(i: int) -> None:
        game_index[i] += 1
        game_steps[i] = 0
        obs[i] = envs[i].reset(game_seed(seeds[i], game_index[i]))

    try:
        while active:
            if deadline is not None and time.monotonic() >= deadline:
                total.cut = True
                break
            first = active[0]  # one seed for the batched call: the first playing env's
            playing = active
            if isinstance(player, OneAtATime):  # one environment at a time; a new game is reset and bound
                playing = active[:1]
                player.begin(envs[first], game_seed(seeds[first], game_index[first]))
            attempts = player.act_many([obs[i] for i in playing], seed=move_seed(game_seed(seeds[first], game_index[first]), parts[first].steps))
            still: list[int] = []
            for i, attempt in zip(playing, attempts):
                counts = (total, parts[i])
                where = {"env_seed": game_seed(seeds[i], game_index[i]), "step": game_steps[i], "player": obs[i].player_id,
                         "board": obs[i].text}
                for c in counts:
                    c.steps += 1
                failure = attempt.failure
                if failure is None:
                    result = envs[i].step(attempt.action)
                    verdict = judge_step(result)
                    if verdict.illegal:
                        failure = player.rejected(attempt, result.illegal_reason)
                        reason = (verdict.reason or "")[:80]
                        for c in counts:
                            c.reasons[reason] = c.reasons.get(reason, 0) + 1
                    else:
                        game_steps[i] += 1
                        reward = _reward_01(result.rewards, obs[i].player_id, getattr(envs[i], "num_players", 1)) if verdict.ended else 0.0
                        for c in counts:
                            c.losing_not_illegal += int(verdict.losing)
                            if verdict.ended:
                                c.games += 1
                                c.rewards.append(reward)
                        if verdict.ended:
                            next_game(i)
                        else:
                            obs[i] = result.observation
                            if game_steps[i] >= step_cap:
                                next_game(i)
                if failure is not None:
                    located = replace(failure, detail={**where, **failure.detail})
                    for c in counts:
                        c.illegal += 1
                        c.failures.append(located)
                    if stop_at_failure:
                        continue
                    next_game(i)
                if parts[i].steps < steps_per_env:
                    still.append(i)
            active = still + active[len(playing):]
    finally:
        for env in envs:
            try:
                env.close()
            except Exception:  # closing a finished TextArena game can raise; nothing to recover
                pass
    return Lockstep(parts, total)


def _reward_01(rewards: dict[int, float] | None, player: int, num_players: int) -> float:
    """End-of-game reward of ``player`` in [0, 1] (2-player rewards in [-1, 1] are rescaled)."""
    if not rewards:
        return 0.0
    r = float(rewards.get(player, 0.0))
    return (r + 1.0) / 2.0 if num_players > 1 else r
