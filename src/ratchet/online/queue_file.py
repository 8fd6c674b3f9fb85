"""The queue's file: its SQLite schema, the columns older files gain, and one connection per thread.

The format the four loops share through :class:`~ratchet.online.queue.TurnQueue`: one SQLite file
in the run directory in WAL mode, so serving, judging and training processes (or Ray actors on one
machine) read and write it concurrently without a broker. Every state change is one short
transaction under ``BEGIN IMMEDIATE`` (:meth:`QueueFile._tx`), so two writers never interleave.
``secure_delete`` is on so that deleting a conversation overwrites its text in the file instead of
leaving it in free pages.

A file written by an older version is brought up to the current schema when it is opened: the
columns of a training lease and a judgement's priority are added in place, under the same lock,
so two processes opening an old file at once do not both alter it; the table of held-out
decisions (``splits``, one row per conversation a recording hold-out policy decided,
:mod:`ratchet.online.holdout`) is created empty, and the file's conversations are decided as
their turns are next judged or claimed.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ratchet.online.records import JUDGEMENT_PRIORITY

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_type TEXT NOT NULL,
    inferred INTEGER NOT NULL,
    policy_version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    state TEXT NOT NULL,
    data TEXT NOT NULL,
    next_state TEXT,
    judge_lease REAL,
    trained_version INTEGER
);
CREATE INDEX IF NOT EXISTS turns_state ON turns(state, created_at);
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgements (
    turn_id TEXT PRIMARY KEY,
    reward INTEGER NOT NULL,
    has_hint INTEGER NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS splits (
    session_id TEXT PRIMARY KEY,
    held INTEGER NOT NULL,
    early INTEGER NOT NULL,
    policy TEXT NOT NULL,
    decided_at REAL NOT NULL
);
"""

#: Columns of a training claim, added to queue files written before claims were leases.
_CLAIM_COLUMNS = {
    "claim_host": "TEXT",
    "claim_pid": "INTEGER",
    "claim_started": "TEXT",
    "claim_token": "TEXT",
    "claim_deadline": "REAL",
    "reclaims": "INTEGER NOT NULL DEFAULT 0",
    "reclaim_reason": "TEXT",
    "fail_reason": "TEXT",
}


class QueueFile:
    """The queue's SQLite file, created or brought up to date on open; safe across threads and processes.

    Each thread of each process gets its own connection (SQLite connections are not shareable
    across threads); all of them see one database file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # executescript manages its own transaction, so the schema is created outside _tx().
        self._conn().executescript(_SCHEMA)
        self._add_claim_columns()
        self._add_priority_column()

    def _add_claim_columns(self) -> None:
        if set(_CLAIM_COLUMNS) <= {row[1] for row in self._conn().execute("PRAGMA table_info(turns)")}:
            return
        # Under BEGIN IMMEDIATE (and checked again) so two processes opening an old file at once do
        # not both ALTER it.
        with self._tx() as db:
            have = {row[1] for row in db.execute("PRAGMA table_info(turns)")}
            for name, kind in _CLAIM_COLUMNS.items():
                if name not in have:
                    db.execute(f"ALTER TABLE turns ADD COLUMN {name} {kind}")

    def _add_priority_column(self) -> None:
        """Judgements of files written before they had a priority: explicit feedback (its judge was
        named ``feedback``) gets the feedback priority, so no judge replaces it from now on."""
        if "priority" in {row[1] for row in self._conn().execute("PRAGMA table_info(judgements)")}:
            return
        with self._tx() as db:
            if "priority" in {row[1] for row in db.execute("PRAGMA table_info(judgements)")}:
                return
            db.execute("ALTER TABLE judgements ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
            db.execute("UPDATE judgements SET priority=? WHERE json_extract(data, '$.judge')='feedback'",
                       (JUDGEMENT_PRIORITY["feedback"],))

    # ------------------------------------------------------------------ connections

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid():
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=True)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA secure_delete=ON")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
            self._local.pid = os.getpid()
        return conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
