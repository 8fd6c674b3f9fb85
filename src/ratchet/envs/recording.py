"""An environment that writes every game played through it into a run, step by step.

Measurements that drive an environment themselves (the held-out protocol's legal-rate and reward
games) do not go through the rollout runner, so nothing of their games would reach the run store
and the dashboard's Trajectories view. Wrapping the environment factory records those games where
they are played, without the measuring code knowing: each ``reset`` opens an episode, each
``step`` appends one line to ``episodes/<id>.jsonl``, and the next ``reset`` or ``close`` adds the
episode's summary to ``episodes.jsonl`` (and the index).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ratchet.contracts import Environment, EpisodeSummary, Observation, StepRecord, StepResult


class EpisodeRecorder:
    """Makes recording environments over ``make_env`` for ``run``. ``label`` (the player or phase
    being measured; change it between phases) becomes each episode's ``agent`` and id prefix."""

    def __init__(self, run: Any, make_env: Callable[[], Environment], label: str = "play") -> None:
        self.run, self.make_env, self.label = run, make_env, label
        self._count = 0

    def __call__(self) -> RecordingEnvironment:
        return RecordingEnvironment(self.make_env(), self)

    def next_id(self, seed: int) -> str:
        self._count += 1
        return f"{self.label}-{self._count:04d}-seed{seed}"


class RecordingEnvironment:
    """One environment whose games are written to the recorder's run (see the module docstring)."""

    def __init__(self, env: Environment, recorder: EpisodeRecorder) -> None:
        self.env, self.recorder = env, recorder
        self.env_id, self.num_players = env.env_id, env.num_players
        self._episode: dict[str, Any] | None = None
        self._last: Observation | None = None

    def reset(self, seed: int) -> Observation:
        self._finish()
        observation = self.env.reset(seed)
        self._episode = {"id": self.recorder.next_id(seed), "seed": seed, "agent": self.recorder.label, "steps": 0,
                         "illegal": 0, "rewards": {}, "ended_by_illegal": False, "started": time.perf_counter()}
        self._last = observation
        return observation

    def step(self, action: str) -> StepResult:
        t0 = time.perf_counter()
        result = self.env.step(action)
        episode, seen = self._episode, self._last
        if episode is not None:
            rewards = result.rewards or {}
            self.recorder.run.write_step(StepRecord(
                episode_id=episode["id"], index=episode["steps"], player_id=seen.player_id if seen else 0,
                observation=seen.text if seen else "", action=action, legal=result.legal,
                illegal_reason=result.illegal_reason, reward=None, latency_s=time.perf_counter() - t0))
            episode["steps"] += 1
            episode["illegal"] += 0 if result.legal else 1
            episode["ended_by_illegal"] = episode["ended_by_illegal"] or result.ended_by_illegal
            episode["rewards"].update({int(k): float(v) for k, v in rewards.items()})
            if result.done:
                self._finish()
        self._last = result.observation
        return result

    def _finish(self) -> None:
        episode, self._episode = self._episode, None
        if episode is None or not episode["steps"]:
            return
        self.recorder.run.add_episode(EpisodeSummary(
            episode_id=episode["id"], env_id=self.env_id, seed=episode["seed"], agent=episode["agent"],
            steps=episode["steps"], illegal_steps=episode["illegal"], rewards=episode["rewards"],
            ended_by_illegal=episode["ended_by_illegal"], wall_s=time.perf_counter() - episode["started"]))

    def close(self) -> None:
        self._finish()
        self.env.close()

    def __getattr__(self, name: str) -> Any:
        # Anything else the measuring code reads of a game (its legal-move hints, its rules text)
        # comes from the wrapped environment unchanged.
        return getattr(self.env, name)
