"""The induce idea on real offline games with the scripted model: rules fitted to the listed
states solve a game before any model call, the rejected moves of a first fit teach the next one,
and a fit that never reaches h = 1.0 leaves the tree to the model."""

from __future__ import annotations

import pytest

from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.envs import env_factory_for
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

NO_BODY = "```python\ndef legal_moves(cells):\n    return []\n```"


def _search(tmp_path, env_id: str, **ideas):
    cfg = AutoHarnessConfig(env=env_id, method="ratchet", iterations=1,
                            ideas={"samples_per_step": 1, "library_seed": False, "repair": False, **ideas})
    cfg.budget.max_calls = 1
    stripped, hinted = env_factory_for(env_id), env_factory_for(env_id, hints=True)
    run = RunStore(tmp_path).create_run("autoharness", cfg.model_dump(), f"induce-{env_id}")
    return Synthesis(cfg, ScriptedModel([NO_BODY]), run, stripped, InProcessHarness, hint_env_factory=hinted,
                     description=stripped().reset(0).text)


@pytest.mark.parametrize("env_id", ["TicTacToe-v0", "LightsOut-v0", "GuessTheNumber-v0", "TowerOfHanoi-v0"])
def test_a_fitted_rule_solves_the_game_before_any_model_call(tmp_path, env_id):
    result = _search(tmp_path, env_id).run_search()
    assert (result.best_h, result.calls) == (1.0, 0)
    assert [h["status"] for h in result.history] == ["library"]


def test_without_it_the_same_search_asks_the_model(tmp_path):
    result = _search(tmp_path, "TicTacToe-v0", induce=False).run_search()
    assert result.calls == 1 and result.best_h < 1.0


def test_moves_the_game_rejects_teach_the_next_fit(tmp_path):
    # Connect Four's harvest never fills a column, so the first fit is "every column is legal";
    # the rollouts' rejected drops into full columns are what make a later fit read the top cells.
    search = _search(tmp_path, "ConnectFour-v0")
    result = search.run_search()
    fits = [h for h in result.history if h["status"] == "library"]
    assert len(fits) >= 2 and fits[0]["h"] < 1.0 and fits[-1]["h"] == 1.0
    assert (result.best_h, result.calls) == (1.0, 0)
    assert len(search.tree) == 1  # the fits below 1.0 are stored, not nodes a model would refine


def test_a_game_no_rule_fits_is_left_to_the_model(tmp_path):
    # Chopsticks' legality depends on whose hands are whose and on sums: no shape of envs.rules tells it.
    result = _search(tmp_path, "Chopsticks-v0").run_search()
    assert result.calls == 1
    assert all(h["status"] != "library" for h in result.history)
