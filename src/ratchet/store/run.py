"""One run: a directory of versioned files (the truth) plus its rows in the shared index.

Every ``add_*`` / ``record_*`` method writes its file first and its index row second, and both
are idempotent, so a run killed between the two is repaired by doing the same call again on
resume, or wholesale by :meth:`Run.reindex`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from ratchet.contracts import (
    Candidate,
    EpisodeSummary,
    Evaluation,
    LLMCall,
    RatchetError,
    StepRecord,
    to_record,
)
from ratchet.processes import ProcessRecord
from ratchet.store import files
from ratchet.store.index import Index
from ratchet.store.writers import StepWriter, TrajectoryWriter, trajectory_segments

#: The states a run can be in; anything but ``running`` means the run process has ended.
RUN_STATUSES = ("running", "done", "stopped", "failed", "budget_exhausted", "waiting")  # waiting: for a person's approval
#: What a reader sees for a ``running`` run whose process ended without recording an end: never
#: written (the process that could write it is gone); resuming the run makes it ``running`` again.
INTERRUPTED = "interrupted"


def seen_status(record: dict[str, Any]) -> dict[str, Any]:
    """A status record as a reader should see it: ``running`` becomes :data:`INTERRUPTED` when its
    owner (the process that set it) ran on this host and is gone. A record without an owner (older
    runs) or with one on another host is taken as written: it cannot be checked from here."""
    owner = ProcessRecord.load(record.get("owner"))
    if record.get("status") == "running" and owner is not None and owner.gone():
        return {**record, "status": INTERRUPTED,
                "reason": f"its process (pid {owner.pid}) ended without recording an end; resume the run to go on"}
    return record


def safe_name(name: str, what: str) -> str:
    """``name`` if it can be one path component (no ``/``, no leading dot), else RatchetError."""
    if not isinstance(name, str) or not name or "/" in name or "\0" in name or name.startswith(".") or len(name) > 200:
        raise RatchetError(f"{what} {name!r} cannot be used as a file name", hint="use letters, digits, '-', '_', '.'")
    return name


def safe_relpath(relpath: str | Path, what: str = "path") -> PurePosixPath:
    """A relative path that stays inside its directory, else RatchetError."""
    path = PurePosixPath(str(relpath).replace("\\", "/"))
    if path.is_absolute() or not path.parts or any(p in ("", ".", "..") for p in path.parts):
        raise RatchetError(f"{what} {str(relpath)!r} must be relative and stay inside its directory")
    return path


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, default=files.json_default)


class Run:
    """A handle on ``<root>/<id>/``. Obtain one from :class:`~ratchet.store.RunStore`.

    Picklable: a worker process that receives a Run writes to the same files and index through
    its own connection.
    """

    def __init__(self, root: Path, index: Index, record: dict[str, Any]) -> None:
        self.root = root
        self.index = index
        self.id: str = record["id"]
        self.kind: str = record["kind"]
        self.name: str | None = record.get("name")
        self.config: dict[str, Any] = record.get("config") or {}
        self.created_at: float = record["created_at"]
        self.dir: Path = root / self.id

    def __repr__(self) -> str:
        return f"Run({self.id!r}, dir={str(self.dir)!r})"

    # -- plain files -----------------------------------------------------------------------

    def path(self, relpath: str | Path) -> Path:
        """Absolute path of ``relpath`` inside this run's directory (never outside it)."""
        return self.dir / safe_relpath(relpath)

    def write_json(self, relpath: str | Path, obj: Any) -> None:
        files.write_json_atomic(self.path(relpath), obj)

    def read_json(self, relpath: str | Path, default: Any = None) -> Any:
        return files.read_json(self.path(relpath), default)

    def append_jsonl(self, relpath: str | Path, record: dict[str, Any]) -> None:
        files.append_jsonl(self.path(relpath), record)

    def read_jsonl(self, relpath: str | Path) -> list[dict[str, Any]]:
        return files.read_jsonl(self.path(relpath))

    # -- status ----------------------------------------------------------------------------

    def set_status(self, status: str, summary: dict[str, Any] | None = None) -> None:
        """Record the run's state; ``summary=None`` keeps the previous summary."""
        if status not in RUN_STATUSES:
            raise RatchetError(f"unknown run status {status!r}", hint=f"use one of: {', '.join(RUN_STATUSES)}")
        previous = self.read_json("status.json", {}) or {}
        if summary is None:
            summary = previous.get("summary") or {}
        now = time.time()
        record: dict[str, Any] = {"status": status, "summary": summary, "updated_at": now}
        if status == "running":  # this process runs it now (a resume takes it over)
            record["owner"] = ProcessRecord.current().to_json()
        self.write_json("status.json", record)
        self.index.execute(
            "UPDATE runs SET status = ?, summary_json = ?, updated_at = ? WHERE id = ?",
            (status, _json(summary), now, self.id),
        )

    def status(self) -> dict[str, Any]:
        """``{"status", "summary", "updated_at"}`` as last set; a ``running`` run whose process is
        gone without saying so (SIGKILL, a power cut, the OOM killer) reads ``interrupted``."""
        return seen_status(self.read_json("status.json", {"status": "running", "summary": {},
                                                          "updated_at": self.created_at}))

    @contextmanager
    def marks_failure(self) -> Iterator[Run]:
        """The block's work on this run; if it raises, :meth:`record_failure` marks the run, so a
        run that died never stays ``running`` in ``ratchet runs list``."""
        try:
            yield self
        except BaseException as exc:
            self.record_failure(exc)
            raise

    def record_failure(self, exc: BaseException) -> None:
        """Mark the run ``failed`` with the error's first line as its reason (``stopped`` on
        Ctrl-C), if it still reads ``running``: a status set before the error (a budget stop, the
        engine's own failure) is left as it is. Never raises: the store failing too (a full disk)
        must not hide the first error."""
        try:
            # As written, not as seen: a run whose owner died reads "interrupted", and whoever
            # knows why it ended (a batch driver about its worker's game) should still say so.
            if (self.read_json("status.json", {}) or {}).get("status", "running") != "running":
                return
            if isinstance(exc, KeyboardInterrupt):
                self.set_status("stopped", {"state": "stopped", "reason": "interrupted (Ctrl-C)"})
                return
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if not isinstance(exc, RatchetError):  # a bug: its type says more than its text
                reason = f"{type(exc).__name__}: {reason}"
            self.set_status("failed", {"state": "failed", "error": reason})
        except Exception:  # noqa: BLE001
            pass

    # -- candidates ------------------------------------------------------------------------

    def _candidate_dir(self, candidate_id: str) -> Path:
        return self.dir / "candidates" / safe_name(candidate_id, "candidate id")

    def add_candidate(self, c: Candidate, status: str = "proposed") -> None:
        """Store a candidate's files and meta.json and index it; a second add of the same id is a
        no-op (its status and score are left as they are)."""
        cdir = self._candidate_dir(c.id)
        meta_path = cdir / "meta.json"
        if not meta_path.exists():
            names = [str(safe_relpath(name, "candidate file")) for name in c.files]
            for name, content in c.files.items():
                # Lone surrogates (undecodable bytes a backend passed through) become "?" on disk:
                # the stored file must be valid UTF-8 to be read back at all.
                files.write_bytes_atomic(cdir / "files" / safe_relpath(name), content.encode("utf-8", errors="replace"))
            files.write_json_atomic(cdir / "status.json", {"status": status, "score": None, "updated_at": c.created_at})
            # meta.json last: its presence means the candidate is complete on disk.
            record = to_record(c)
            record.pop("files")
            record["file_names"] = names
            files.write_json_atomic(meta_path, record)
        self._index_candidate(c.id)

    def _index_candidate(self, candidate_id: str, conn: Any = None) -> None:
        cdir = self._candidate_dir(candidate_id)
        meta = files.read_json(cdir / "meta.json")
        state = files.read_json(cdir / "status.json", {}) or {}
        (conn or self.index).execute(
            "INSERT OR IGNORE INTO candidates (run_id, id, parent_id, kind, status, score, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.id, meta["id"], meta.get("parent_id"), meta["kind"], state.get("status", "proposed"),
                state.get("score"), meta["created_at"], state.get("updated_at", meta["created_at"]),
            ),
        )

    def has_candidate(self, candidate_id: str) -> bool:
        """Whether the candidate is complete on disk (its meta.json, written last by add_candidate):
        a kill inside add_candidate leaves its files and status.json without it, and such a
        candidate does not exist until it is added again."""
        return (self._candidate_dir(candidate_id) / "meta.json").exists()

    def set_candidate_status(self, candidate_id: str, status: str, score: float | None = None) -> None:
        """Change a candidate's status; ``score=None`` keeps its previous score."""
        cdir = self._candidate_dir(candidate_id)
        if not self.has_candidate(candidate_id):
            raise RatchetError(f"run {self.id} has no candidate {candidate_id}", hint="add it with add_candidate first")
        previous = files.read_json(cdir / "status.json", {}) or {}
        score = previous.get("score") if score is None else float(score)
        now = time.time()
        files.write_json_atomic(cdir / "status.json", {"status": status, "score": score, "updated_at": now})
        updated = self.index.execute(
            "UPDATE candidates SET status = ?, score = ?, updated_at = ? WHERE run_id = ? AND id = ?",
            (status, score, now, self.id, candidate_id),
        )
        if not updated:  # the row was lost (crash before indexing): restore it from the files
            self._index_candidate(candidate_id)

    def candidates(self) -> list[dict[str, Any]]:
        """Index rows (id, parent_id, kind, status, score, created_at, updated_at), oldest first."""
        return self.index.query(
            "SELECT id, parent_id, kind, status, score, created_at, updated_at FROM candidates"
            " WHERE run_id = ? ORDER BY created_at, id",
            (self.id,),
        )

    def get_candidate(self, candidate_id: str) -> Candidate:
        cdir = self._candidate_dir(candidate_id)
        meta = files.read_json(cdir / "meta.json")
        if meta is None:
            raise RatchetError(f"run {self.id} has no candidate {candidate_id}")
        contents = {name: (cdir / "files" / name).read_text() for name in meta["file_names"]}
        return Candidate(
            id=meta["id"],
            kind=meta["kind"],
            files=contents,
            parent_id=meta.get("parent_id"),
            meta=meta.get("meta") or {},
            created_at=meta["created_at"],
        )

    # -- evaluations -----------------------------------------------------------------------

    def add_evaluation(self, e: Evaluation) -> None:
        """Store one evaluation; the same record added twice is stored once."""
        record = to_record(e)
        eval_id = hashlib.sha256(_json(record).encode()).hexdigest()[:16]
        relpath = f"candidates/{safe_name(e.candidate_id, 'candidate id')}/evaluations/{safe_name(e.split, 'split')}-{eval_id}.json"
        path = self.path(relpath)
        if not path.exists():
            files.write_json_atomic(path, {"id": eval_id, **record})
        self._index_evaluation(eval_id, e, relpath)

    def _index_evaluation(self, eval_id: str, e: Evaluation, relpath: str, conn: Any = None) -> None:
        (conn or self.index).execute(
            "INSERT OR IGNORE INTO evaluations (run_id, id, candidate_id, split, score, metrics_json, path, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (self.id, eval_id, e.candidate_id, e.split, float(e.score), _json(e.metrics), relpath, e.created_at),
        )

    def evaluations(self, candidate_id: str | None = None) -> list[dict[str, Any]]:
        """Full evaluation records (with ``id``, per_task, failures) read from disk, oldest first."""
        pattern = f"{safe_name(candidate_id, 'candidate id')}/evaluations/*.json" if candidate_id else "*/evaluations/*.json"
        records = [files.read_json(p) for p in (self.dir / "candidates").glob(pattern)]
        return sorted(records, key=lambda r: (r["created_at"], r["id"]))

    # -- episodes --------------------------------------------------------------------------

    def add_episode(self, summary: EpisodeSummary) -> None:
        """Append the episode's summary to episodes.jsonl and index it (re-adding replaces the row)."""
        record = {**to_record(summary), "recorded_at": time.time()}
        files.append_jsonl(self.dir / "episodes.jsonl", record)
        self._index_episode(record, record["recorded_at"])

    def _index_episode(self, s: dict[str, Any], created_at: float, conn: Any = None) -> None:
        (conn or self.index).execute(
            "INSERT OR REPLACE INTO episodes (run_id, id, env_id, seed, agent, steps, illegal_steps,"
            " ended_by_illegal, rewards_json, wall_s, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.id, s["episode_id"], s["env_id"], s["seed"], s["agent"], s["steps"], s["illegal_steps"],
                int(bool(s["ended_by_illegal"])), _json(s["rewards"]), s["wall_s"], created_at,
            ),
        )

    def episodes(self) -> list[dict[str, Any]]:
        """Episode summaries in the order they finished; a re-run episode appears once (its last).

        ``rewards`` keys are player ids (ints) again, as in :class:`EpisodeSummary`."""
        latest: dict[str, dict[str, Any]] = {}
        for record in files.iter_jsonl(self.dir / "episodes.jsonl"):
            # JSON object keys are text; player ids are ints in EpisodeSummary, so give them back.
            record["rewards"] = {int(k) if str(k).lstrip("-").isdigit() else k: v for k, v in record["rewards"].items()}
            latest.pop(record["episode_id"], None)
            latest[record["episode_id"]] = record
        return list(latest.values())

    def step_writer(self, episode_id: str, *, restart: bool = True) -> StepWriter:
        """Writer of episodes/<episode_id>.jsonl, one fsynced line per step as it happens.

        ``restart`` (the default) empties a log left by an earlier, interrupted attempt at the same
        episode: an episode is replayed from its first step on resume.
        """
        path = self.dir / "episodes" / f"{safe_name(episode_id, 'episode id')}.jsonl"
        return StepWriter(path, restart=restart)

    def steps(self, episode_id: str) -> list[dict[str, Any]]:
        return files.read_jsonl(self.dir / "episodes" / f"{safe_name(episode_id, 'episode id')}.jsonl")

    def write_step(self, step: StepRecord) -> None:
        """Append one step without holding a writer (appends to whatever is there)."""
        files.append_jsonl(self.dir / "episodes" / f"{safe_name(step.episode_id, 'episode id')}.jsonl", to_record(step))

    # -- model calls -----------------------------------------------------------------------

    def record_llm_call(self, call: LLMCall, session_id: str | None = None) -> None:
        """Log one model call (llm_calls.jsonl + index). Usable as the accountant's ``on_call``."""
        record = to_record(call)
        if session_id is not None:
            record["session_id"] = session_id
        files.append_jsonl(self.dir / "llm_calls.jsonl", record)
        self._index_llm_call(record)

    def _index_llm_call(self, r: dict[str, Any], conn: Any = None) -> None:
        (conn or self.index).execute(
            "INSERT INTO llm_calls (run_id, model, purpose, prompt_tokens, completion_tokens, latency_s,"
            " cost_usd, ok, error, started_at, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.id, r["model"], r["purpose"], int(r["prompt_tokens"]), int(r["completion_tokens"]),
                float(r["latency_s"]), r.get("cost_usd"), int(bool(r["ok"])), r.get("error"), r["started_at"],
                r.get("session_id"),
            ),
        )

    def llm_totals(self) -> dict[str, Any]:
        """calls, errors, prompt_tokens, completion_tokens, total_tokens, latency_s, cost_usd."""
        return _totals(self.index.query_one(TOTALS_SQL + " WHERE run_id = ?", (self.id,)))

    def llm_breakdown(self) -> dict[str, dict[str, Any]]:
        """:meth:`llm_totals` per purpose."""
        rows = self.index.query(
            "SELECT purpose, " + TOTALS_SQL.removeprefix("SELECT ") + " WHERE run_id = ? GROUP BY purpose ORDER BY purpose",
            (self.id,),
        )
        return {row.pop("purpose"): _totals(row) for row in rows}

    # -- conversations ---------------------------------------------------------------------

    def trajectory_writer(self, name: str, session_id: str | None = None) -> TrajectoryWriter:
        """Writer of trajectories/<name>.jsonl: conversations as OpenAI-shaped messages.

        Records written with a ``session_id`` (here or per record) can later be erased with
        :meth:`delete_session_data`.
        """
        path = self.dir / "trajectories" / f"{safe_name(name, 'trajectory name')}.jsonl"
        return TrajectoryWriter(path, name, session_id, on_session=self._index_session)

    def _index_session(self, session_id: str, trajectory: str, at: float, conn: Any = None) -> None:
        (conn or self.index).execute(
            "INSERT INTO sessions (run_id, session_id, trajectory, records, first_at, last_at) VALUES (?, ?, ?, 1, ?, ?)"
            " ON CONFLICT (run_id, session_id, trajectory) DO UPDATE SET records = records + 1, last_at = excluded.last_at",
            (self.id, session_id, trajectory, at, at),
        )

    def read_trajectory(self, name: str) -> list[dict[str, Any]]:
        """Every record of trajectory ``name``, its rotated segments first, in the order written."""
        path = self.dir / "trajectories" / f"{safe_name(name, 'trajectory name')}.jsonl"
        return [record for segment in trajectory_segments(path) for record in files.read_jsonl(segment)]

    def delete_session_data(self, session_id: str) -> int:
        """Erase a session: drop every JSONL record tagged with it (trajectories and any other log
        of the run) and its index rows, and untag its model calls (their token counts stay, for
        accounting, but no longer point at the session).

        Returns the number of records dropped or untagged.
        """
        changed = 0
        needle = json.dumps(session_id, ensure_ascii=False).encode()
        for path in sorted(self.dir.rglob("*.jsonl")):
            # Any log of the run may carry session-tagged records, not only trajectories/; the byte
            # search keeps untouched files from being rewritten.
            if path.name == "llm_calls.jsonl" and path.parent == self.dir or needle not in path.read_bytes():
                continue
            changed += files.rewrite_jsonl(path, lambda r: None if r.get("session_id") == session_id else r)

        def untag(record: dict[str, Any]) -> dict[str, Any]:
            if record.get("session_id") == session_id:
                record = {k: v for k, v in record.items() if k != "session_id"}
            return record

        changed += files.rewrite_jsonl(self.dir / "llm_calls.jsonl", untag)
        with self.index.transaction() as conn:
            conn.execute("DELETE FROM sessions WHERE run_id = ? AND session_id = ?", (self.id, session_id))
            conn.execute(
                "UPDATE llm_calls SET session_id = NULL WHERE run_id = ? AND session_id = ?", (self.id, session_id)
            )
        return changed

    # -- resume ----------------------------------------------------------------------------

    def checkpoint(self, name: str, obj: Any) -> None:
        """Atomically save resume state under checkpoints/<name>.json."""
        path = self.dir / "checkpoints" / f"{safe_name(name, 'checkpoint name')}.json"
        files.write_json_atomic(path, {"name": name, "saved_at": time.time(), "state": obj})

    def load_checkpoint(self, name: str) -> Any:
        """The state last saved under ``name``, or ``None`` if there is none yet."""
        record = files.read_json(self.dir / "checkpoints" / f"{safe_name(name, 'checkpoint name')}.json")
        return None if record is None else record["state"]

    def reindex(self) -> None:
        """Rebuild this run's index rows from its files (after a crash or a lost index.sqlite)."""
        from ratchet.store.rebuild import reindex_run

        reindex_run(self)


TOTALS_SQL = (
    "SELECT COUNT(*) AS calls, COALESCE(SUM(1 - ok), 0) AS errors,"
    " COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens, COALESCE(SUM(completion_tokens), 0) AS completion_tokens,"
    " COALESCE(SUM(latency_s), 0.0) AS latency_s, COALESCE(SUM(cost_usd), 0.0) AS cost_usd FROM llm_calls"
)


def _totals(row: dict[str, Any] | None) -> dict[str, Any]:
    row = dict(row or {"calls": 0, "errors": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "cost_usd": 0.0})
    row["total_tokens"] = row["prompt_tokens"] + row["completion_tokens"]
    return row
