"""The repeat guard's working-tree fingerprint: the cached scan sees what the full read sees and
reads again only what may have changed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ratchet.runtime import AgentConfig
from ratchet.runtime import fingerprint as fp
from ratchet.runtime.config import RepeatGuardConfig
from ratchet.runtime.fingerprint import HASHED_BYTES, TreeFingerprint, tree_fingerprint
from ratchet.runtime.middleware import RepeatGuard

from .conftest import call

IGNORE = RepeatGuardConfig().ignore
HOUR_NS = 3600 * 10**9


def later() -> int:
    """A clock an hour ahead: every file in the tree is old enough for its digest to be kept."""
    return time.time_ns() + HOUR_NS


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "a.py").write_text("x = 1\n")
    (root / "pkg" / "b.py").write_text("y = 2\n")
    (root / "pkg" / "sub" / "c.txt").write_text("zzz\n")
    (root / "big.bin").write_bytes(b"\1" * (HASHED_BYTES + 1))
    for ignored in (".git/index", "__pycache__/a.cpython-311.pyc", "pkg/b.pyc"):
        (root / ignored).parent.mkdir(parents=True, exist_ok=True)
        (root / ignored).write_bytes(b"cache")
    (root / "link.py").symlink_to("a.py")
    (root / "dirlink").symlink_to("pkg")
    (root / "broken").symlink_to("nowhere")
    return root


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The paths whose content was read, in order, by either fingerprint."""
    seen: list[str] = []
    real = fp._file_digest

    def counting(path):
        seen.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(fp, "_file_digest", counting)
    return seen


def same_size_rewrite(path: Path, text: str) -> None:
    """Change ``path`` to ``text`` (of the same length) and put its mtime back, as `touch -r` would."""
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size


@pytest.mark.parametrize("clock", [time.time_ns, later], ids=["files-recent", "files-old"])
def test_the_cached_scan_gives_the_full_reads_digest(tree, clock):
    cached = TreeFingerprint(IGNORE, clock=clock)
    expected = tree_fingerprint(tree, IGNORE)
    assert cached(tree) == expected and cached(tree) == expected  # first scan, then from the cache
    os.mkfifo(tree / "pkg" / "fifo")  # not a regular file: by its stat, never opened
    (tree / "pkg" / "sub" / "c.txt").write_text("changed\n")
    assert cached(tree) == tree_fingerprint(tree, IGNORE) != expected


def test_a_name_that_is_not_utf8_is_fingerprinted(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    try:
        (root / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    assert TreeFingerprint(IGNORE)(root) == tree_fingerprint(root, IGNORE)


def test_unchanged_files_are_not_read_again(tree, reads):
    cached = TreeFingerprint(IGNORE, clock=later)
    first = cached(tree)
    # Links, the large file and what is ignored are never read; the link to a directory is not entered.
    assert sorted(os.path.relpath(p, tree) for p in reads) == ["a.py", "pkg/b.py", "pkg/sub/c.txt"]
    assert cached.read == 3
    reads.clear()
    assert cached(tree) == first and reads == [] and cached.read == 0
    (tree / "pkg" / "b.py").write_text("y = 3\n")
    assert cached(tree) != first
    assert reads == [str(tree / "pkg" / "b.py")] and cached.read == 1


def test_a_same_size_rewrite_with_the_mtime_put_back_is_seen(tree):
    """Size and mtime as before: the ctime the utime moved, or the file's recent times, send it to
    be read again; either way the content is observed, not assumed."""
    for clock in (time.time_ns, later):
        cached = TreeFingerprint(IGNORE, clock=clock)
        before = cached(tree)
        same_size_rewrite(tree / "a.py", "x = 2\n")
        assert cached(tree) != before
        assert cached(tree) == tree_fingerprint(tree, IGNORE)
        same_size_rewrite(tree / "a.py", "x = 1\n")
        assert cached(tree) == before


def test_files_written_within_the_racy_window_are_read_at_every_scan(tree, reads):
    """git's racily clean entries: a file whose mtime or ctime is within 2 s of the scan could be
    written again within the same timestamp tick with the same size, and its stat would not show
    it; so its digest is not kept and the next scan reads it again, stat unchanged or not."""
    recent = TreeFingerprint(IGNORE)  # the real clock: everything in the tree was just written
    recent(tree)
    reads.clear()
    recent(tree)
    assert recent.read == 3 and len(reads) == 3
    # The window is measured against the scan's clock: two seconds on, the same files are kept.
    aged = TreeFingerprint(IGNORE, clock=lambda: time.time_ns() + fp.RACY_NS + 10**9)
    aged(tree)
    aged(tree)
    assert aged.read == 0


def test_new_deleted_and_renamed_files_are_seen(tree):
    cached = TreeFingerprint(IGNORE, clock=later)
    states = [cached(tree)]
    (tree / "pkg" / "new.py").write_text("")
    states.append(cached(tree))
    (tree / "pkg" / "new.py").rename(tree / "pkg" / "sub" / "new.py")
    states.append(cached(tree))
    (tree / "a.py").rename(tree / "a2.py")  # same content, same inode, another name
    states.append(cached(tree))
    (tree / "pkg" / "sub" / "new.py").unlink()
    states.append(cached(tree))
    (tree / "empty").rmdir()  # an empty directory holds no file: no change
    states.append(cached(tree))
    assert len(set(states[:-1])) == 5 and states[-1] == states[-2]
    assert states[-1] == tree_fingerprint(tree, IGNORE)


def test_a_file_replaced_by_a_rename_is_read_again(tree, reads):
    """Same size and mtime, another file (an editor's write-then-rename): another inode and a new ctime."""
    cached = TreeFingerprint(IGNORE, clock=later)
    before = cached(tree)
    target = tree / "pkg" / "b.py"
    info = target.stat()
    (tree / "tmp").write_text("y = 9\n")
    os.utime(tree / "tmp", ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(tree / "tmp", target)
    reads.clear()
    assert cached(tree) != before and reads == [str(target)]


def test_ignored_paths_stay_ignored(tree, reads):
    cached = TreeFingerprint(IGNORE, clock=later)
    before = cached(tree)
    (tree / ".git" / "index").write_bytes(b"refreshed by git status")
    (tree / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "pkg" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"new")
    (tree / "pkg" / "b.pyc").write_bytes(b"rewritten")
    reads.clear()
    assert cached(tree) == before == tree_fingerprint(tree, IGNORE)
    assert not any(".git" in p or "pycache" in p or p.endswith(".pyc") for p in reads)


def test_the_guard_scans_with_its_cache_and_still_sees_a_same_size_edit(make_agent, workdir, reads):
    """Through the agent: an unchanged tree is not read again; a same-size edit with the mtime put
    back lets the earlier call run again."""
    agent = make_agent(config=AgentConfig(middleware=[RepeatGuardConfig(stop_after=5)]))
    guard = next(layer for layer in agent.middleware if isinstance(layer, RepeatGuard))
    guard.fingerprint = TreeFingerprint(guard.config.ignore, clock=later)
    assert "alpha" in call(agent, "read", path="notes.txt")
    reads.clear()
    assert "already ran" in call(agent, "read", path="notes.txt")
    assert not any(p.endswith(("calc.py", "notes.txt")) for p in reads)  # the tree from the cache
    same_size_rewrite(workdir / "notes.txt", "ALPHA\nbeta\ngamma\n")
    assert "ALPHA" in call(agent, "read", path="notes.txt")
