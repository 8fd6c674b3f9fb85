"""The one way the dashboard turns names from a URL into files: inside the run store, or refused.

A run id, a run-relative path or a serving run's name all come from the address bar. Each is
checked lexically (one path component, or a relative path without ``..``) and then physically: the
file's real path, every symlink resolved, must lie inside the store's real root, and the last hop
must not be a symlink at all. So ``../../etc/passwd``, an encoded ``%2e%2e``, an absolute path, and
a symlink planted in a run directory that points out of the store are all refused the same way.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException

from ratchet.contracts import RatchetError
from ratchet.store.run import safe_name, safe_relpath


def run_dir(root: Path, run_id: str) -> Path:
    """The directory of run ``run_id`` in the store at ``root``; 404 for anything else."""
    try:
        name = safe_name(run_id, "run id")
    except RatchetError as exc:
        raise HTTPException(404, str(exc)) from None
    path = confined(root, name)
    if not path.is_dir():
        raise HTTPException(404, f"no run {run_id!r} in this store")
    return path


def confined(root: Path, relpath: str | Path) -> Path:
    """``root / relpath`` when it really is inside ``root`` (symlinks resolved); else 404.

    A refusal says nothing about what is outside the store (no "exists but forbidden")."""
    try:
        rel = safe_relpath(relpath)
    except RatchetError:
        raise HTTPException(404, "no such file in the run store") from None
    real_root = root.resolve()
    path = root / rel
    if path.is_symlink() or not path.resolve().is_relative_to(real_root):
        raise HTTPException(404, "no such file in the run store")
    return path
