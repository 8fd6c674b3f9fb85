"""The held-out protocol's exact behaviour with the scripted model, pinned: for each harness mode,
with a right and a wrong harness, the whole result (legal rates, rewards, the players' work) and
every request the players made. Recorded in ``data/protocol_regression.json``; regenerate only for
an intended change: ``RATCHET_RECORD=1 pytest tests/autoharness/test_protocol_regression.py``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from fakes import GOOD, FakeTicTacToe

from ratchet.envs.harness.protocol import ProtocolConfig, run_protocol
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.models import ScriptedModel

GOLDEN = Path(__file__).parent / "data" / "protocol_regression.json"
FIRST_CELL = '''def propose_action(board):
    return "[0]"

def is_legal_action(board, action):
    return action in ("[0]", "[4]")
'''
HARNESSES = {"good": GOOD, "first_cell": FIRST_CELL}


def numbered():
    count = iter(range(100_000))
    return lambda messages: f"I pick <move>[{(next(count) * 5) % 9}]</move>"


def run_case(mode: str, harness: str) -> dict:
    model = ScriptedModel(numbered())
    proto = ProtocolConfig(legal_seeds=2, legal_steps=12, reward_games=2, matches=3, step_cap=20, retries=2, filter_candidates=4)
    out = run_protocol(lambda: FakeTicTacToe(), model, "TicTacToe-v0", mode, InProcessHarness({"harness.py": HARNESSES[harness]}),
                       [5, 6], proto)
    for side in ("baseline", "harness"):
        out[side].pop("wall_s")
    out["calls"] = [hashlib.sha256(json.dumps(c, sort_keys=True, default=str).encode()).hexdigest()[:16] for c in model.calls]
    return json.loads(json.dumps(out))


CASES = [f"{mode}-{harness}" for mode in ("verifier", "filter", "policy") for harness in HARNESSES]


@pytest.mark.parametrize("case", CASES)
def test_protocol_plays_as_recorded(case):
    got = run_case(*case.split("-"))
    if os.environ.get("RATCHET_RECORD"):
        golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        golden[case] = got
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())[case]
    assert got["calls"] == want["calls"]
    assert got == want


def test_the_cases_exercise_the_players():
    golden = json.loads(GOLDEN.read_text())
    assert set(golden) == set(CASES)
    work = golden["verifier-first_cell"]["harness"]["work"]
    assert work["rejections"] > 0 and work["fallbacks"] > 0
    assert golden["policy-good"]["harness"]["legal"]["legal_rate"] == 1.0
    assert all(g["baseline"]["legal"]["steps"] > 0 for g in golden.values())


def test_the_protocols_players_are_agents():
    from ratchet.envs.harness.protocol import FilterAgent, PolicyAgent, VerifiedLLMAgent
    from ratchet.envs.measure import random_legal_opponent
    from ratchet.envs.agents import Agent

    harness = InProcessHarness({"harness.py": GOOD})
    model = ScriptedModel(numbered())
    players = [VerifiedLLMAgent(model, "TicTacToe-v0"), VerifiedLLMAgent(model, "TicTacToe-v0", harness=harness),
               FilterAgent(model, "TicTacToe-v0", harness), PolicyAgent(harness), random_legal_opponent(FakeTicTacToe())]
    obs = FakeTicTacToe().reset(0)
    for player in players:
        assert isinstance(player, Agent)
        player.reset(1)
        assert player.act(obs, None).startswith("[")


def test_the_runners_game_loop_cuts_games_as_the_protocol_asks():
    from ratchet.envs.harness.protocol import PolicyAgent
    from ratchet.envs.runner import RolloutConfig, play_episode

    agent = PolicyAgent(InProcessHarness({"harness.py": GOOD}))
    env, cfg = FakeTicTacToe(), RolloutConfig(keep_observations=False)
    whole = play_episode(env, {0: agent, 1: agent}, agent, 0, seed=3, config=cfg, self_play=True)
    assert whole.summary.rewards and whole.agent_steps == len(whole.steps) >= 5  # self-play: every step is the agent's
    cut = play_episode(env, {0: agent, 1: agent}, agent, 0, seed=3, config=cfg, self_play=True, max_steps=3)
    assert len(cut.steps) == 3 and cut.summary.rewards == {}
    budget = play_episode(env, {0: agent, 1: agent}, agent, 1, seed=3, config=cfg, max_agent_steps=2)
    assert budget.agent_steps == 2 and len(budget.steps) == 4 and budget.summary.rewards == {}  # seat 1 moves second
