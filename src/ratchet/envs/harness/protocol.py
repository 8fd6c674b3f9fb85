"""The paper's evaluation protocol: the model with a synthesized harness against the same model
with no harness, on held-out seeds never used during the search.

* Legal-action rate: ``legal_seeds`` seeds × ``legal_steps`` agent steps each (the paper: 10 × 1,000),
  games auto-reset; 2-player games are self-play (the agent plays both seats). Env-rejected
  actions count as illegal; moves the env calls invalid but that merely lose (a Minesweeper mine)
  are counted separately as ``losing_not_illegal``.
* 1-player reward: mean reward over ``reward_games`` games (the paper: 20).
* 2-player: ``matches`` matches (the paper: 40) against a fixed opponent, seats alternated;
  reward = win rate (draw = 0.5).

Verifier mode at play time: the LLM proposes with the paper's playing prompt; the harness's
``is_legal_action`` checks; a rejection re-prompts with the reason up to ``retries`` times, after
which the harness's own ``propose_action`` supplies the move (counted as a fallback). Filter mode:
``propose_action`` is sampled ``filter_candidates`` times, the legal distinct ones are listed and
the LLM picks one. Policy mode: ``propose_action`` alone, no LLM.

:func:`play_protocol` runs it for a run (its games recorded there, the result ``protocol.json``),
:func:`protocol_sides` flattens the result's two sides; :func:`code_heldout` is the harness alone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from ratchet.envs.harness.player import HarnessPlayer
from ratchet.envs.harness.runtime import HarnessRuntime, RuntimeFactory
from ratchet.sandbox.errors import feedback_of
from ratchet.envs.harness.transitions import score_is_legal
from ratchet.envs.explore import harvest
from ratchet.config import Settings
from ratchet.contracts import Environment, Model, Observation
from ratchet.envs.agents import LLMAgent
from ratchet.envs.recording import EpisodeRecorder
from ratchet.envs.registry import env_factory_for
from ratchet.envs.measure import PlayStats, game_seed, lockstep, random_legal_opponent, reward, selfplay_legal_rate


class ProtocolConfig(Settings):
    """Sizes of the final evaluation (defaults: the paper's protocol)."""

    legal_seeds: int = 10
    """Held-out seeds for the legal-action rate."""
    legal_steps: int = 1000
    """Agent steps per seed for the legal-action rate (games auto-reset)."""
    reward_games: int = 20
    """1-player games for the mean reward."""
    matches: int = 40
    """2-player matches (seats alternated) for the win rate."""
    step_cap: int = 200
    """Most steps of one game before it is cut (counted as reward 0 / a draw)."""
    retries: int = 3
    """Verifier mode: re-prompts after a harness rejection before falling back to propose_action."""
    filter_candidates: int = 8
    """Filter mode: propose_action samples collected per move."""
    play_max_tokens: int = 256
    """Most tokens of one playing answer (the paper's think-then-move prompt)."""


class _CountedWork:
    """What the protocol's agents share: ``info`` counts their work over every game they play
    (model calls and tokens, harness rejections, fallbacks to ``propose_action``, harness errors);
    ``last_info`` is the last move's, as every agent's. ``reset`` keeps both the counters and the
    agent's own seeding: the protocol reports the work of the whole measurement."""

    name = "agent"

    def __init__(self) -> None:
        self.info: dict[str, int] = {"calls": 0, "tokens": 0, "rejections": 0, "fallbacks": 0, "harness_errors": 0}
        self.last_info: dict[str, Any] = {}

    def reset(self, seed: int) -> None:
        """Nothing to forget between games (see the class docstring)."""

    def _count_model(self, info: dict[str, Any]) -> None:
        self.info["calls"] += int(info.get("model_calls", 0))
        self.info["tokens"] += int(info.get("prompt_tokens", 0)) + int(info.get("completion_tokens", 0))


class VerifiedLLMAgent(_CountedWork):
    """The baseline: the paper's playing prompt (:class:`LLMAgent`), optionally verified by a harness."""

    def __init__(self, model: Model, game: str, *, harness: HarnessRuntime | None = None, retries: int = 3,
                 max_tokens: int = 256, seed: int = 0) -> None:
        super().__init__()
        self.name = "llm+verifier" if harness else "llm"
        self.harness = harness
        self.agent = LLMAgent(model, game=game, max_tokens=max_tokens, seed=seed,
                              verifier=self._verify if harness else None, verifier_retries=retries)

    def _verify(self, board: str, action: str) -> tuple[bool, str]:
        assert self.harness is not None
        try:
            ok = bool(self.harness.call("is_legal_action", board, action))
        except Exception as exc:  # a broken check must not stop play: count it and let the move through
            self.info["harness_errors"] += 1
            return True, feedback_of(exc)
        if not ok:
            self.info["rejections"] += 1
        return ok, "the move is not legal in the current position"

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        action = self.agent.act(observation, feedback)
        info = self.last_info = self.agent.last_info
        self._count_model(info)
        if self.harness is not None and info.get("verifier_rejections") and len(info["verifier_rejections"]) >= self.agent.verifier_retries:
            ok, _ = self._verify(observation.text, action)
            if not ok:
                try:
                    action = str(self.harness.call("propose_action", observation.text, seed=self.info["calls"]))
                    self.info["fallbacks"] += 1
                except Exception:
                    self.info["harness_errors"] += 1
        return action


class FilterAgent(_CountedWork):
    """Code proposes legal candidates, the LLM chooses among them."""

    name = "llm+filter"

    def __init__(self, model: Model, game: str, harness: HarnessRuntime, candidates: int = 8, max_tokens: int = 256) -> None:
        super().__init__()
        self.harness = harness
        self.k = candidates
        self.agent = LLMAgent(model, game=game, max_tokens=max_tokens)
        self.step = 0

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        self.step += 1
        self.last_info = {}
        found = self.harness.call_many("propose_action", [(observation.text,)] * self.k, seed=self.step * 1000)
        moves = list(dict.fromkeys(str(v) for s, v in found if s == "ok"))
        checks = self.harness.call_many("is_legal_action", [(observation.text, m) for m in moves], seed=0)
        legal = [m for m, (s, v) in zip(moves, checks) if s == "ok" and v]
        if not legal:
            self.info["harness_errors"] += 1
            legal = moves
        if len(legal) == 1:
            return legal[0]
        text = observation.text + "\n\nLegal moves (choose exactly one): " + ", ".join(legal)
        action = self.agent.act(Observation(observation.player_id, text))
        self.last_info = self.agent.last_info
        self._count_model(self.last_info)
        if action not in legal:
            self.info["fallbacks"] += 1
            action = legal[0] if legal else action
        return action


class PolicyAgent(_CountedWork):
    """The harness alone (no LLM)."""

    name = "harness-policy"

    def __init__(self, harness: HarnessRuntime) -> None:
        super().__init__()
        self.harness = harness
        self.step = 0

    def act(self, observation: Observation, feedback: str | None = None) -> str:
        self.step += 1
        try:
            return str(self.harness.call("propose_action", observation.text, seed=self.step))
        except Exception:
            self.info["harness_errors"] += 1
            return "[?]"


def merged(parts: list[PlayStats]) -> PlayStats:
    """One :class:`PlayStats` over the games of ``parts`` (counts summed, lists joined)."""
    total = PlayStats()
    for part in parts:
        total.steps += part.steps
        total.illegal += part.illegal
        total.losing_not_illegal += part.losing_not_illegal
        total.games += part.games
        total.rewards.extend(part.rewards)
        total.failures.extend(part.failures)
        total.cut = total.cut or part.cut
        for reason, count in part.reasons.items():
            total.reasons[reason] = total.reasons.get(reason, 0) + count
    return total


def run_protocol(
    env_factory: Callable[[], Environment],
    model: Model,
    game: str,
    mode: str,
    harness: HarnessRuntime | None,
    heldout_seeds: list[int],
    config: ProtocolConfig | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure the model with and without the harness on held-out seeds; plain data result."""
    cfg = config or ProtocolConfig()
    note = on_phase or (lambda phase: None)
    probe_env = env_factory()
    players_n = getattr(probe_env, "num_players", 1)
    probe_env.close()
    seeds = list(heldout_seeds)
    legal_seeds = seeds[: cfg.legal_seeds]
    reward_seeds = [game_seed(s, 10_000 + i) for i, s in enumerate((seeds * (cfg.reward_games // max(1, len(seeds)) + 1)))]
    reward_seeds = reward_seeds[: (cfg.reward_games if players_n == 1 else cfg.matches)]

    def make_player(with_harness: bool) -> VerifiedLLMAgent | FilterAgent | PolicyAgent:
        if not with_harness:
            return VerifiedLLMAgent(model, game, max_tokens=cfg.play_max_tokens)
        assert harness is not None
        if mode == "policy":
            return PolicyAgent(harness)
        if mode == "filter":
            return FilterAgent(model, game, harness, cfg.filter_candidates, cfg.play_max_tokens)
        return VerifiedLLMAgent(model, game, harness=harness, retries=cfg.retries, max_tokens=cfg.play_max_tokens)

    out: dict[str, Any] = {"env": game, "mode": mode, "players": players_n, "heldout_seeds": seeds, "protocol": cfg.model_dump()}
    opponent = random_legal_opponent if players_n > 1 else None
    for label, with_harness in (("baseline", False), ("harness", True)):
        if with_harness and harness is None:
            continue
        player = make_player(with_harness)
        t0 = time.perf_counter()
        note(f"{label}: legal rate")
        # Seed by seed (the same games as one call over all seeds: each seed's games are seeded by
        # the seed alone), so the adoption verdict can pair the two sides' rates seed for seed.
        per_seed = [selfplay_legal_rate(env_factory, player, [seed], cfg.legal_steps, cfg.step_cap) for seed in legal_seeds]
        legal = merged(per_seed)
        note(f"{label}: reward")
        rew = reward(env_factory, player, opponent, reward_seeds, cfg.step_cap) if reward_seeds else PlayStats()
        out[label] = {"player": player.name,
                      "legal": {**legal.to_dict(), "per_seed": [s.legal_rate for s in per_seed]},
                      "reward": {**rew.to_dict(), "per_game": list(rew.rewards)}, "work": dict(player.info),
                      "wall_s": time.perf_counter() - t0}
    return out


def code_heldout(
    code: str,
    env_factory: Callable[[], Environment],
    runtime_factory: Callable[[dict[str, str]], HarnessRuntime],
    seeds: list[int],
    steps: int,
    step_cap: int = 200,
    transitions_per_seed: int = 40,
    hint_env_factory: Callable[[], Environment] | None = None,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """The harness alone on held-out seeds, no LLM: the legal rate of its own play
    (propose → check → step, every failure counted, games auto-reset) and the accuracy of its
    ``is_legal_action`` on labelled transitions harvested from the same held-out seeds. Play stops
    after ``max_seconds`` (``cut_after_s`` then says so; the rate is over the steps taken)."""
    started = time.monotonic()
    with runtime_factory({"harness.py": code}) as runtime:
        stats = lockstep(env_factory, HarnessPlayer(runtime), seeds, steps, step_cap, stop_at_failure=False,
                         deadline=None if max_seconds is None else started + max_seconds).total
        transitions = harvest(env_factory, hint_env_factory, seeds, transitions_per_seed, random.Random(12345))
        unit = score_is_legal(runtime, transitions) if transitions else None
    return {
        "legal_rate": stats.legal_rate, "steps": stats.steps, "failures": len(stats.failures),
        "verifier_accuracy": unit.accuracy if unit else None, "transitions": unit.total if unit else 0,
        "false_accepts": len(unit.false_accepts) if unit else 0, "false_rejects": len(unit.false_rejects) if unit else 0,
        "failure_examples": [{"kind": f.kind, "action": f.detail.get("action"), "feedback": f.message} for f in stats.failures[:3]],
        **({"cut_after_s": round(time.monotonic() - started, 1)} if stats.cut else {}),
    }


def play_protocol(run: Any, code: str, play_model: Model, game: str, mode: str, seeds: list[int],
                  protocol: ProtocolConfig, runtime_factory: RuntimeFactory, *,
                  env_factory: Callable[[], Any] | None = None,
                  on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The held-out protocol (``play_model`` with and without ``code`` on ``seeds``), kept in the run
    as ``protocol.json``; its games are written into the run as they are played (the Trajectories
    view), each labelled with the phase that played it ("baseline: legal rate", "harness: reward")."""
    recorder = EpisodeRecorder(run, env_factory or env_factory_for(game), label="heldout")

    def phase(name: str) -> None:
        recorder.label = "heldout-" + name.replace(":", "").replace(" ", "-")
        if on_phase is not None:
            on_phase(name)

    with runtime_factory({"harness.py": code}) as runtime:
        evaluation = run_protocol(recorder, play_model, game, mode, runtime, seeds, protocol, on_phase=phase)
    run.write_json("protocol.json", evaluation)
    return evaluation


def protocol_sides(evaluation: dict[str, Any] | None) -> dict[str, Any]:
    """The report's ``before``/``after``/``protocol`` fields from a :func:`run_protocol` result."""

    def side(label: str) -> dict[str, Any] | None:
        if not evaluation or label not in evaluation:
            return None
        part = evaluation[label]
        return {
            "legal_rate": part["legal"]["legal_rate"], "legal_steps": part["legal"]["steps"],
            "losing_not_illegal": part["legal"]["losing_not_illegal"], "reward": part["reward"]["mean_reward"],
            "reward_games": part["reward"]["games"], "play_calls": part["work"]["calls"],
            "rejections": part["work"].get("rejections", 0), "fallbacks": part["work"].get("fallbacks", 0),
            "illegal_reasons": part["legal"]["illegal_reasons"],
            # Per seed / per game, in the protocol's order: the adoption verdict pairs the two sides on them.
            "legal_per_seed": part["legal"].get("per_seed"), "reward_per_game": part["reward"].get("per_game"),
        }

    return {"before": side("baseline"), "after": side("harness"), "protocol": (evaluation or {}).get("protocol")}
