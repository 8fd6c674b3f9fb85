"""Settings of the dashboard (``ratchet ui``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ratchet.config import Settings
from ratchet.store.config import default_root


class UIConfig(Settings):
    """Where the dashboard listens, which run store it shows, and how it pages and refreshes."""

    root: Path = Field(default_factory=default_root)
    """The run store to show (a directory of runs). Defaults to $RATCHET_RUNS when set, else ./runs."""

    host: str = "127.0.0.1"
    """Interface to listen on. Anything but a loopback address requires a token (one is generated
    and printed when none is given)."""

    port: int = Field(default=8765, ge=0, le=65535)
    """TCP port (0 picks a free one)."""

    token: str | None = None
    """Access token. When set, every page needs it (the ?token= link sets a cookie) and every
    state-changing request must carry it in the X-Ratchet-Token header or a `token` form field.
    Also read from $RATCHET_UI_TOKEN."""

    page_size: int = Field(default=50, ge=10, le=1000)
    """Rows per page in long tables (steps, candidates, turns): pages stay fast on big runs."""

    tree_limit: int = Field(default=250, ge=10, le=10_000)
    """Most nodes drawn in an AutoHarness tree; the rest are listed in the paged candidate table."""

    poll_s: float = Field(default=2.0, gt=0.1, le=60)
    """How often an open page asks for the progress of running runs (seconds)."""
