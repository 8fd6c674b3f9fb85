"""What the AutoHarness benches read from a synthesis run, shared by them (a support module:
``python -m bench`` does not run it, and no bench imports another)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def row(report: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The table's fields from one synthesis report (and its run's record of calls)."""
    search = report["search"]
    alone = report.get("harness_alone") or {}
    calls_to_h1, solved_by = first_solved(run_dir)
    return {"best_h": search["best_h"], "calls": search["llm_calls"], "calls_to_h1": calls_to_h1, "solved_by": solved_by,
            "tokens": search.get("tokens"), "wall_s": report["wall_s"], "stop": search["stop_reason"],
            "heldout_legal_rate": alone.get("legal_rate"), "heldout_verifier_accuracy": alone.get("verifier_accuracy"),
            "run": report["run_id"]}


def _engine_writer(run_dir: Path, event: dict) -> str | None:
    """The step's proposer, ``+ repair`` when the refiner's step proposed a sample it repaired
    without the model (``repaired`` in the child's proposal: ``evolve.proposers.repair``)."""
    import json

    meta = run_dir / "candidates" / str(event.get("child")) / "meta.json"
    repaired = meta.exists() and (json.loads(meta.read_text()).get("meta", {}).get("proposal") or {}).get("repaired")
    return f"{event.get('proposer')} + repair" if repaired else event.get("proposer")


def first_solved(run_dir: Path) -> tuple[int | None, str | None]:
    """The model calls spent when a harness first reached h = 1.0, and what wrote it (None, None:
    never): the calls of the engine's steps up to the first whose accepted best is 1.0, and that
    step's proposer."""
    import json

    calls = 0
    for line in (run_dir / "evolve" / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "step":
            calls += event.get("model_calls") or 0
            if (event.get("best") or 0.0) >= 1.0:
                return calls, _engine_writer(run_dir, event)
    return None, None
