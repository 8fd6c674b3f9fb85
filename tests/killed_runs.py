"""What a run store holds after a run was SIGKILLed and resumed: read by the chaos tests of the
AutoHarness and engine CLIs (``tests/*/test_chaos.py``), which kill their runs at random moments."""

from __future__ import annotations

import json
from pathlib import Path


def only_run(root: Path) -> str | None:
    """The id of the one run under ``root/runs`` (None before the first start has written it)."""
    runs = [p.name for p in (root / "runs").glob("*") if (p / "run.json").exists()]
    assert len(runs) <= 1, runs
    return runs[0] if runs else None


def whole_records(path: Path) -> list[dict]:
    """The JSON lines of ``path`` that are whole: a kill can tear the last one, which is not counted."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def whole_lines(path: Path) -> int:
    """How many whole JSON lines ``path`` has (0 when it does not exist yet)."""
    return len(whole_records(path))
