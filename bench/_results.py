"""How a benchmark writes what it measured: ``bench/results/NAME.json`` (the numbers, for tools
and later runs) beside ``NAME.md`` (the same for people), and the machine block the numbers carry.

Not a benchmark itself: ``python -m bench`` runs only the modules whose names do not start with ``_``.
It imports nothing of ``ratchet``: envs_throughput's children time an older checkout's sources
(``--before-src``) and must load only those.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine(**extra: Any) -> dict[str, Any]:
    """What the numbers were measured on: the CPU count and the Python version, then ``extra`` (a
    bench's own readings, such as load averages or the platform string) in the order given."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), **extra}


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a long bench that merges its runs into one file, killed
    while writing, leaves the previous file whole rather than half of the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_json(name: str, data: Any, *, out: Path = RESULTS, indent: int | None = 2,
               default: Callable[[Any], Any] | None = None) -> None:
    """Write ``data`` to ``out/NAME.json`` as JSON with ``indent`` (``default`` for what JSON cannot
    hold), ending in a newline, creating ``out``, atomically. Benches call it before they format the
    markdown, so that a long run's numbers are on disk even if the formatting fails."""
    _replace(out / f"{name}.json", json.dumps(data, indent=indent, default=default) + "\n")


def write_markdown(name: str, text: str, *, out: Path = RESULTS) -> None:
    """Write ``text``, as given, to ``out/NAME.md`` (the results for people), creating ``out``,
    atomically."""
    _replace(out / f"{name}.md", text)
