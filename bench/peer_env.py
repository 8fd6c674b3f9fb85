"""The bench environment the peers (GEPA, OpenEvolve, mini-swe-agent) run in, never the package's own.

Built by ``scripts/setup-bench.sh`` (``make bench-env``) at ``.venv-bench`` in the checkout, or
wherever ``$RATCHET_BENCH_VENV`` points.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench_python() -> Path:
    """The bench environment's interpreter; a clear stop naming the set-up command when it is missing."""
    venv = Path(os.environ.get("RATCHET_BENCH_VENV", ROOT / ".venv-bench"))
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no bench environment at {venv}: build it with scripts/setup-bench.sh {venv}")
    return python
