"""``ratchet.api``: the one-call library functions are what the commands run, with typed results."""

from __future__ import annotations

from pathlib import Path

import pytest

from ratchet import api
from ratchet.autoharness.config import AutoHarnessConfig
from ratchet.config import ConfigError
from ratchet.contracts import RatchetError
from ratchet.store import RunStore

QUICK = ["eval_steps=5", "search_seeds=[0]", "heldout_seeds=[9]"]


def test_synthesize_harness_makes_a_run_and_returns_its_report(tmp_path: Path) -> None:
    result = api.synthesize_harness("TicTacToe-v0", model="scripted:", method="faithful", iterations=1,
                                    overrides=[*QUICK, f"library_dir={tmp_path / 'lib'}"], protocol="none",
                                    store=tmp_path / "runs")
    assert result.report["env"] == "TicTacToe-v0" and result.report["run_id"] == result.run_id
    [row] = RunStore(tmp_path / "runs").list_runs(kind="autoharness")
    assert row["id"] == result.run_id and row["status"] == "done" and result.run_dir.is_dir()


def test_a_config_object_takes_the_keyword_fields_and_refuses_overrides(tmp_path: Path) -> None:
    cfg = AutoHarnessConfig.model_validate({"library_dir": str(tmp_path / "lib"), "search_seeds": [0], "heldout_seeds": [9],
                                            "eval_steps": 5})
    result = api.synthesize_harness(config=cfg, model="scripted:", method="faithful", max_calls=1, iterations=1,
                                    protocol="none", store=tmp_path / "runs")
    saved = RunStore(tmp_path / "runs").open_run(result.run_id).config
    assert saved["model"] == "scripted:" and saved["budget"]["max_calls"] == 1 and saved["iterations"] == 1
    with pytest.raises(RatchetError, match="config object"):
        api.synthesize_harness(config=cfg, overrides=["iterations=2"], store=tmp_path / "runs")


def test_protocol_presets() -> None:
    assert api.protocol_config("none") is None
    assert api.protocol_config("quick", ["matches=2"]).matches == 2
    with pytest.raises(ConfigError, match="unknown protocol"):
        api.protocol_config("huge")
