"""A suite's fingerprint: one hash of everything that decides its scores."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def fingerprint(settings: dict[str, Any], files: Iterable[Path], *data: Any) -> str:
    """Hash of the settings (JSON), each file's name and bytes (in order, duplicates once) and any
    JSON-able ``data`` (e.g. the task list); 16 hex digits."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for path in dict.fromkeys(Path(f) for f in files):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for item in data:
        digest.update(json.dumps(item, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]
