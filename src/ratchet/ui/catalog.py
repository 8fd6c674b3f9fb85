"""What runs the store holds and how far each has got: the rows of the Runs view and its live API.

Two sorts of run live under a store root: runs made through :class:`~ratchet.store.RunStore`
(``run.json``, indexed in ``index.sqlite``) and serving runs of ``ratchet serve`` (a directory with
``online/queue.sqlite``, no ``run.json``). Both become one :class:`RunRow`. Everything here reads
the index or a few small files per run, never a run's logs, so a poll stays cheap on big runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ratchet.online.status import QUEUE_NAME, STATUS_NAME, online_dir
from ratchet.store import RunStore, read_json


@dataclass
class RunRow:
    """One run as the dashboard lists it."""

    id: str
    kind: str
    name: str | None
    status: str
    created_at: float
    best_score: float | None = None
    budget_used: float | None = None  # fraction of the run's own budget spent, 0..1
    progress: str = ""
    fraction: float | None = None  # how far through its planned work, 0..1
    views: list[str] = field(default_factory=list)  # the view slugs that have something to show

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _fraction(done: float, total: float | None) -> float | None:
    return None if not total else max(0.0, min(1.0, done / total))


def _autoharness_progress(row: RunRow, counts: dict[str, Any], config: dict[str, Any]) -> None:
    budget = config.get("budget") or {}
    calls, tokens = counts["llm_calls"], counts["tokens"]
    used = [f for f in (_fraction(calls, budget.get("max_calls")), _fraction(tokens, budget.get("max_tokens"))) if f is not None]
    row.budget_used = max(used) if used else None
    row.fraction = row.budget_used if row.status == "running" else 1.0
    row.progress = f"{counts['candidates']} candidates · {calls}/{budget.get('max_calls', '?')} calls · {tokens:,} tokens"


def _play_progress(row: RunRow, counts: dict[str, Any], config: dict[str, Any]) -> None:
    planned = config.get("episodes")
    row.fraction = _fraction(counts["episodes"], planned)
    row.progress = f"{counts['episodes']}/{planned or '?'} episodes"


def _evolve_progress(row: RunRow, counts: dict[str, Any], config: dict[str, Any], run_dir: Path) -> None:
    planned = config.get("iterations")
    step = ((read_json(run_dir / "checkpoints" / "evolve.json") or {}).get("state") or {}).get("step", 0)
    row.fraction = _fraction(step, planned)
    row.budget_used = _fraction(counts["llm_calls"], (config.get("budget") or {}).get("max_calls"))
    row.progress = f"step {step}/{planned or '?'} · {counts['candidates']} candidates · {counts['llm_calls']} calls"


def store_row(store: RunStore, counts: dict[str, Any]) -> RunRow:
    """A store run's row from its :meth:`RunStore.list_runs` entry (plus its small run.json)."""
    run_dir = store.root / counts["id"]
    row = RunRow(counts["id"], counts["kind"], counts.get("name"), counts["status"], counts["created_at"],
                 best_score=counts.get("best_score"))
    config = (read_json(run_dir / "run.json") or {}).get("config") or {}
    if counts["kind"] == "autoharness":
        _autoharness_progress(row, counts, config)
    elif counts["kind"] == "play":
        _play_progress(row, counts, config)
    elif counts["kind"] == "evolve":
        _evolve_progress(row, counts, config, run_dir)
    else:
        row.progress = f"{counts['candidates']} candidates · {counts['episodes']} episodes · {counts['llm_calls']} calls"
    row.views = views_of(run_dir, counts)
    return row


def views_of(run_dir: Path, counts: dict[str, Any]) -> list[str]:
    """Which views have something to show for this run."""
    views = []
    engine = counts.get("kind") == "evolve" or (run_dir / "evolve").is_dir()
    # An AutoHarness run is an engine run: its tree and per-game report (the AutoHarness view) and
    # the engine's lineage, gate and report (the Evolution view) both apply. Another engine run's
    # candidates belong to the Evolution view only.
    if counts.get("kind") == "autoharness" or (not engine and (
            counts.get("candidates") or (run_dir / "checkpoints" / "autoharness.json").is_file())):
        views.append("autoharness")
    if engine:
        views.append("evolution")
    if counts.get("episodes") or (run_dir / "trajectories").is_dir():
        views.append("trajectories")
    if (online_dir(run_dir) / QUEUE_NAME).is_file():
        views.append("learning")
    return views


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True


def serving_row(run_dir: Path) -> RunRow:
    """A ``ratchet serve`` run's row, from its status.json and server.json."""
    base = online_dir(run_dir)
    status = read_json(base / STATUS_NAME) or {}
    try:
        server = json.loads((base / "server.json").read_text())
    except (OSError, ValueError):
        server = None
    running = server is not None and _alive(server.get("pid"))
    queue = status.get("queue") or {}
    row = RunRow(run_dir.name, "serve", None, "running" if running else "stopped", (base / QUEUE_NAME).stat().st_mtime,
                 best_score=status.get("reward_moving_average"), views=["learning"])
    row.progress = (f"serving v{status.get('current_version', 0)} · {queue.get('turns', 0)} turns · "
                    f"{queue.get('judged', 0)} judged · {queue.get('trained', 0)} trained")
    if (run_dir / "trajectories").is_dir():
        row.views.append("trajectories")
    return row


def serving_dirs(root: Path) -> list[Path]:
    """Serving runs: directories with a turn queue that are not store runs."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and (online_dir(p) / QUEUE_NAME).is_file()
                  and not (p / "run.json").exists())


def list_rows(store: RunStore, offset: int, limit: int) -> tuple[list[RunRow], int]:
    """One page of rows, newest first, and the number of runs in all."""
    total_store = int((store.index.query_one("SELECT COUNT(*) AS n FROM runs") or {"n": 0})["n"])
    serving = [serving_row(p) for p in serving_dirs(store.root)]
    # The newest offset + limit store runs are enough to fill this page whatever the serving runs' dates.
    store_rows = [store_row(store, c) for c in store.list_runs(limit=offset + limit)]
    rows = sorted(store_rows + serving, key=lambda r: (r.created_at, r.id), reverse=True)
    return rows[offset : offset + limit], total_store + len(serving)


def find_row(store: RunStore, run_id: str, run_path: Path) -> RunRow:
    """The row of one run (its directory already checked to be in the store)."""
    if (run_path / "run.json").is_file():
        for counts in store.list_runs(limit=1_000_000):
            if counts["id"] == run_id:
                return store_row(store, counts)
        store.open_run(run_id)  # a run directory the index has not seen yet: index it
        return find_row(store, run_id, run_path)
    return serving_row(run_path)
