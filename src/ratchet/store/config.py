"""Settings of the run store."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from ratchet.config import Settings

#: Environment variable that moves the default store root (e.g. to a shared disk).
ROOT_ENV = "RATCHET_RUNS"


def default_root() -> Path:
    """``$RATCHET_RUNS`` if set, else ``runs`` under the current directory."""
    return Path(os.environ.get(ROOT_ENV) or "runs")


class StoreConfig(Settings):
    """Where runs are kept and how the shared index is opened."""

    root: Path = Field(default_factory=default_root)
    """Directory holding one sub-directory per run and the shared index.sqlite. Defaults to
    $RATCHET_RUNS when set, else ./runs."""

    busy_timeout_s: float = Field(default=30.0, gt=0)
    """How long a write waits for another process holding the index's write lock before failing."""
