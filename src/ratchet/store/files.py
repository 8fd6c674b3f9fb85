"""Crash-safe files: atomic JSON documents and append-only JSONL logs, both format-versioned.

Guarantees (Linux/POSIX, local file system):

* :func:`write_json_atomic` leaves the target either as it was or as the complete new document,
  whatever moment the writing process is killed at: the bytes go to a temporary file in the same
  directory, are flushed and fsynced, then ``os.replace`` swaps the name and the directory is
  fsynced so the rename itself survives a power cut.
* :func:`append_jsonl` writes one whole line with one ``write`` call under an exclusive ``flock``
  and fsyncs it. A process killed mid-append can leave at most one torn line at the end of the
  file; readers skip it and the next append starts on a fresh line, so one torn record never
  swallows the next.
* Every record carries ``format_version``; reading a record written by a newer Ratchet raises a
  :class:`~ratchet.contracts.RatchetError` instead of misreading it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ratchet.contracts import FORMAT_VERSION, RatchetError

log = logging.getLogger(__name__)

#: Key under which a non-mapping value (a list, a number) is stored, so that every JSON file on
#: disk is still a mapping that can carry ``format_version``.
WRAPPED_KEY = "__value__"


def json_default(obj: Any) -> Any:
    """JSON encoding for the types records commonly hold: dataclasses, paths, sets, numpy scalars."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "model_dump"):  # pydantic models (configs)
        return obj.model_dump(mode="json")
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays
        return obj.tolist()
    raise TypeError(f"cannot store an object of type {type(obj).__name__} as JSON")


def _versioned(obj: Any) -> dict[str, Any]:
    """The mapping that goes on disk: ``format_version`` first, a caller's own version kept."""
    if isinstance(obj, dict):
        return {"format_version": obj.get("format_version", FORMAT_VERSION), **obj}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _versioned(dataclasses.asdict(obj))
    return {"format_version": FORMAT_VERSION, WRAPPED_KEY: obj}


def check_version(record: Any, source: str | Path) -> None:
    """Raise if ``record`` was written in a newer format than this Ratchet understands."""
    if not isinstance(record, dict):
        raise RatchetError(f"{source}: expected a JSON object, found {type(record).__name__}")
    version = record.get("format_version")
    if version is None:
        return  # written by hand or by a tool that predates versioning: read it as version 1
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RatchetError(
            f"{source} has format_version {version!r}, newer than this Ratchet reads ({FORMAT_VERSION})",
            hint="upgrade ratchet (pip install -U ratchet) to read records written by a newer version",
        )


def _unwrap(record: dict[str, Any], keep_version: bool) -> Any:
    if WRAPPED_KEY in record and len(record) == 2:
        return record[WRAPPED_KEY]
    if not keep_version:
        record = {k: v for k, v in record.items() if k != "format_version"}
    return record


def fsync_dir(directory: str | Path) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader (or a crash) sees old or new, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Same directory as the target: os.replace is only atomic within one file system.
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def encode_json_text(text: str) -> bytes:
    """UTF-8 of JSON text that may hold lone surrogates (a backend can pass undecodable bytes
    through as such): they are written as ``\\udcXX`` escapes, which JSON reads back as the same
    string, instead of failing the write of a whole record."""
    return text.encode("utf-8", errors="backslashreplace")


def write_json_atomic(path: str | Path, obj: Any, *, indent: int | None = 2) -> None:
    """Atomically write ``obj`` as JSON with ``format_version`` added (see module guarantees).

    A mapping is stored as is (plus ``format_version``); any other JSON-able value is wrapped so
    that the file is still a versioned mapping; :func:`read_json` unwraps it.
    """
    text = json.dumps(_versioned(obj), indent=indent, ensure_ascii=False, default=json_default)
    write_bytes_atomic(path, encode_json_text(text + "\n"))


def read_json(path: str | Path, default: Any = None, *, keep_version: bool = False) -> Any:
    """Read what :func:`write_json_atomic` wrote; ``default`` if the file does not exist.

    ``format_version`` is checked and, unless ``keep_version``, removed, so a value read back
    equals the value written.
    """
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return default
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RatchetError(
            f"{path} is not valid JSON ({exc})",
            hint="files written by Ratchet are replaced atomically; this one was edited or damaged by hand",
        ) from None
    check_version(record, path)
    return _unwrap(record, keep_version)


