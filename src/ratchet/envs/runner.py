"""The rollout runner: N episodes in worker processes, per-step records, summary metrics.

This module is the one game loop: episodes (:func:`play_episode`, batched over workers by
:func:`run_rollouts`). Its lockstep mode (one agent's self-play in many environments at once, as
the AutoHarness legality judge measures a harness) lives in :mod:`ratchet.envs.lockstep` and judges
a step by this module's :func:`judge_step` and counts legal rate by :func:`legal_rate`, so a step
counts the same whichever mode played it.

Workers build their own environment and agents from picklable factories and send back plain
records; only this (parent) process writes to the run store, so workers never touch it. Which
steps count: only the evaluated agent's steps enter the legal-action rate; a "losing invalid" move
(see :mod:`ratchet.envs.notes`) is counted as lost, not illegal. Two-player games alternate seats
(episode i: the agent sits in seat ``i % 2``) against the configured opponent.
"""

from __future__ import annotations

import pickle
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import Field

from ratchet.config import Settings
from ratchet.contracts import EpisodeSummary, Executor, StepRecord, StepResult
from ratchet.envs.agents import Agent, AgentSpec, RandomLegalAgent
from ratchet.envs.config import EnvConfig
from ratchet.executors.local import LocalExecutor, Progress, default_workers
from ratchet.stats import bootstrap_mean_ci, wilson

AgentFactory = Callable[[], Agent]


class RolloutConfig(Settings):
    """How a batch of episodes is played."""

    workers: int = 0
    """Worker processes; 0 = auto: one per core for code/scripted agents, 1 (in this process) for
    local LLM agents (loading a model per process on a small machine is wasteful)."""

    env: EnvConfig = Field(default_factory=EnvConfig)
    """Settings of every environment instance (step cap, hint stripping, observation shape…)."""

    opponent: str = "random-legal"
    """Two-player games: "random-legal", "random" (random text), "self" (the agent plays both
    seats) or an agent spec; ignored when an opponent factory is passed."""

    alternate_seats: bool = True
    """Episode i puts the agent in seat i % 2 (the paper's protocol); off: always seat 0."""

    retry_illegal: bool = False
    """After an illegal move, give the agent the env's reason as feedback for its next attempt."""

    stop_on_illegal: bool = False
    """End an episode at the agent's first illegal move (as the lockstep mode,
    :func:`ratchet.envs.lockstep.play_lockstep`, does for the AutoHarness search)."""

    keep_observations: bool = True
    """Store each step's observation text in the step records (turn off for huge runs)."""


@dataclass
class EpisodeResult:
    """What a worker sends back for one episode (plain data only)."""

    summary: EpisodeSummary
    steps: list[StepRecord]
    agent_steps: int
    agent_illegal: int
    agent_losing_invalid: int
    agent_reward: float
    opponent_reward: float | None
    reasons: list[str]
    tokens: int
    agent_s: float
    env_s: float


class StepVerdict(NamedTuple):
    """How one of the agent's steps counts, by the one rule both modes of the game loop use
    (:func:`play_episode` and :func:`ratchet.envs.lockstep.play_lockstep`). A named tuple: one is made per step of every
    episode, and a frozen dataclass cost a tenth of a trivial environment's step."""

    illegal: bool
    """The environment refused the move. A "losing invalid" move is not illegal: the game is lost."""
    losing: bool
    ended: bool
    """The game is over (done, or no next observation)."""
    reason: str | None
    """Why the move was illegal ("(no reason given)" when the environment said nothing); None if legal."""


_LEGAL = StepVerdict(False, False, False, None)
_LEGAL_LAST = StepVerdict(False, False, True, None)


def judge_step(result: StepResult) -> StepVerdict:
    """The verdict on one step's result (see :class:`StepVerdict`)."""
    if result.legal and not result.losing_not_illegal:  # most steps: a shared verdict, none made
        return _LEGAL_LAST if result.done or result.observation is None else _LEGAL
    illegal = not result.legal and not result.losing_not_illegal
    return StepVerdict(illegal, result.losing_not_illegal, result.done or result.observation is None,
                       (result.illegal_reason or "(no reason given)") if illegal else None)


def legal_rate(steps: int, illegal: int) -> float | None:
    """The one definition of legal rate: the share of the agent's own attempted steps that the
    environment accepted, ``1 - illegal / steps``. A step whose action could not even be produced
    (a harness that crashed, a proposal its own check rejected) counts as an illegal attempt.

    With no steps there is no evidence either way, so the rate is ``None``, not 1.0 or 0.0: a
    report shows it as missing, and a search scoring candidates says explicitly what no evidence
    is worth (AutoHarness: nothing).
    """
    return 1.0 - illegal / steps if steps else None


