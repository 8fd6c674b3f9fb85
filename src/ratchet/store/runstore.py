"""The store: a root directory of runs plus the SQLite index they share."""

from __future__ import annotations

import errno
import json
import re
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.store import files
from ratchet.store.config import StoreConfig
from ratchet.store.index import Index
from ratchet.store.rebuild import forget_rows
from ratchet.processes import ProcessRecord
from ratchet.store.run import TOTALS_SQL, Run, _totals, safe_name, seen_status

INDEX_FILE = "index.sqlite"

_LIST_SQL = """
SELECT r.id, r.kind, r.name, r.status, r.created_at, r.updated_at,
    (SELECT COUNT(*) FROM candidates c WHERE c.run_id = r.id) AS candidates,
    (SELECT MAX(score) FROM candidates c WHERE c.run_id = r.id) AS best_candidate_score,
    (SELECT MAX(score) FROM evaluations e WHERE e.run_id = r.id) AS best_evaluation_score,
    (SELECT COUNT(*) FROM evaluations e WHERE e.run_id = r.id) AS evaluations,
    (SELECT COUNT(*) FROM episodes p WHERE p.run_id = r.id) AS episodes,
    (SELECT COUNT(*) FROM llm_calls l WHERE l.run_id = r.id) AS llm_calls,
    (SELECT COALESCE(SUM(prompt_tokens + completion_tokens), 0) FROM llm_calls l WHERE l.run_id = r.id) AS tokens,
    (SELECT COALESCE(SUM(cost_usd), 0.0) FROM llm_calls l WHERE l.run_id = r.id) AS cost_usd
FROM runs r
"""


def new_run_id(kind: str, now: float | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<kind>-<4 hex>`` in UTC: sorts by creation time, reads at a glance."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    slug = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "run"
    return f"{stamp}-{slug}-{secrets.token_hex(2)}"


def _plain_config(config: Any) -> dict[str, Any]:
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    if not isinstance(config, dict):
        raise RatchetError(f"a run's config must be a mapping, not {type(config).__name__}")
    # A JSON round trip, so a new run's config is exactly what open_run will read back later.
    return json.loads(json.dumps(config, default=files.json_default))


class StoreUnavailable(RatchetError):
    """The run store's directory cannot be made or written (no permission, a read-only or
    virtual file system, a file in the way). The command line exits 3 on it, as on a full disk."""


_WHY = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
    errno.EEXIST: "a file of that name is in the way",
    errno.ENOSPC: "the disk is full",
}


