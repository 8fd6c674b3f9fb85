"""The run store: every run's state on disk, written as it happens, plus a shared SQLite index.

Layout and guarantees are documented in docs/store.md. Files under ``<root>/<run-id>/`` are the
source of truth; ``<root>/index.sqlite`` answers listings and queries and can be rebuilt from them.
"""

from ratchet.store.config import StoreConfig
from ratchet.store.files import append_jsonl, append_jsonl_many, read_json, read_jsonl, write_json_atomic
from ratchet.store.index import SCHEMA_VERSION, Index
from ratchet.store.run import RUN_STATUSES, Run
from ratchet.store.runstore import RunStore, StoreUnavailable, new_run_id
from ratchet.store.writers import StepWriter, TrajectoryWriter

__all__ = [
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "Index",
    "Run",
    "RunStore",
    "StepWriter",
    "StoreConfig",
    "StoreUnavailable",
    "TrajectoryWriter",
    "append_jsonl",
    "append_jsonl_many",
    "new_run_id",
    "read_json",
    "read_jsonl",
    "write_json_atomic",
]
