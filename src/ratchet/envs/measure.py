"""Measuring an agent on held-out seeds with the runner's game loop: its legal-action rate in
self-play (games auto-reset until it has taken the steps asked for) and its reward (1 player:
mean reward; 2 players: win rate against a random-legal opponent, seats alternated).

The lockstep mode (an agent's self-play in many environments at once) is the runner's
(:func:`ratchet.envs.lockstep.play_lockstep`); its names are kept here for the callers that measure
with it.
"""

from __future__ import annotations

from collections.abc import Callable

from ratchet.contracts import Environment
from ratchet.envs import runner
from ratchet.envs.agents import Agent, RandomLegalAgent
from ratchet.envs.lockstep import Lockstep, PlayStats, game_seed, move_seed
from ratchet.envs.lockstep import play_lockstep as lockstep

__all__ = ["Lockstep", "PlayStats", "game_seed", "lockstep", "move_seed", "play_game", "random_legal_opponent", "reward",
           "selfplay_legal_rate"]

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
