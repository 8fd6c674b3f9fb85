"""The working tree's fingerprint: how the repeat guard observes whether the files changed.

:func:`tree_fingerprint` walks the tree and reads every file each time it is asked.
:class:`TreeFingerprint` gives the same digest for the same tree, but keeps each file's content
digest with the file's stat and reads again only the files whose stat changed, or whose times are
too recent for an unchanged stat to prove unchanged content. On a checkout of thousands of files
the guard asks twice per tool call, so reading them all each time was most of a call's cost.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from collections.abc import Callable, Sequence
from fnmatch import translate
from pathlib import Path

#: Files larger than this are fingerprinted by mode, size and modification time, not by content.
HASHED_BYTES = 1 << 20

#: How recent (nanoseconds before a scan starts) a file's mtime or ctime may be for its cached
#: digest not to be trusted; see :class:`TreeFingerprint`.
RACY_NS = 2_000_000_000


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    """``fnmatch(name, p)`` for any of ``patterns``, as one compiled expression (the walk asks it of
    every name)."""
    if not patterns:
        return lambda name: False
    expression = re.compile("|".join(f"(?:{translate(os.path.normcase(p))})" for p in patterns))
    return lambda name: expression.match(os.path.normcase(name)) is not None


def _file_digest(path: str | os.PathLike[str]) -> bytes:
    """What a hashed file adds to the fingerprint: a digest of its content. The one place content is read."""
    with open(path, "rb") as handle:
        return b"c" + hashlib.blake2b(handle.read(), digest_size=16).digest()


def _stat_part(info: os.stat_result) -> bytes:
    """What a file not hashed (larger than :data:`HASHED_BYTES`, or not a regular file) adds."""
    return f"s{info.st_mode} {info.st_size} {info.st_mtime_ns}".encode()


def _hashed(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_size <= HASHED_BYTES


#: Gone or unreadable between the walk and the read: still a state of the tree.
_UNREADABLE = b"?"


def _add(digest: hashlib.blake2b, relative: str, part: bytes) -> None:
    # os.fsencode, not str.encode: a name that is not valid UTF-8 comes back from the walk with
    # surrogate escapes, which str.encode refuses.
    digest.update(os.fsencode(relative) + b"\0" + part + b"\0")


def tree_fingerprint(root: Path, ignore: Sequence[str]) -> str:
    """A digest of the files under ``root`` (path and content; mode, size and mtime for large ones
    and for what is not a regular file), names matching ``ignore`` left out with what is inside
    them; symbolic links are not followed. Content, not modification times: a command that
    rewrites a file with the same text (a test run's cache) changed nothing. Reads every file
    each time: the reference :class:`TreeFingerprint` is checked against."""
    ignored = _matcher(ignore)
    digest = hashlib.blake2b(digest_size=16)
    for dirpath, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not ignored(d))
        for name in sorted(names):
            if ignored(name):
                continue
            path = Path(dirpath) / name
            try:
                info = path.lstat()
                part = _file_digest(path) if _hashed(info) else _stat_part(info)
            except OSError:
                part = _UNREADABLE
            _add(digest, path.relative_to(root).as_posix(), part)
    return digest.hexdigest()


_Key = tuple[int, int, int, int]


class TreeFingerprint:
    """:func:`tree_fingerprint` of a tree asked again and again, reading only what may have changed.

    The walk (``os.scandir``, whose entries carry the file type, so only files are stat'ed) runs
    every time: a new, deleted or renamed file is seen by the walk, not by the cache. A regular
    file's content digest is kept with its (relative path, inode, size, mtime, ctime); when the
    next scan finds the same five, the file is not read again. A write changes mtime and ctime;
    setting mtime back (``os.utime``, ``touch -d``, an unpacked archive) changes ctime, which no
    call can set; a file replaced by a rename has another inode.

    What a stat cannot show is a second write within the timestamps' granularity (git's "racy
    clean" entries): a file read at time T with mtime T, written again with the same size a moment
    later, still at mtime T, looks unchanged. So, like git, which re-hashes entries whose mtime is
    not older than its index, a digest is kept only when the file's mtime and ctime are
    :data:`RACY_NS` (2 s) or more older than the scan that read it began (the clock, ``time.time_ns``
    unless a test gives another): a later write then has a later timestamp on any file system whose
    granularity is under 2 s (FAT's is 2 s; Linux's coarse clock ticks in milliseconds). Files
    written in the last 2 s, the ones an agent just edited, are re-read at every scan until they
    age. The times are compared with this machine's clock: a network file system whose server
    clock runs ahead only makes more files look recent, which costs reads, not correctness.

    The cache lives on this object and only for the files seen by the last scan (a deleted file's
    entry goes with it). It is not part of any saved state: a resumed run starts with an empty one
    and reads every file once."""

    def __init__(self, ignore: Sequence[str], *, clock: Callable[[], int] = time.time_ns,
                 racy_ns: int = RACY_NS) -> None:
        self._ignored = _matcher(ignore)
        self._clock = clock
        self._racy_ns = racy_ns
        self._root: str | None = None
        self._cache: dict[str, tuple[_Key, bytes]] = {}
        self.read = 0
        """Files the last scan read (the rest came from the cache or need no read)."""

    def __call__(self, root: Path) -> str:
        top = os.fspath(root)
        if top != self._root:  # relative paths of another tree: nothing kept applies
            self._root, self._cache = top, {}
        trusted_before = self._clock() - self._racy_ns
        previous, kept = self._cache, {}
        digest = hashlib.blake2b(digest_size=16)
        self.read = 0
        # Depth first, files before subdirectories, both sorted by name: os.walk's order in
        # tree_fingerprint, so the digests are the same.
        stack = [(top, "")]
        while stack:
            dirpath, prefix = stack.pop()
            try:
                with os.scandir(dirpath) as scan:
                    entries = list(scan)
            except OSError:  # os.walk skips a directory it cannot list
                continue
            files, dirs = [], []
            for entry in entries:
                if self._ignored(entry.name):
                    continue
                try:
                    is_dir = entry.is_dir()  # follows a link, as os.walk does to sort names
                except OSError:
                    is_dir = False
                (dirs if is_dir else files).append(entry)
            files.sort(key=lambda e: e.name)
            for entry in files:
                relative = prefix + entry.name
                _add(digest, relative, self._part(entry, relative, previous, kept, trusted_before))
            for entry in sorted(dirs, key=lambda e: e.name, reverse=True):
                try:
                    link = entry.is_symlink()
                except OSError:
                    link = False
                if not link:  # a link to a directory is listed by os.walk, never entered
                    stack.append((entry.path, f"{prefix}{entry.name}/"))
        self._cache = kept
        return digest.hexdigest()

    def _part(self, entry: os.DirEntry[str], relative: str, previous: dict[str, tuple[_Key, bytes]],
              kept: dict[str, tuple[_Key, bytes]], trusted_before: int) -> bytes:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            return _UNREADABLE
        if not _hashed(info):
            return _stat_part(info)
        key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        cached = previous.get(relative)
        if cached is not None and cached[0] == key:
            kept[relative] = cached
            return cached[1]
        try:
            part = _file_digest(entry.path)
        except OSError:
            return _UNREADABLE
        self.read += 1
        if max(info.st_mtime_ns, info.st_ctime_ns) < trusted_before:  # old enough to trust: see the class
            kept[relative] = (key, part)
        return part
