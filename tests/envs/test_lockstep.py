"""The lockstep loop: an agent's self-play in many environments at once; one call per step for an
agent that plays batched, the runner's play env by env for any other agent."""

from __future__ import annotations

import random

import pytest

from ratchet.contracts import Failure, Observation, StepResult
from ratchet.envs.agents import Agent, Attempt, BatchedAgent
from ratchet.envs.measure import PlayStats, game_seed, lockstep
from ratchet.envs.registry import make, register_env
from ratchet.envs.runner import RolloutConfig, play_episode, run_rollouts


class Count:
    """Say "[+]" three times to win (reward 1); anything else is an invalid move."""

    env_id = "count"
    num_players = 1

    def reset(self, seed: int) -> Observation:
        self.seed, self.n = seed, 0
        return Observation(0, f"seed {seed} n {self.n}")

    def step(self, action: str) -> StepResult:
        if action != "[+]":
            return StepResult(Observation(0, f"seed {self.seed} n {self.n}"), False, legal=False, illegal_reason="say [+]")
        self.n += 1
        if self.n == 3:
            return StepResult(None, True, rewards={0: 1.0})
        return StepResult(Observation(0, f"seed {self.seed} n {self.n}"), False)

    def close(self) -> None:
        pass


class Scripted:
    """Plays "[+]", except: a failure of its own on the boards in ``own``, a bad move on those in
    ``bad``. An agent (``act``) that can also play batched."""

    name = "scripted"

    def __init__(self, own: set[str] = frozenset(), bad: set[str] = frozenset()) -> None:
        self.own, self.bad = own, bad
        self.calls: list[tuple[int, int]] = []

    def reset(self, seed):
        pass

    def act(self, observation, feedback=None):
        return "[-]" if observation.text in self.bad else "[+]"

    def act_many(self, observations, seed):
        self.calls.append((len(observations), seed))
        return [Attempt(None, Failure("mine", "no idea")) if o.text in self.own
                else Attempt("[-]", raw=("-",)) if o.text in self.bad else Attempt("[+]") for o in observations]

    def rejected(self, attempt, reason):
        return Failure("env", f"{reason} (sent {attempt.raw!r})", detail={"action": attempt.action})


def test_every_step_is_one_batched_call_for_every_playing_env() -> None:
    agent = Scripted()
    result = lockstep(Count, agent, [5, 6, 7], steps_per_env=7)
    assert [n for n, _ in agent.calls] == [3] * 7
    assert agent.calls[0][1] == 5 * 7  # the first playing env's game seed and its steps so far
    for part in result.envs:
        assert (part.steps, part.illegal, part.games, part.rewards) == (7, 0, 2, [1.0, 1.0])
    assert result.total.steps == 21 and result.total.games == 6 and result.total.legal_rate == 1.0


def test_a_failure_stops_its_env_and_keeps_its_record() -> None:
    agent = Scripted(own={"seed 6 n 1"}, bad={"seed 7 n 0"})
    result = lockstep(Count, agent, [5, 6, 7], steps_per_env=4)
    assert [n for n, _ in agent.calls] == [3, 2, 1, 1]  # 7 fails at once, 6 on its second step
    first, second = result.total.failures  # in the order they happened
    assert first == Failure("env", "say [+] (sent ('-',))",
                            detail={"env_seed": 7, "step": 0, "player": 0, "board": "seed 7 n 0", "action": "[-]"})
    assert second.kind == "mine" and second.detail["board"] == "seed 6 n 1" and second.detail["step"] == 1
    assert [(p.steps, p.illegal) for p in result.envs] == [(4, 0), (2, 1), (1, 1)]
    assert result.total.legal_rate == 1 - 2 / 7 and result.total.reasons == {"say [+]": 1}


def test_keep_going_moves_a_failed_env_to_its_next_game() -> None:
    agent = Scripted(bad={"seed 5 n 0"})
    result = lockstep(Count, agent, [5], steps_per_env=5, stop_at_failure=False)
    [part] = result.envs
    # Game 0 fails at once; game 1 (another seed) is won in three steps, game 2 has begun.
    assert (part.steps, part.illegal, part.games) == (5, 1, 1)
    assert [f.detail["env_seed"] for f in part.failures] == [5] and agent.calls[1][1] == game_seed(5, 1) * 7 + 1


def test_a_game_cut_at_the_step_cap_is_not_a_finished_game() -> None:
    result = lockstep(Count, Scripted(), [0], steps_per_env=6, step_cap=2)
    assert result.total.games == 0 and result.total.rewards == [] and result.total.illegal == 0