@dataclass
class RolloutReport:
    """Summary of a batch of episodes."""

    env_id: str
    agent: str
    legal_rate: float | None
    """See :func:`legal_rate`; ``None`` when the agent took no step."""
    legal_ci: tuple[float, float]
    illegal_reasons: Counter
    losing_invalid: int
    mean_reward: float
    reward_ci: tuple[float, float]
    win_rate: float
    win_ci: tuple[float, float]
    episodes: list[EpisodeSummary]
    steps: int
    agent_steps: int
    wall_s: float
    agent_s: float
    env_s: float
    tokens: int
    workers: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "agent": self.agent,
            "episodes": len(self.episodes),
            "legal_rate": self.legal_rate,
            "legal_ci": list(self.legal_ci),
            "illegal_reasons": dict(self.illegal_reasons.most_common()),
            "losing_invalid": self.losing_invalid,
            "mean_reward": self.mean_reward,
            "reward_ci": list(self.reward_ci),
            "win_rate": self.win_rate,
            "win_ci": list(self.win_ci),
            "steps": self.steps,
            "agent_steps": self.agent_steps,
            "wall_s": self.wall_s,
            "agent_s": self.agent_s,
            "env_s": self.env_s,
            "tokens": self.tokens,
            "workers": self.workers,
            **self.extra,
        }


# ------------------------------------------------------------------------------------ workers

_CACHE: dict[str, Any] = {}
_NO_INFO: dict[str, Any] = {}


def _key(obj: Any) -> bytes:
    """Identity of a factory: its pickle (equal specs share a cache slot), else its id."""
    try:
        return pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - an unpicklable factory can only run in this process anyway
        return f"id:{id(obj)}".encode()


def _cached(kind: str, key: bytes, build: Callable[[], Any]) -> Any:
    """One env / agent per worker process, reused across its episodes (a reset is enough)."""
    slot = _CACHE.get(kind)
    if slot is None or slot[0] != key:
        if slot is not None and hasattr(slot[1], "close") and kind == "env":
            slot[1].close()
        slot = (key, build())
        _CACHE[kind] = slot
    return slot[1]


def _release() -> None:
    for kind, (_, obj) in list(_CACHE.items()):
        if kind == "env" and hasattr(obj, "close"):
            obj.close()
    _CACHE.clear()


@dataclass(frozen=True)
class _Job:
    env_id: str
    seed: int
    index: int
    agent_seat: int
    agent_factory: AgentFactory
    opponent_factory: AgentFactory | None
    self_play: bool
    config: RolloutConfig
    keys: tuple[bytes, bytes, bytes] = (b"", b"", b"")
    """Cache keys of (env, agent, opponent), computed once per batch instead of once per episode."""


def _job_keys(env_id: str, cfg: RolloutConfig, agent: AgentFactory, opponent: AgentFactory | None) -> tuple[bytes, bytes, bytes]:
    return _key((env_id, cfg.env.model_dump())), _key(agent), _key(opponent)


def _play(job: _Job) -> EpisodeResult:
    from ratchet.envs.registry import make

    cfg = job.config
    env_key, agent_key, opponent_key = job.keys if job.keys[0] else _job_keys(job.env_id, cfg, job.agent_factory,
                                                                                job.opponent_factory)
    env = _cached("env", env_key, lambda: make(job.env_id, cfg.env))
    agent: Agent = _cached("agent", agent_key, job.agent_factory)
    agent_seat = job.agent_seat % env.num_players  # one-player games: always seat 0
    seats: dict[int, Agent] = {agent_seat: agent}
    if env.num_players > 1:
        if job.self_play:
            opponent = agent
        else:
            factory = job.opponent_factory or (lambda: RandomLegalAgent(seed=job.seed))
            opponent = _cached("opponent", opponent_key, factory)
        for seat in range(env.num_players):
            seats.setdefault(seat, opponent)
    for player in set(map(id, seats.values())):
        a = next(x for x in seats.values() if id(x) == player)
        a.reset(job.seed)
        if hasattr(a, "bind"):
            a.bind(env)

    return play_episode(env, seats, agent, agent_seat, seed=job.seed, config=cfg, env_id=job.env_id,
                        episode_id=f"{job.env_id}-{job.index:04d}-s{job.seed}", self_play=job.self_play)


