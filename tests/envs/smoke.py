"""Make, reset and step one game with random text; check the illegal-move signal (used by tests)."""

from __future__ import annotations

import time
from typing import Any

from ratchet.contracts import Observation
from ratchet.envs import EnvConfig, make
from ratchet.envs.agents import RandomTextAgent
from ratchet.envs.hints import HINT_LABEL, STATIC_MAX_ITEMS, hint_items

INVALID = "[zzz-not-a-move]"


def smoke(env_id: str, seed: int = 0, steps: int = 6) -> dict[str, Any]:
    """Up to ``steps`` random-text actions, then (if none was flagged) one clearly invalid action."""
    start = time.perf_counter()
    env = make(env_id, EnvConfig(max_steps=50))
    flagged: list[str] = []
    errors: list[str] = []
    leftover_hints: list[str] = []
    try:
        obs = env.reset(seed)
        assert isinstance(obs, Observation) and obs.text, "reset gave no observation text"
        assert env.game_description().strip(), "no rules text"
        agent = RandomTextAgent(seed)
        taken = 0
        while taken < steps + 1:
            # Only short static action-format lines of the rules prompt (the text before the first
            # "[GAME] …" / "[Player …] …" message) may keep a hint label.
            rules = obs.text.split("\n\n[", 1)[0]
            leftover_hints += [
                line for line in obs.text.splitlines()
                if HINT_LABEL.search(line) and (line not in rules or len(hint_items(line)) > STATIC_MAX_ITEMS)
            ]
            action = agent.act(obs) if taken < steps else INVALID
            if taken == steps and flagged:
                break
            result = env.step(action)
            taken += 1
            if "env_error" in result.info:
                errors.append(result.illegal_reason or "")
            if not result.legal and not result.info.get("env_error"):
                flagged.append(result.illegal_reason or "")
            if result.done:
                if taken <= steps and not flagged:
                    obs = env.reset(seed + taken)
                    continue
                break
            obs = result.observation
    finally:
        env.close()
    return {
        "id": env_id,
        "flagged": flagged,
        "errors": errors,
        "leftover_hints": leftover_hints,
        "steps": taken,
        "s": time.perf_counter() - start,
    }