def _encode_line(record: Any) -> bytes:
    line = json.dumps(_versioned(record), ensure_ascii=False, default=json_default, separators=(",", ":"))
    if "\n" in line:  # json.dumps escapes newlines in strings; this guards a custom default
        raise RatchetError("a JSONL record must encode to a single line")
    return encode_json_text(line + "\n")


def _open_locked_for_append(path: Path) -> int:
    """Open ``path`` for appending and hold its exclusive lock; the fd always names ``path``.

    A rewrite (:func:`rewrite_jsonl`) replaces the file under the same lock; an appender that was
    waiting on the old inode notices the swap and reopens, so no line goes to an unlinked file.
    """
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def append_jsonl(path: str | Path, record: Any) -> None:
    """Append ``record`` as one line (``format_version`` added), flushed and fsynced.

    Safe across processes: appends are serialised by ``flock``; a torn last line left by a killed
    writer is closed off with a newline first, so it stays a single skippable line.
    """
    _append_bytes(Path(path), _encode_line(record))


def append_jsonl_many(path: str | Path, records: Iterable[Any]) -> int:
    """Append several records with one write and one fsync (a batch known all at once, such as a
    finished episode's steps); returns how many. A kill leaves a prefix of them, the last torn."""
    data = b"".join(_encode_line(r) for r in records)
    if data:
        _append_bytes(Path(path), data)
    return data.count(b"\n")


def _append_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_locked_for_append(path)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as reader:
                reader.seek(size - 1)
                if reader.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the flock
    if size == 0:
        fsync_dir(path.parent)  # a new file: make its directory entry durable too


def iter_jsonl(path: str | Path, *, keep_version: bool = False) -> Iterator[Any]:
    """Yield the records of a JSONL file in order; a missing file yields nothing.

    A line that does not parse is skipped: at the end of the file that is the expected trace of a
    writer killed mid-append; elsewhere it is logged as a warning.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    lines = raw.split(b"\n")
    last = len(lines) - 1
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            torn_tail = number == last or (number == last - 1 and not lines[last].strip())
            if not torn_tail:
                log.warning("%s:%d: skipping a damaged line", path, number + 1)
            continue
        check_version(record, f"{path}:{number + 1}")
        yield _unwrap(record, keep_version)


def read_jsonl(path: str | Path, *, keep_version: bool = False) -> list[Any]:
    """All records of a JSONL file (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path, keep_version=keep_version))


def rewrite_jsonl(path: str | Path, edit: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
    """Atomically rewrite a JSONL file record by record; returns how many records changed.

    ``edit`` gets each raw record (``format_version`` included) and returns it, a changed copy,
    or ``None`` to drop it. Holds the file's append lock throughout, so concurrent appenders
    neither lose a line nor write into the replaced file. Damaged lines are dropped.
    """
    path = Path(path)
    if not path.exists():
        return 0
    fd = _open_locked_for_append(path)
    try:
        lines: list[bytes] = []
        changed = 0
        damaged = False
        for line in path.read_bytes().split(b"\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                damaged = True
                continue
            if not isinstance(record, dict):
                lines.append(line + b"\n")
                continue
            edited = edit(dict(record))
            if edited is None:
                changed += 1
            elif edited != record:
                changed += 1
                lines.append(_encode_line(edited))
            else:
                lines.append(line + b"\n")
        if changed or damaged:
            write_bytes_atomic(path, b"".join(lines))
        return changed
    finally:
        os.close(fd)


def write_jsonl_atomic(path: str | Path, records: Iterable[Any]) -> None:
    """Replace a JSONL file with ``records`` in one atomic step."""
    write_bytes_atomic(path, b"".join(_encode_line(r) for r in records))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temp_files(directory: str | Path) -> int:
    """Remove temp files left under ``directory`` by writers that were killed mid-write.

    Only files whose writer process no longer exists are removed (the pid is in the name), so a
    write in progress elsewhere is never disturbed. Returns the number removed.
    """
    removed = 0
    for tmp in Path(directory).rglob(".*.tmp"):
        parts = tmp.name.split(".")  # "", name..., pid, hex, "tmp"
        if len(parts) >= 5 and parts[-3].isdigit() and not _pid_alive(int(parts[-3])):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def rng_to_json(state: tuple) -> list:
    """A ``random.Random.getstate()`` as JSON-able data, for a checkpoint."""
    return [state[0], list(state[1]), state[2]]


def rng_from_json(plain: list) -> tuple:
    """The ``random.Random.setstate()`` argument back from :func:`rng_to_json`'s data."""
    return (plain[0], tuple(plain[1]), plain[2])