def play_episode(env: Any, seats: dict[int, Agent], agent: Agent, agent_seat: int, *, seed: int, config: RolloutConfig,
                 env_id: str = "", episode_id: str = "", self_play: bool = False, max_steps: int | None = None,
                 max_agent_steps: int | None = None) -> EpisodeResult:
    """The one game loop: one episode of ``env`` from ``reset(seed)``, ``seats`` acting in turn, in
    this process. The evaluated ``agent`` sits in ``agent_seat`` (with ``self_play`` in every seat
    it holds); only its steps count. Agents are used as given (reset and bound by the caller).
    ``max_steps`` cuts the game after that many steps of all seats, ``max_agent_steps`` after that
    many of the agent's (a legal rate measured over a fixed number of steps); a cut game has no
    rewards."""
    cfg = config
    env_id = env_id or getattr(env, "env_id", "")
    start = time.perf_counter()
    obs = env.reset(seed)
    steps: list[StepRecord] = []
    feedback: dict[int, str | None] = {}
    counts = {"steps": 0, "illegal": 0, "losing": 0, "tokens": 0}
    reasons: list[str] = []
    agent_s = env_s = 0.0
    rewards: dict[int, float] = {}
    ended_by_illegal = False
    while True:
        player = obs.player_id
        actor = seats.get(player, agent)
        is_agent = player == agent_seat or (self_play and actor is agent)
        t0 = time.perf_counter()
        action = actor.act(obs, feedback.get(player) if cfg.retry_illegal else None)
        t1 = time.perf_counter()
        result = env.step(action)
        t2 = time.perf_counter()
        info = getattr(actor, "last_info", None) or _NO_INFO  # read only: no copy
        tokens = int(info.get("prompt_tokens", 0)) + int(info.get("completion_tokens", 0)) if info else 0
        verdict = judge_step(result)
        illegal = verdict.illegal
        if is_agent:
            agent_s += t1 - t0
            counts["steps"] += 1
            counts["tokens"] += tokens
            counts["illegal"] += int(illegal)
            counts["losing"] += int(verdict.losing)
            if verdict.reason is not None:
                reasons.append(verdict.reason)
        env_s += t2 - t1
        feedback[player] = None if result.legal else result.illegal_reason
        extra: dict[str, Any] = {"seat": "agent" if is_agent else "opponent", "env_s": t2 - t1}
        if result.losing_not_illegal:
            extra["losing_not_illegal"] = True
        if tokens:
            extra["tokens"] = tokens
        if info:
            if "raw" in info:
                extra["raw"] = info["raw"]
            if info.get("verifier_rejections"):
                extra["verifier_rejections"] = info["verifier_rejections"]
        step_info = result.info
        if "truncated" in step_info:
            extra["truncated"] = step_info["truncated"]
        if "env_error" in step_info:
            extra["env_error"] = step_info["env_error"]
        if "verdict" in step_info:  # a task suite's verifier: what it said, for whoever grades the episode
            extra["verdict"] = step_info["verdict"]
        steps.append(
            StepRecord(
                episode_id=episode_id,
                index=len(steps),
                player_id=player,
                observation=obs.text if cfg.keep_observations else "",
                action=action,
                legal=result.legal,
                illegal_reason=result.illegal_reason,
                reward=None if result.rewards is None else result.rewards.get(player),
                latency_s=t1 - t0,
                extra=extra,
            )
        )
        if verdict.ended or (cfg.stop_on_illegal and is_agent and illegal):
            rewards = result.rewards or {}
            ended_by_illegal = result.ended_by_illegal or (cfg.stop_on_illegal and is_agent and illegal)
            break
        if (max_steps is not None and len(steps) >= max_steps) or (max_agent_steps is not None and counts["steps"] >= max_agent_steps):
            break
        obs = result.observation
    wall = time.perf_counter() - start
    agent_reward = float(rewards.get(agent_seat, 0.0))
    others = [v for k, v in rewards.items() if k != agent_seat]
    summary = EpisodeSummary(
        episode_id=episode_id,
        env_id=env_id,
        seed=seed,
        agent=getattr(agent, "name", type(agent).__name__),
        steps=len(steps),
        illegal_steps=counts["illegal"],
        rewards={int(k): float(v) for k, v in rewards.items()},
        ended_by_illegal=ended_by_illegal,
        wall_s=wall,
        extra={
            "agent_seat": agent_seat,
            "agent_steps": counts["steps"],
            "losing_invalid": counts["losing"],
            "tokens": counts["tokens"],
            "truncated": bool(steps and steps[-1].extra.get("truncated")),
        },
    )
    return EpisodeResult(
        summary=summary,
        steps=steps,
        agent_steps=counts["steps"],
        agent_illegal=counts["illegal"],
        agent_losing_invalid=counts["losing"],
        agent_reward=agent_reward,
        opponent_reward=max(others) if others else None,
        reasons=reasons,
        tokens=counts["tokens"],
        agent_s=agent_s,
        env_s=env_s,
    )


