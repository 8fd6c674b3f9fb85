"""The SQLite index over all runs of one store: what listings and queries need, nothing bulky.

Files under each run directory are the source of truth; the index can be rebuilt from them
(:meth:`ratchet.store.Run.reindex`). The database runs in WAL mode so readers never block the
writer, with a busy timeout so that many processes (rollout workers, the online server's loops)
can write at once. Each thread of each process gets its own connection: sqlite3 connections must
not cross threads, and a connection inherited through ``fork`` must never be used by the child.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError

#: Each entry migrates the schema from version ``i`` to ``i + 1``. Append only; never edit one
#: that has shipped: existing indexes have already run it.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS runs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        name TEXT,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        config_json TEXT,
        summary_json TEXT
    );
    CREATE INDEX IF NOT EXISTS runs_by_kind ON runs (kind, created_at);
    CREATE TABLE IF NOT EXISTS candidates (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        parent_id TEXT,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        score REAL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, id)
    );
    CREATE INDEX IF NOT EXISTS candidates_by_parent ON candidates (run_id, parent_id);
    CREATE TABLE IF NOT EXISTS evaluations (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        candidate_id TEXT NOT NULL,
        split TEXT NOT NULL,
        score REAL NOT NULL,
        metrics_json TEXT,
        path TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, id)
    );
    CREATE INDEX IF NOT EXISTS evaluations_by_candidate ON evaluations (run_id, candidate_id);
    CREATE TABLE IF NOT EXISTS episodes (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        env_id TEXT NOT NULL,
        seed INTEGER,
        agent TEXT,
        steps INTEGER,
        illegal_steps INTEGER,
        ended_by_illegal INTEGER,
        rewards_json TEXT,
        wall_s REAL,
        created_at REAL NOT NULL,
        PRIMARY KEY (run_id, id)
    );
    CREATE TABLE IF NOT EXISTS llm_calls (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        model TEXT NOT NULL,
        purpose TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        latency_s REAL NOT NULL,
        cost_usd REAL,
        ok INTEGER NOT NULL,
        error TEXT,
        started_at REAL NOT NULL,
        session_id TEXT
    );
    CREATE INDEX IF NOT EXISTS llm_calls_by_run ON llm_calls (run_id, purpose);
    CREATE TABLE IF NOT EXISTS sessions (
        run_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        trajectory TEXT NOT NULL,
        records INTEGER NOT NULL,
        first_at REAL NOT NULL,
        last_at REAL NOT NULL,
        PRIMARY KEY (run_id, session_id, trajectory)
    );
    CREATE INDEX IF NOT EXISTS sessions_by_id ON sessions (session_id);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


class Index:
    """A handle on ``<root>/index.sqlite``; cheap to create, safe to share across threads and
    to pickle into worker processes (each opens its own connection on first use)."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._migrate()

    def __reduce__(self) -> tuple[Any, ...]:
        return (Index, (self.path, self.busy_timeout_s))

    # -- connections -----------------------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (a fresh one after ``fork``)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE below), so a writer
        # takes the write lock up front and waits on busy_timeout instead of failing to upgrade.
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=True
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        # NORMAL in WAL mode: a crashed process loses nothing; a power cut may lose the last
        # commits, which the run's files (the source of truth) still hold.
        conn.execute("PRAGMA synchronous = NORMAL")
        self._local.conn = conn
        self._local.pid = os.getpid()
        return conn

    def _retry(self, action: Any) -> Any:
        # Changing the journal mode or migrating can still report "locked" while another process
        # creates the database at the same moment; busy_timeout does not cover every such path.
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                return action()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    # -- schema ----------------------------------------------------------------------------

    def _migrate(self) -> None:
        conn = self.connection()
        # The common case (an index already at this version) needs no write lock, so that many
        # workers opening the store at once do not queue behind each other.
        try:
            if self.schema_version() == SCHEMA_VERSION:
                return
        except sqlite3.OperationalError:
            pass  # no meta table yet: a new index

        def run() -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                current = int(row[0]) if row else 0
                if current > SCHEMA_VERSION:
                    raise RatchetError(
                        f"{self.path} has index schema version {current}; this Ratchet knows up to "
                        f"{SCHEMA_VERSION}",
                        hint="upgrade ratchet, or point --root at another directory",
                    )
                for version in range(current, SCHEMA_VERSION):
                    for statement in MIGRATIONS[version].split(";"):
                        if statement.strip():
                            conn.execute(statement)
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(max(current, SCHEMA_VERSION)),),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        self._retry(run)

    def schema_version(self) -> int:
        row = self.connection().execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    # -- queries ---------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the write lock from its start."""
        conn = self.connection()
        self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one write statement in its own transaction; returns the rows changed."""
        with self.transaction() as conn:
            return conn.execute(sql, params).rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self.connection().execute(sql, params).fetchall()]

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        row = self.connection().execute(sql, params).fetchone()
        return dict(row) if row is not None else None
