"""Files of the driver's machine, sent to a process on another machine that has no view of them.

An actor on a node without the driver's disk (the online trainer: its held-out, guard and task
sets, the model it trains) is handed a :class:`SentFile` for each such file instead of a path.
The driver's :class:`FileServer` *offers* the file — hashes it and remembers its path under the
hash — and the remote side calls :func:`receive`, which asks for the file in chunks
(``read_chunk(sha256, offset, length)``: through the driver's relay, see
:mod:`ratchet.online.relayed`) into a cache directory on its own machine, named by the content's
hash, and checks the hash. So:

- a file is sent once per node and content: a second actor, or a restart, finds it in the cache;
- a file changed on the driver's side after it was offered fails the check (the error says to
  restart), and a file changed between two runs has a new hash and is sent again, never mistaken
  for the old copy;
- only offered files can be read, and only whole chunks of them: the remote side cannot name a
  path of the driver's machine.

Chunks, not one object: a model file is 0.5–1.5 GB, and one Ray object that size must fit whole
in the object store's shared memory of both nodes (by default 30% of each node's RAM) and in the
driver's memory while it is put; chunks of :data:`CHUNK_BYTES` keep both sides' memory at a chunk.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ratchet.contracts import RatchetError

#: Bytes asked for in one call: large enough that the call's round trip is small beside the copy.
CHUNK_BYTES = 8 * 1024 * 1024

#: ``read_chunk(sha256, offset, length) -> bytes`` on the driver's side.
ChunkReader = Callable[[str, int, int], bytes]


@dataclass(frozen=True)
class SentFile:
    """A file of the driver's machine as a remote process gets it: its content's hash, its size, its
    name (kept, so a GGUF stays ``*.gguf``) and where it is on the driver's side (for messages)."""

    name: str
    sha256: str
    size: int
    origin: str


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


class FileServer:
    """The driver's side: the files it offered, by hash; ``chunk`` reads a piece of one of them."""

    def __init__(self) -> None:
        self._paths: dict[str, Path] = {}
        self._lock = threading.Lock()

    def offer(self, path: str | Path, sha256: str | None = None) -> SentFile:
        """Make ``path`` readable by its hash. ``sha256`` spares hashing a file whose hash is known
        (a catalog model's verified stamp); it is checked again by the receiver all the same."""
        path = Path(path).expanduser().resolve()
        if not path.is_file():
            raise RatchetError(f"cannot send {path}: no such file", hint="fix the setting that names it")
        digest = sha256 or sha256_of(path)
        with self._lock:
            self._paths[digest] = path
        return SentFile(path.name, digest, path.stat().st_size, str(path))

    def chunk(self, sha256: str, offset: int, length: int) -> bytes:
        with self._lock:
            path = self._paths.get(sha256)
        if path is None:
            raise RatchetError(f"no file offered with SHA-256 {sha256[:16]}…")
        with open(path, "rb") as handle:
            handle.seek(max(0, int(offset)))
            return handle.read(max(0, min(int(length), CHUNK_BYTES)))


def cache_root() -> Path:
    """Where received files are kept on this machine: ``$RATCHET_CACHE_DIR/received`` (default: the
    user cache directory's ``ratchet/received``)."""
    root = os.environ.get("RATCHET_CACHE_DIR")
    if not root:
        import platformdirs  # deferred: only a receiving process needs it

        root = platformdirs.user_cache_dir("ratchet")
    return Path(root) / "received"


def cached(sent: SentFile, root: Path | None = None) -> Path:
    """Where ``sent`` is (or will be) kept here."""
    return (root or cache_root()) / sent.sha256[:32] / sent.name


def receive(sent: SentFile, read_chunk: ChunkReader, root: Path | None = None,
            chunk_bytes: int = CHUNK_BYTES) -> Path:
    """``sent`` as a file on this machine: from the cache, or asked for chunk by chunk, checked
    against its hash and moved into the cache whole (a receiver killed midway leaves no copy)."""
    if Path(sent.name).name != sent.name or sent.name in ("", ".", ".."):
        raise RatchetError(f"a sent file's name must be a plain file name, not {sent.name!r}")
    path = cached(sent, root)
    if path.is_file() and path.stat().st_size == sent.size:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{sent.name}.")
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as handle:
            offset = 0
            while offset < sent.size:
                data = read_chunk(sent.sha256, offset, min(chunk_bytes, sent.size - offset))
                if not data:
                    break
                digest.update(data)
                handle.write(data)
                offset += len(data)
            handle.flush()
            os.fsync(handle.fileno())
        if offset != sent.size or digest.hexdigest() != sent.sha256:
            raise RatchetError(f"{sent.origin} changed since it was offered (its SHA-256 or size differs)",
                               hint="restart the serving process so that it offers the file as it is now")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path
