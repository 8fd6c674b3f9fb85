"""Streaming writers: each record reaches the disk (fsynced) the moment it is written, so a killed
process loses at most the record it was in the middle of."""

from __future__ import annotations

import dataclasses
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


class TrajectoryWriter:
    """Appends conversations (OpenAI-shaped message lists, plus any fields) to a JSONL file.

    ``write(messages, **fields)`` stores ``{"messages": messages, **fields}``; ``write(record)``
    with a mapping stores it as given. Every record gets ``written_at`` and, when the writer or
    the record has one, ``session_id``.
    """

    def __init__(
        self,
        path: Path,
        name: str,
        session_id: str | None = None,
        on_session: Callable[[str, str, float], None] | None = None,
    ) -> None:
        self.path = path
        self.name = name
        self.session_id = session_id
        self._on_session = on_session
        self.count = 0

    def write(self, record: Sequence[Message] | dict[str, Any], **fields: Any) -> None:
        if isinstance(record, dict):
            body = {**record, **fields}
        else:
            body = {"messages": [dict(m) for m in record], **fields}
        if self.session_id is not None:
            body.setdefault("session_id", self.session_id)
        now = time.time()
        body.setdefault("written_at", now)
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
