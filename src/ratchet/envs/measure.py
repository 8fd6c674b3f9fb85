"""Measuring an agent on held-out seeds with the runner's game loop: its legal-action rate in
self-play (games auto-reset until it has taken the steps asked for) and its reward (1 player:
mean reward; 2 players: win rate against a random-legal opponent, seats alternated). And the
lockstep loop (:func:`lockstep`): an agent's self-play in many environments at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ratchet.contracts import Environment, Failure
from ratchet.envs import runner
from ratchet.envs.agents import Agent, BatchedAgent, OneAtATime, RandomLegalAgent


def game_seed(base: int, game_index: int) -> int:
    """Seed of the ``game_index``-th game of the env started at ``base``: injective on
    (base, index) so search and held-out seed sets stay disjoint after auto-resets."""
    return base if game_index == 0 else base * 1_000_003 + game_index


def move_seed(game: int, step: int) -> int:
    """The seed a batched agent's call gets for the ``step``-th move of the game seeded ``game``
    (its code's random choices follow it); one formula, so an agent played one env at a time
    draws as the lockstep loop draws for a lone env."""
    return game * 7 + step


@dataclass
class PlayStats:
    steps: int = 0
    illegal: int = 0
    losing_not_illegal: int = 0
    games: int = 0
    rewards: list[float] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    """The agent's failed attempts in :func:`lockstep`, in order (``detail`` holds where: the
    ``env_seed``, ``step``, ``player`` and ``board``)."""
    cut: bool = False
    """True when :func:`lockstep` stopped at its deadline before every environment took its steps."""

    @property
    def legal_rate(self) -> float | None:
        return runner.legal_rate(self.steps, self.illegal)

    def to_dict(self) -> dict[str, Any]:
        mean = sum(self.rewards) / len(self.rewards) if self.rewards else None
        return {"steps": self.steps, "illegal": self.illegal, "losing_not_illegal": self.losing_not_illegal,
                "legal_rate": self.legal_rate, "games": self.games, "mean_reward": mean,
                "illegal_reasons": dict(sorted(self.reasons.items(), key=lambda kv: -kv[1])[:5])}


_PLAY = runner.RolloutConfig(keep_observations=False)  # the protocol keeps counts, not step records


def play_game(env: Environment, seats: dict[int, Agent], agent_seat: int, seed: int, step_cap: int, stats: PlayStats,
              self_play: bool = False, step_budget: int | None = None) -> dict[int, float]:
    """One game on the runner's game loop; the agent's steps go into ``stats``. Returns the final
    rewards ({} when cut at ``step_cap`` or when ``stats`` reaches ``step_budget`` steps)."""
    budget = None if step_budget is None else step_budget - stats.steps
    result = runner.play_episode(env, seats, seats[agent_seat], agent_seat, seed=seed, config=_PLAY, self_play=self_play,
                                 max_steps=step_cap, max_agent_steps=budget)
    stats.steps += result.agent_steps
    stats.illegal += result.agent_illegal
    stats.losing_not_illegal += result.agent_losing_invalid
    for reason in result.reasons:
        stats.reasons[reason[:80]] = stats.reasons.get(reason[:80], 0) + 1
    return result.summary.rewards


def selfplay_legal_rate(env_factory: Callable[[], Environment], player: Agent, seeds: list[int], steps: int, step_cap: int) -> PlayStats:
    """Self-play legal-action rate: ``steps`` agent steps per seed, games auto-reset."""
    stats = PlayStats()
    env = env_factory()
    try:
        for base in seeds:
            start, k = stats.steps, 0
            while stats.steps - start < steps:
                seats = {p: player for p in range(getattr(env, "num_players", 1))}
                play_game(env, seats, 0, game_seed(base, k), step_cap, stats, self_play=True, step_budget=start + steps)
                stats.games += 1
                k += 1
    finally:
        env.close()
    return stats


def reward(env_factory: Callable[[], Environment], player: Agent, opponent_factory: Callable[[Environment], Agent] | None,
           seeds: list[int], step_cap: int) -> PlayStats:
    """1-player: mean reward over one game per seed. 2-player: win rate (draw 0.5) against the
    opponent, the agent in seat i % 2 for the i-th match."""
    stats = PlayStats()
    env = env_factory()
    try:
        n = getattr(env, "num_players", 1)
        for i, seed in enumerate(seeds):
            if n == 1:
                rewards = play_game(env, {0: player}, 0, seed, step_cap, stats)
                stats.rewards.append(float(rewards.get(0, 0.0)))
            else:
                seat = i % 2
                assert opponent_factory is not None
                seats = {seat: player, 1 - seat: opponent_factory(env)}
                rewards = play_game(env, seats, seat, seed, step_cap, stats)
                mine, theirs = rewards.get(seat, 0.0), rewards.get(1 - seat, 0.0)
                stats.rewards.append(1.0 if mine > theirs else 0.5 if mine == theirs else 0.0)
            stats.games += 1
    finally:
        env.close()
    return stats


def random_legal_opponent(env: Environment) -> Agent:
    """The fixed 2-player opponent: a random move the env accepts (found by probing)."""
    opponent = RandomLegalAgent(seed=0)
    opponent.bind(env)
    return opponent


@dataclass
class Lockstep:
    """What :func:`lockstep` measured: each environment's own counts (in the order of the seeds)
    and their total, in which rewards and failures are in the order they happened."""

    envs: list[PlayStats]
    total: PlayStats


def lockstep(env_factory: Callable[[], Environment], agent: Agent, seeds: list[int], steps_per_env: int,
             step_cap: int = 200, stop_at_failure: bool = True, deadline: float | None = None) -> Lockstep:
    """Self-play of ``agent`` in one environment per seed. A batched agent (:class:`BatchedAgent`)
    advances them all together: each step is one ``act_many`` call for every environment still
    playing. Any other agent plays them through :class:`OneAtATime`: one ``act`` per step, each
    environment's games to the end before the next environment's, reset and bound per game as the
    runner does. An environment auto-resets when a game ends (or is cut at ``step_cap`` steps) and
    plays up to ``steps_per_env`` attempts.

    A failed attempt (the agent's own failure, or an action the env rejects) is one illegal step
    with its :class:`Failure` (what the agent says, its detail joined by ``{env_seed, step,
    player, board}``); with
    ``stop_at_failure`` its environment stops there, else it moves on to its next game. A move that
    merely loses is a legal step. A finished game adds the reward of the seat that moved last, in
    [0, 1] (2-player rewards in [-1, 1] rescaled). With a ``deadline`` (a ``time.monotonic()``
    value) no step starts after it, and ``total.cut`` says play was cut: a game whose reset is slow
    (Sokoban builds each room by a depth-first search) must not hold a measurement for an hour.
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
                    if not result.legal and not result.losing_not_illegal:
                        failure = player.rejected(attempt, result.illegal_reason)
                        reason = (result.illegal_reason or "(no reason given)")[:80]
                        for c in counts:
                            c.reasons[reason] = c.reasons.get(reason, 0) + 1
                    else:
                        game_steps[i] += 1
                        ended = result.done or result.observation is None
                        reward = _reward_01(result.rewards, obs[i].player_id, getattr(envs[i], "num_players", 1)) if ended else 0.0
                        for c in counts:
                            c.losing_not_illegal += int(result.losing_not_illegal)
                            if ended:
                                c.games += 1
                                c.rewards.append(reward)
                        if ended:
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
