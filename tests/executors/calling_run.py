"""An engine run whose evaluations call the model (the ``slow_suite:CallingSuite``), shared by the
cluster tests and the driver they kill (``ray_driver.py``). The scripted model's replies depend on
the request only; ``paid_log`` gets a line for every call it answers, so a reply paid twice shows."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from ratchet.evolve.cache import EVALS, REPLIES
from ratchet.evolve.config import EvolveConfig
from ratchet.evolve.loop import EVENTS
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


def content(summary: dict[str, Any], run: Any) -> dict[str, Any]:
    """What an engine run decided and kept, without clocks: its evaluations, steps, candidates and
    report, and the work this process counted."""
    evals = sorted((r["candidate"], r["task_id"], r["seed"], r["score"]) for r in run.read_jsonl(EVALS))
    steps = [{k: v for k, v in e.items() if k not in ("at",)} for e in run.read_jsonl(EVENTS) if e["kind"] == "step"]
    return {"evals": evals, "steps": steps, "candidates": sorted((c["id"], c["status"], c["score"]) for c in run.candidates()),
            "report": summary["report"]["comparison"], "task_evals": summary["task_evals"],
            "model_calls": summary["model_calls"]}


def replies(run: Any) -> list[tuple]:
    """The run's journaled replies: (unit, call number, request key, text), sorted."""
    return sorted((r.get("unit") or "", r.get("index", -1), r["key"], r["text"]) for r in run.read_jsonl(REPLIES))


class MarkerKiller(threading.Thread):
    """SIGKILLs the first process that leaves a marker in ``folder`` (a CallingSuite evaluation, right
    after its model call returned: its reply is journaled, its result not yet sent)."""

    def __init__(self, folder: Path, deadline_s: float = 120.0) -> None:
        super().__init__(daemon=True)
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.killed: int | None = None
        self.deadline = time.monotonic() + deadline_s

    def run(self) -> None:
        while self.killed is None and time.monotonic() < self.deadline:
            for marker in self.folder.iterdir():
                try:
                    os.kill(int(marker.name), signal.SIGKILL)
                except ProcessLookupError:
                    continue
                self.killed = int(marker.name)
                return
            time.sleep(0.01)