def _win(result: EpisodeResult) -> float:
    """1 for a win, 0.5 for a draw, 0 for a loss; one-player: 1 when the reward reaches 1 (solved)."""
    if result.opponent_reward is None:
        return 1.0 if result.agent_reward >= 1.0 else 0.0
    if result.agent_reward > result.opponent_reward:
        return 1.0
    return 0.5 if result.agent_reward == result.opponent_reward else 0.0


def auto_workers(agent_factory: AgentFactory, episodes: int, opponent_factory: AgentFactory | None = None) -> int:
    """One per core, but 1 (in this process) when a local model plays either seat."""
    if any(isinstance(f, AgentSpec) and f.is_local_llm for f in (agent_factory, opponent_factory)):
        return 1
    return max(1, min(default_workers(), episodes))


def run_rollouts(
    env_id: str,
    agent_factory: AgentFactory,
    seeds: list[int],
    config: RolloutConfig | None = None,
    run: Any = None,
    opponent_factory: AgentFactory | None = None,
    progress: Progress | None = None,
    executor: Executor | None = None,
) -> RolloutReport:
    """Play one episode per seed and summarise. ``run`` (a store Run) receives every step record
    and episode summary as episodes finish; ``progress(done, total)`` is called per episode.

    ``executor``: a caller-owned (warm) executor to reuse across calls, e.g. one per search, or a
    Ray executor (each episode one task); it is not closed here and its own worker count wins over
    ``config.workers``. Episodes come back here and are written here, whichever ran them."""
    cfg = config or RolloutConfig()
    self_play = opponent_factory is None and cfg.opponent == "self"
    if opponent_factory is None and cfg.opponent not in ("self", "random-legal"):
        opponent_factory = AgentSpec(cfg.opponent, game=env_id)
    workers = executor.workers if executor else (cfg.workers or auto_workers(agent_factory, len(seeds), opponent_factory))
    keys = _job_keys(env_id, cfg, agent_factory, opponent_factory)
    jobs = [
        _Job(
            env_id=env_id,
            seed=seed,
            index=i,
            agent_seat=(i % 2) if cfg.alternate_seats else 0,
            agent_factory=agent_factory,
            opponent_factory=opponent_factory,
            self_play=self_play,
            config=cfg,
            keys=keys,
        )
        for i, seed in enumerate(seeds)
    ]
    start = time.perf_counter()
    results: list[EpisodeResult] = []
    owned = executor is None
    pool = executor or LocalExecutor(workers)
    pool.progress, saved_progress = progress, pool.progress
    try:
        for result in pool.map(_play, jobs):
            results.append(result)
            if run is not None:
                # A finished episode's steps are all known: one write and one fsync for them, not
                # one per step (the driver writes every episode, so this is its cost per result).
                with run.step_writer(result.summary.episode_id) as writer:
                    writer.write_many(result.steps)
                run.add_episode(result.summary)
    finally:
        pool.progress = saved_progress
        if owned:
            pool.close()
    wall = time.perf_counter() - start
    if workers <= 1:  # episodes ran in this process: do not keep their env/agents alive
        _release()
    agent_steps = sum(r.agent_steps for r in results)
    illegal = sum(r.agent_illegal for r in results)
    reasons = Counter(reason for r in results for reason in r.reasons)
    rewards = [r.agent_reward for r in results]
    wins = [_win(r) for r in results]
    legal = agent_steps - illegal
    return RolloutReport(
        env_id=env_id,
        agent=results[0].summary.agent if results else "",
        legal_rate=legal_rate(agent_steps, illegal),
        legal_ci=wilson(legal, agent_steps),
        illegal_reasons=reasons,
        losing_invalid=sum(r.agent_losing_invalid for r in results),
        mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
        reward_ci=bootstrap_mean_ci(rewards),
        win_rate=sum(wins) / len(wins) if wins else 0.0,
        win_ci=wilson(sum(wins), len(wins)),
        episodes=[r.summary for r in results],
        steps=sum(len(r.steps) for r in results),
        agent_steps=agent_steps,
        wall_s=wall,
        agent_s=sum(r.agent_s for r in results),
        env_s=sum(r.env_s for r in results),
        tokens=sum(r.tokens for r in results),
        workers=workers,
    )