def _why(root: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:  # mkdir -p found no way down: say where it stopped
        above = next((p for p in root.parents if p.is_dir()), None)
        return f"no directory can be made under {above}" if above is not None else "no directory can be made there"
    return _WHY.get(exc.errno or 0, exc.strerror or str(exc))


def _unavailable(root: Path, why: str) -> StoreUnavailable:
    return StoreUnavailable(f"cannot use {root} as the run store: {why}",
                            hint="pass --store DIR (or set RATCHET_RUNS) naming a directory you can write")


class RunStore:
    """Runs under ``root`` (default: :class:`StoreConfig` — ``$RATCHET_RUNS`` or ``./runs``).

    Picklable and cheap: processes may each create their own on the same root.
    """

    def __init__(self, root: str | Path | None = None, *, busy_timeout_s: float | None = None) -> None:
        defaults = StoreConfig()
        # Absolute, so a Run pickled into a worker with another working directory still points here.
        self.root = (Path(root) if root is not None else defaults.root).absolute()
        # Every command opens its store here, so this is the one place where a store that cannot
        # be written becomes a one-line error instead of a traceback from deep inside sqlite.
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _unavailable(self.root, _why(self.root, exc)) from None
        if not self.root.is_dir():
            raise _unavailable(self.root, _WHY[errno.ENOTDIR])
        try:
            self.index = Index(self.root / INDEX_FILE, busy_timeout_s or defaults.busy_timeout_s)
        except OSError as exc:
            raise _unavailable(self.root, _why(self.root, exc)) from None
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise  # another process holds the index: not a property of the directory
            raise _unavailable(self.root, f"its index cannot be opened ({exc})") from None

    @classmethod
    def from_config(cls, config: StoreConfig) -> RunStore:
        return cls(config.root, busy_timeout_s=config.busy_timeout_s)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # -- runs ------------------------------------------------------------------------------

    def create_run(self, kind: str, config: Any, name: str | None = None, run_id: str | None = None) -> Run:
        """Make a new run directory, write run.json and status ``running``, and index it."""
        config = _plain_config(config)
        now = time.time()
        while True:
            candidate_id = safe_name(run_id, "run id") if run_id is not None else new_run_id(kind, now)
            try:
                # mkdir is the claim: two processes can never create the same run.
                (self.root / candidate_id).mkdir()
                break
            except FileExistsError:
                if run_id is not None:
                    raise RatchetError(
                        f"run {run_id} already exists in {self.root}", hint="resume it with RunStore.open_run"
                    ) from None
        # The directory is new, so any index rows under its id are a deleted run's: not this one's.
        forget_rows(self.index, candidate_id)
        record = {"id": candidate_id, "kind": kind, "name": name, "created_at": now, "config": config}
        run = Run(self.root, self.index, record)
        files.write_json_atomic(run.dir / "status.json", {"status": "running", "summary": {}, "updated_at": now,
                                                          "owner": ProcessRecord.current().to_json()})
        files.write_json_atomic(run.dir / "run.json", record)  # last: its presence means the run exists
        self._index_run(record, "running", {}, now)
        return run

    def _index_run(self, record: dict[str, Any], status: str, summary: dict[str, Any], updated_at: float) -> None:
        self.index.execute(
            "INSERT OR IGNORE INTO runs (id, kind, name, status, created_at, updated_at, config_json, summary_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record["id"], record["kind"], record.get("name"), status, record["created_at"], updated_at,
                json.dumps(record.get("config") or {}), json.dumps(summary),
            ),
        )

    def open_run(self, run_id: str) -> Run:
        """The run with this id (or unique id prefix), for resuming or reading."""
        run_id = self.resolve(run_id)
        record = files.read_json(self.root / run_id / "run.json")
        run = Run(self.root, self.index, record)
        if self.index.query_one("SELECT 1 FROM runs WHERE id = ?", (run_id,)) is None:
            # A run directory copied in from elsewhere, or one whose row was lost, gets indexed.
            state = run.status()
            self._index_run(record, state["status"], state.get("summary") or {}, state.get("updated_at", record["created_at"]))
        # Temp files of writers that were killed mid-write are garbage now (their pid is gone).
        files.sweep_temp_files(run.dir)
        return run

    def resolve(self, run_id: str) -> str:
        """The full id for ``run_id`` or a unique prefix of one; RatchetError otherwise."""
        if run_id and "/" not in run_id and (self.root / run_id / "run.json").is_file():
            return run_id
        if "/" in run_id:  # a path: glob() cannot take it, and a prefix match across folders means nothing
            where = Path(run_id)
            raise RatchetError(f"{run_id!r} is a path, not a run id of {self.root}",
                               hint=f"name the run by its id with its store: --store {where.parent} {where.name}")
        matches = sorted(p.parent.name for p in self.root.glob(f"{glob_escape(run_id)}*/run.json")) if run_id else []
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RatchetError(
                f"no run {run_id!r} in {self.root}", hint=f"list the runs with: ratchet runs list --root {self.root}"
            )
        raise RatchetError(f"{run_id!r} matches {len(matches)} runs: {', '.join(matches[:5])}", hint="give more of the id")

    def run_ids(self) -> list[str]:
        """Ids of every run directory on disk, oldest first (the index may lag behind)."""
        return sorted(p.parent.name for p in self.root.glob("*/run.json"))

    def list_runs(self, kind: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Newest runs first, with counts: candidates, evaluations, episodes, llm_calls, tokens,
        cost_usd, and ``best_score`` (best candidate score, else best evaluation score)."""
        where, params = ("WHERE r.kind = ?", [kind]) if kind else ("", [])
        rows = self.index.query(f"{_LIST_SQL} {where} ORDER BY r.created_at DESC, r.id DESC LIMIT ?", [*params, limit])
        for row in rows:
            best = row.pop("best_candidate_score")
            fallback = row.pop("best_evaluation_score")
            row["best_score"] = best if best is not None else fallback
            self._seen(row)
        return rows

    def _seen(self, row: dict[str, Any]) -> None:
        """An index row's status as :func:`seen_status` reads the run's own record (the index keeps
        what was written; whether the writer still lives is only known now)."""
        if row.get("status") == "running":
            row["status"] = seen_status(files.read_json(self.root / row["id"] / "status.json", {}) or {}).get(
                "status", "running")

    def get_run(self, run_id: str) -> dict[str, Any]:
        """A run's index row plus ``config``, ``summary``, the counts of :meth:`list_runs` and
        ``llm`` (the run's model-call totals)."""
        run = self.open_run(run_id)
        row = self.index.query_one(f"{_LIST_SQL} WHERE r.id = ?", (run.id,))
        assert row is not None  # open_run indexed it
        best = row.pop("best_candidate_score")
        fallback = row.pop("best_evaluation_score")
        row["best_score"] = best if best is not None else fallback
        self._seen(row)
        row["config"] = run.config
        row["summary"] = run.status().get("summary") or {}
        row["llm"] = _totals(self.index.query_one(TOTALS_SQL + " WHERE run_id = ?", (run.id,)))
        return row

    def delete_session_data(self, session_id: str) -> int:
        """:meth:`Run.delete_session_data` over every run; returns the total records changed."""
        return sum(self.open_run(run_id).delete_session_data(session_id) for run_id in self.run_ids())

    def reindex(self) -> int:
        """Rebuild the index rows of every run on disk; returns the number of runs."""
        ids = self.run_ids()
        for run_id in ids:
            self.open_run(run_id).reindex()
        return len(ids)


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)
