"""The induce idea on the engine, on real offline games with the scripted model: rules fitted to the
listed states solve a game before any model call, and without the idea the same run asks the model.
(The proposer itself, Connect Four's refit on the moves the game rejected and a game no rule fits:
tests/evolve/test_rules_proposer.py.)"""

from __future__ import annotations

import pytest

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.engine import game_description, run_on_engine
from ratchet.envs.harness.runtime import InProcessHarness
from ratchet.evolve.archive import Archive
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

pytest.importorskip("textarena")

NO_BODY = "```python\ndef legal_moves(cells):\n    return []\n```"


def _synthesize(tmp_path, env_id: str, **ideas):
    cfg = AutoHarnessConfig(env=env_id, model="scripted:", method="ratchet", iterations=1, eval_steps=30,
                            search_seeds=list(range(12)), heldout_seeds=[100], library_dir=str(tmp_path / "lib"),
                            ideas={"samples_per_step": 1, "library_seed": False, "repair": False, **ideas})
    cfg.budget.max_calls = 1
    run = RunStore(tmp_path).create_run("autoharness", cfg.model_dump(), f"induce-{env_id}")
    model = ScriptedModel([NO_BODY], cycle=True)
    summary = run_on_engine(cfg, model, run, description=game_description(env_id),
                            extra={"harness_runtime": InProcessHarness})
    best = Archive(run).get(summary["report"]["best"]["id"])
    return summary, best, Archive(run).score(best.id, "heldin"), model


@pytest.mark.parametrize("env_id", ["TicTacToe-v0", "LightsOut-v0", "GuessTheNumber-v0", "TowerOfHanoi-v0"])
def test_a_fitted_rule_solves_the_game_before_any_model_call(tmp_path, env_id):
    summary, best, h, model = _synthesize(tmp_path, env_id)
    assert (h, best.meta.get("proposer")) == (1.0, "induced_rules")
    assert summary["model_calls"] == 0 and model.calls == [] and summary["state"] == "done"  # stop at h = 1.0


def test_without_it_the_same_run_asks_the_model(tmp_path):
    summary, best, h, model = _synthesize(tmp_path, "TicTacToe-v0", induce=False)
    assert summary["model_calls"] == 1 == len(model.calls) and h < 1.0
