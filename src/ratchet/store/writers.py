"""Streaming writers: each record reaches the disk (fsynced) the moment it is written, so a killed
process loses at most the record it was in the middle of."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from ratchet.contracts import Message, StepRecord, to_record
from ratchet.store import files


class StepWriter:
    """Appends :class:`~ratchet.contracts.StepRecord` lines to one episode's JSONL log.

    Use as a context manager; ``count`` is the number of steps written through this writer.
    """

    def __init__(self, path: Path, *, restart: bool = True) -> None:
        self.path = path
        self.count = 0
        if restart and path.exists():
            files.write_bytes_atomic(path, b"")

    def write(self, step: StepRecord | dict[str, Any]) -> None:
        record = to_record(step) if dataclasses.is_dataclass(step) else dict(step)
        files.append_jsonl(self.path, record)
        self.count += 1

    def write_many(self, steps: Iterable[StepRecord | dict[str, Any]]) -> None:
        """Append steps that are all known already (a finished episode) with a single fsync."""
        records = [to_record(s) if dataclasses.is_dataclass(s) else dict(s) for s in steps]
        self.count += files.append_jsonl_many(self.path, records)

    def close(self) -> None:
        """Nothing is buffered; kept so the writer reads like a file."""

    def __enter__(self) -> StepWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


#: Size past which a trajectory file is closed as a numbered segment and a new one begun.
ROTATE_BYTES = 64 * 1024 * 1024


def trajectory_segments(path: Path) -> list[Path]:
    """A trajectory's closed segments (``NAME.00001.jsonl``, oldest first), then ``path`` itself."""
    return [*sorted(path.parent.glob(f"{path.stem}.[0-9][0-9][0-9][0-9][0-9].jsonl")), path]


class TrajectoryWriter:
    """Appends conversations (OpenAI-shaped message lists, plus any fields) to a JSONL file.

    ``write(messages, **fields)`` stores ``{"messages": messages, **fields}``; ``write(record)``
    with a mapping stores it as given. Every record gets ``written_at`` and, when the writer or
    the record has one, ``session_id``. Once the file holds ``rotate_bytes`` or more, it is renamed
    to the next numbered segment before the next record (one atomic rename: a kill leaves every
    record in exactly one file), so no single file grows without end. Segments stay plain JSONL:
    every reader of ``*.jsonl`` (session erasure included) still sees them.
    """

    def __init__(
        self,
        path: Path,
        name: str,
        session_id: str | None = None,
        on_session: Callable[[str, str, float], None] | None = None,
        rotate_bytes: int | None = ROTATE_BYTES,
    ) -> None:
        self.path = path
        self.name = name
        self.session_id = session_id
        self._on_session = on_session
        self.rotate_bytes = rotate_bytes
        self.count = 0

    def _rotate_if_full(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if self.rotate_bytes is None or size < self.rotate_bytes:
            return
        number = len(trajectory_segments(self.path))  # closed segments + 1
        os.replace(self.path, self.path.with_name(f"{self.path.stem}.{number:05d}.jsonl"))
        files.fsync_dir(self.path.parent)

    def write(self, record: Sequence[Message] | dict[str, Any], **fields: Any) -> None:
        if isinstance(record, dict):
            body = {**record, **fields}
        else:
            body = {"messages": [dict(m) for m in record], **fields}
        if self.session_id is not None:
            body.setdefault("session_id", self.session_id)
        now = time.time()
        body.setdefault("written_at", now)
        self._rotate_if_full()
        files.append_jsonl(self.path, body)
        self.count += 1
        session = body.get("session_id")
        if session is not None and self._on_session is not None:
            self._on_session(str(session), self.name, now)

    def close(self) -> None:
        """Nothing is buffered; kept so the writer reads like a file."""

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
