"""Games whose TextArena object cannot be reset twice still run episode after episode in one env."""

from __future__ import annotations

import pytest

from ratchet.envs.registry import make
from ratchet.envs.textarena_env import FRESH_GAME_ON_RESET


@pytest.mark.timeout(120)
@pytest.mark.parametrize("env_id", sorted(f"{game}-v0" for game in FRESH_GAME_ON_RESET))
def test_repeated_resets_work_and_stay_seeded(env_id):
    reused = make(env_id)
    try:
        for seed in (0, 1, 2):
            reused.reset(seed)
        third = reused.reset(3).text
    finally:
        reused.close()
    fresh = make(env_id)
    try:
        assert fresh.reset(3).text == third  # a rebuilt game is the same game for the same seed
    finally:
        fresh.close()
