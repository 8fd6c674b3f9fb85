"""The search's exact behaviour with the scripted model, pinned: every request it makes (messages and
generation parameters) and the tree it reaches, for the faithful method and for the ratchet method
with its ideas in several combinations. Recorded once in ``data/search_regression.json``; a change
that alters a single prompt, a sampling seed or a Thompson draw fails here. Regenerate only for an
intended behaviour change: ``RATCHET_RECORD=1 pytest tests/autoharness/test_search_regression.py``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from fakes import CRASHING, GOOD, RULES, FakeTicTacToe, MemoryRun, fenced

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.models import ScriptedModel

GOLDEN = Path(__file__).parent / "data" / "search_regression.json"

# Deterministic wrong harnesses (no module-level randomness, so the order of tests cannot matter).
FIRST_CELL = '''def propose_action(board):
    return "[0]"

def is_legal_action(board, action):
    return True
'''
FREE = "def legal_moves(cells):\n    return ['[' + c + ']' for c in cells if c not in ('X', 'O')]\n"
TAKEN = "def legal_moves(cells):\n    return [c for c in cells if c in ('X', 'O')]\n"
FIXED = "def legal_moves(cells):\n    return ['[0]', '[2]']\n"
BAD_PARSER = "def parse_board(observation):\n    return parse_grid(current_board(observation))\n"
BAD_RULE = "def legal_moves(state):\n    return ['[' + str(i) + ']' for i in range(9)]\n"


class BoardTicTacToe(FakeTicTacToe):
    """With the ground truth decomposition checks against."""

    def board_state(self):
        return [[self.cells[3 * r + c] for c in range(3)] for r in range(3)]


def reply(body: str) -> str:
    return "```python\n" + body + "```"


V = "# v@\n"  # each reply numbered, so refinements are distinct candidates and the tree grows

# The scenarios recorded before the novelty, repair and no-body components keep them off; the last ones have them on.
PREVIOUS = {"induce": False, "novelty": False, "repair": False, "short_examples": False, "body_prefix": False, "whole_fallback": False}
NO_BODY = 'def legal_moves(cells):\n    """Return every legal action for the player to move."""\n'  # a copied docstring
SCENARIOS = {
    "faithful": dict(method="faithful", replies=[fenced(FIRST_CELL + V), fenced(CRASHING), "no code here", fenced(FIRST_CELL + V)]),
    "faithful_solves": dict(method="faithful", replies=[fenced(CRASHING + V), fenced(FIRST_CELL + V)] * 2 + [fenced(GOOD)]),
    "ratchet": dict(method="ratchet", replies=[reply(FIXED + V), reply(TAKEN + V), reply(FIXED), "nothing"], ideas={"samples_per_step": 3, **PREVIOUS}),
    "ratchet_library": dict(method="ratchet", replies=[reply(TAKEN + V), reply(FIXED + V)] * 4 + [reply(FREE)], ideas={"samples_per_step": 2, **PREVIOUS},
                            library=[{"env": "TicTacToe-v0", "code": FIRST_CELL}]),
    "ratchet_reliability": dict(method="ratchet", replies=[reply(FIXED + V), reply(TAKEN + V), reply(TAKEN)],
                                ideas={"samples_per_step": 1, "fresh_roots": True, "explain_failures": True, "grammar": True, **PREVIOUS}),
    "ratchet_no_scaffold": dict(method="ratchet", replies=[fenced(FIRST_CELL + V), fenced(CRASHING + V)],
                                ideas={"samples_per_step": 2, "scaffold": False, "few_shot": True, "transitions": False, **PREVIOUS}),
    "ratchet_decompose": dict(method="ratchet", replies=[reply(BAD_PARSER + V), reply(BAD_RULE + V), reply(BAD_PARSER)],
                              ideas={"samples_per_step": 1, "decompose": True, "library_seed": False, **PREVIOUS}, env=BoardTicTacToe),
    "ratchet_novelty_repair": dict(method="ratchet", replies=[reply(FIXED + V), reply(FIXED), "nothing", reply(TAKEN + V), reply(FIXED)],
                                   ideas={"samples_per_step": 2, "restarts": True, "induce": False}),
    "ratchet_whole_fallback": dict(method="ratchet", replies=[reply(NO_BODY), reply(NO_BODY), fenced(FIRST_CELL + V), fenced(CRASHING + V), reply(FREE)],
                                   ideas={"samples_per_step": 2, "induce": False}),
}


def numbered(replies: list[str]):
    count = iter(range(10_000))

    def respond(messages):
        n = next(count)
        return replies[n % len(replies)].replace("@", str(n))

    return respond


def run_scenario(name: str) -> dict:
    spec = SCENARIOS[name]
    cfg = AutoHarnessConfig(method=spec["method"], eval_envs=3, eval_steps=20, iterations=5, search_seeds=[0, 1, 2],
                            heldout_seeds=[100, 101], transitions_per_seed=20, rng_seed=3, ideas=spec.get("ideas", {}))
    env = spec.get("env", FakeTicTacToe)
    model, run = ScriptedModel(numbered(spec["replies"])), MemoryRun()
    result = Synthesis(cfg, model, run, lambda: env(), InProcessHarness, hint_env_factory=lambda: env(hints=True),
                       description=RULES.format(p=0), library_seeds=spec.get("library", ())).run_search()
    calls = [hashlib.sha256(json.dumps(c, sort_keys=True, default=str).encode()).hexdigest()[:16] for c in model.calls]
    return {
        "calls": calls,
        "tree": run.ckpt["autoharness"]["tree"],
        "history": result.history,
        "stop_reason": result.stop_reason,
        "best_h": result.best_h,
        "statuses": {cid: list(st) for cid, st in sorted(run.status.items())},
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_search_makes_the_recorded_calls_and_reaches_the_recorded_tree(name):
    got = json.loads(json.dumps(run_scenario(name)))
    if os.environ.get("RATCHET_RECORD"):
        golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
        golden[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())[name]
    assert got["calls"] == want["calls"]
    assert got["tree"] == want["tree"]
    assert got == want


def test_the_scenarios_exercise_the_search():
    """A pinned run that stops at once would pin nothing: each scenario refines, and they differ."""
    golden = json.loads(GOLDEN.read_text())
    assert set(golden) == set(SCENARIOS)
    assert all(len(g["calls"]) >= 2 and len(g["tree"]) >= 2 for g in golden.values())
    assert golden["faithful_solves"]["best_h"] == 1.0
    assert len({tuple(g["calls"]) for g in golden.values()}) == len(golden)
