"""A run whose evaluations call a model pins that model's name: a resume with other weights (a
``local:NAME@current`` that moved to another version) is refused, since the cached results and the
journaled replies came from the weights it started with."""

from __future__ import annotations

from pathlib import Path

import pytest
from doubles import config, make_workspace

from ratchet.evolve.context import EngineContext
from ratchet.evolve.evaluation import PINS
from ratchet.evolve.loop import Engine
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.evolve.workspace import PinMismatch
from ratchet.models import ScriptedModel
from ratchet.store import RunStore


class ModelCallingSuite(NoisySuite):
    """The synthetic suite, keeping the engine's context as a suite that calls the model does."""

    def __init__(self, options: NoisyOptions, ctx: EngineContext | None = None) -> None:
        super().__init__(options, ctx)
        self.ctx = ctx


def test_a_resume_with_another_weight_version_is_refused(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.3)
    cfg = config(ws, options={"gain": 0.5}, iterations=1,
                 suite={"name": f"{__name__}:ModelCallingSuite", "options": {"tasks": 24}})
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    v3 = "local:smollm2-135m@v3+1a2b3c4d5e6f"
    Engine(cfg, run, ScriptedModel([], name=v3)).execute()
    assert run.read_json(PINS)["model"] == v3
    longer = cfg.model_copy(update={"iterations": 2})
    with pytest.raises(PinMismatch, match=r"the model its evaluations call changed \(local:smollm2-135m@v3\+1a2b3c4d5e6f -> "
                                          r"local:smollm2-135m@v4\+") as err:
        Engine(longer, run, ScriptedModel([], name="local:smollm2-135m@v4+ffffffffffff")).execute()
    assert f"name {v3} to resume" in str(err.value)
    # The same weights resume (the control).
    summary = Engine(longer, run, ScriptedModel([], name=v3)).execute()
    assert summary["state"] == "done"


def test_a_suite_that_calls_no_model_pins_none(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, p=0.3)
    cfg = config(ws, options={"gain": 0.5}, iterations=1)
    run = RunStore(tmp_path / "runs").create_run("evolve", cfg)
    Engine(cfg, run, ScriptedModel([], name="a")).execute()
    assert "model" not in run.read_json(PINS)
    # Its results do not depend on the model: another one resumes it.
    longer = cfg.model_copy(update={"iterations": 2})
    assert Engine(longer, run, ScriptedModel([], name="b")).execute()["state"] == "done"