class Coin:
    """A plain agent (no ``act_many``): "[+]", or "[-]" one time in five, drawn from a stream its
    ``reset`` seeds. It checks that it acts in the env it was bound to."""

    name = "coin"

    def reset(self, seed):
        self.rng = random.Random(seed)

    def bind(self, env):
        self.env = env

    def act(self, observation, feedback=None):
        assert observation.text.startswith(f"seed {self.env.seed} ")
        return "[-]" if self.rng.random() < 0.2 else "[+]"


register_env("lockstep-count", lambda config: Count())


def test_a_plain_agent_plays_as_the_runner_plays_it_one_env_at_a_time() -> None:
    assert not isinstance(Coin(), BatchedAgent) and isinstance(Coin(), Agent)
    seeds = list(range(8))
    # A Count game is three legal steps; an illegal one ends the episode, as it stops a lockstep env.
    report = run_rollouts("lockstep-count", Coin, seeds, RolloutConfig(workers=1, stop_on_illegal=True))
    played = lockstep(Count, Coin(), seeds, steps_per_env=3)
    # Its random stream is one per game (reset with the game's seed), not shared across the envs.
    assert [(p.steps, p.illegal, p.rewards) for p in played.envs] == [
        (e.extra["agent_steps"], e.illegal_steps, [e.rewards[0]] if e.rewards else []) for e in report.episodes]
    assert {p.illegal for p in played.envs} == {0, 1}  # some games won, some lost by a bad move
    assert played.total.legal_rate == report.legal_rate and played.total.reasons == dict(report.illegal_reasons)
    assert all(f.kind == "rejected_by_env" and f.detail["action"] == "[-]" and f.message == "say [+]"
               for f in played.total.failures)


class Pick:
    """A plain agent: a random one of ``actions`` per move, from a stream its ``reset`` seeds (some
    moves are illegal: a taken cell, a disk on a smaller one, a number out of range)."""

    name = "pick"

    def __init__(self, actions: list[str]) -> None:
        self.actions = actions

    def reset(self, seed):
        self.rng = random.Random(seed)

    def act(self, observation, feedback=None):
        return self.rng.choice(self.actions)


def by_episodes(game: str, agent: Pick, bases: list[int], steps_per_env: int, step_cap: int) -> list[PlayStats]:
    """What the lockstep mode measures (stop at the first failure, games auto-reset), played game
    by game through the runner's episode loop instead."""
    config = RolloutConfig(stop_on_illegal=True, keep_observations=False)
    out = []
    for base in bases:
        stats, env, k = PlayStats(), make(game), 0
        seats = {p: agent for p in range(env.num_players)}
        while stats.steps < steps_per_env:
            seed = game_seed(base, k)
            k += 1
            agent.reset(seed)
            r = play_episode(env, seats, agent, 0, seed=seed, config=config, self_play=True, max_steps=step_cap,
                             max_agent_steps=steps_per_env - stats.steps)
            stats.steps += r.agent_steps
            stats.illegal += r.agent_illegal
            if r.agent_illegal:
                break
            if r.summary.rewards:  # finished, not cut: the reward of the seat that moved last, in [0, 1]
                last = float(r.summary.rewards.get(r.steps[-1].player_id, 0.0))
                stats.games += 1
                stats.rewards.append((last + 1) / 2 if env.num_players > 1 else last)
        env.close()
        out.append(stats)
    return out


@pytest.mark.parametrize(("game", "actions", "cap", "finishes"), [
    ("TicTacToe-v0", [f"[{i}]" for i in range(9)], 20, True),  # 2 players: the last mover's reward
    ("TowerOfHanoi-v0", [f"[{a} {b}]" for a in "ABC" for b in "ABC" if a != b], 3, False),  # games cut at the cap
    ("GuessTheNumber-v0", [f"[{i}]" for i in range(1, 21)] + ["[50]"], 20, True),
])
def test_the_lockstep_mode_counts_what_the_episode_loop_counts(game: str, actions: list[str], cap: int, finishes: bool) -> None:
    pytest.importorskip("textarena")
    bases, steps = list(range(8)), 40
    played = lockstep(lambda: make(game), Pick(actions), bases, steps_per_env=steps, step_cap=cap)
    expected = by_episodes(game, Pick(actions), bases, steps, cap)
    assert [(p.steps, p.illegal, p.games, p.rewards) for p in played.envs] == [
        (e.steps, e.illegal, e.games, e.rewards) for e in expected]
    # Both kinds of step were compared, and finished games with their rewards where the game ends.
    assert sum(p.illegal for p in played.envs) > 0 and sum(p.steps for p in played.envs) > len(bases)
    assert (sum(p.games for p in played.envs) > 0) == finishes
