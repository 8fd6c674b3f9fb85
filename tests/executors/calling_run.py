"""An engine run whose evaluations call the model (the ``slow_suite:CallingSuite``), shared by the
cluster tests and the driver they kill (``ray_driver.py``). The scripted model's replies depend on
the request only; ``paid_log`` gets a line for every call it answers, so a reply paid twice shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ratchet.evolve.config import EvolveConfig
from ratchet.models import ScriptedModel


def workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "manifest.yaml").write_text("name: noisy\neditable: ['harness.json']\nfeatures: [length]\n")
    (ws / "harness.json").write_text(json.dumps({"default": 0.1}) + "\n")
    return ws


def config(ws: Path, markers: Path | None = None, iterations: int = 2) -> EvolveConfig:
    options = {"tasks": 10, "pause_s": 0.1, "marker_dir": str(markers) if markers else None}
    return EvolveConfig.model_validate({
        "workspace": str(ws), "suite": {"name": "slow_suite:CallingSuite", "options": options},
        "splits": {"search": 0.2, "heldin": 0.4, "heldout": 0.2, "test": 0.2},
        "selector": {"name": "greedy"}, "proposers": [{"name": "doubles:ModelProposer"}],
        "iterations": iterations, "seeds": [0, 1], "static": {"load_entry": False}, "canaries": {"enabled": False},
    })


def model(paid_log: Path | None = None) -> ScriptedModel:
    def respond(messages: Any) -> str:
        # Deterministic, and different for each request: proposals depend on what was accepted.
        if paid_log is not None:
            with paid_log.open("a") as f:
                f.write(messages[-1]["content"][:60] + "\n")
        return str(0.5 + (sum(map(ord, messages[-1]["content"])) % 50) / 100)

    return ScriptedModel(respond)
