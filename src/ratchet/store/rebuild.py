"""Rebuild a run's index rows from its files, the source of truth.

Used after a crash between a file write and its index row, after copying run directories between
machines, or when index.sqlite was lost. Runs in one transaction: readers see the old rows or the
new ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ratchet.contracts import Evaluation
from ratchet.store import files

if TYPE_CHECKING:
    from ratchet.store.index import Index
    from ratchet.store.run import Run

_TABLES = ("candidates", "evaluations", "episodes", "llm_calls", "sessions")
#: The numbered suffix a rotated trajectory segment carries (see ``writers.TrajectoryWriter``).
_SEGMENT = re.compile(r"\.[0-9]{5}$")


def forget_rows(index: Index, run_id: str) -> None:
    """Drop every index row of ``run_id``. A run created under an id whose directory was deleted
    by hand would otherwise inherit that run's candidates, and the engine would look for files
    that are gone (measured: a search restarted under its old id stopped at its first step)."""
    with index.transaction() as conn:
        for table in _TABLES:
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))


def reindex_run(run: Run) -> None:
    meta = files.read_json(run.dir / "run.json")
    state = run.status()
    with run.index.transaction() as conn:
        for table in _TABLES:
            conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run.id,))
        conn.execute(
            "INSERT OR REPLACE INTO runs (id, kind, name, status, created_at, updated_at, config_json, summary_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.id, meta["kind"], meta.get("name"), state["status"], meta["created_at"],
                state.get("updated_at", meta["created_at"]), json.dumps(meta.get("config") or {}),
                json.dumps(state.get("summary") or {}),
            ),
        )
        for meta_path in sorted((run.dir / "candidates").glob("*/meta.json")):
            run._index_candidate(meta_path.parent.name, conn)
        for path in sorted((run.dir / "candidates").glob("*/evaluations/*.json")):
            record = files.read_json(path)
            eval_id = record.pop("id")
            evaluation = Evaluation.from_record(record)
            run._index_evaluation(eval_id, evaluation, str(path.relative_to(run.dir)), conn)
        for summary in run.episodes():
            run._index_episode(summary, summary.get("recorded_at") or 0.0, conn)
        for call in files.iter_jsonl(run.dir / "llm_calls.jsonl"):
            run._index_llm_call(call, conn)
        for path in sorted((run.dir / "trajectories").glob("*.jsonl")):
            name = trajectory_name(path)
            for record in files.iter_jsonl(path):
                if record.get("session_id") is not None:
                    at = float(record.get("written_at") or 0.0)
                    run._index_session(str(record["session_id"]), name, at, conn)


def trajectory_name(path: Path) -> str:
    """The trajectory a file belongs to: ``chat`` for ``chat.jsonl`` and for its rotated segments
    ``chat.00001.jsonl`` …, so sessions in closed segments are indexed under their trajectory."""
    return _SEGMENT.sub("", path.stem)
