"""Jinja filters: how numbers, times and ids read on the pages."""

from __future__ import annotations

import json
import time
from typing import Any


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else ""


def score(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)
    return str(value)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def short(identifier: Any, n: int = 8) -> str:
    return str(identifier)[:n] if identifier is not None else ""


def pretty(value: Any) -> str:
    """A record as indented JSON (escaped by the template like any text)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str, sort_keys=True)


FILTERS = {"when": when, "score": score, "percent": percent, "short": short, "pretty": pretty}
