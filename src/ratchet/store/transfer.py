"""A run continued away from the store: its directory as plain data, worked on in a scratch store.

A :class:`RunJob` sent to another process or machine (by any ``contracts.Executor``) carries the
files of the run it continues (:func:`directory_files`: none for a new run, a checkpoint for an
interrupted one) and the work to do on them; the worker runs it in a scratch store of its own
(:func:`scratch_run`) and sends the run's files back, which the driver writes
(:func:`replace_run_files`, done by :func:`continue_runs` as each result arrives). So the store has
one writer however many machines work for it, and a worker that dies takes its scratch directory
with it: nothing it did reached the store, and a retried job is counted (calls, tokens,
candidates) once.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.contracts import Executor
from ratchet.store.files import write_bytes_atomic
from ratchet.store.run import Run
from ratchet.store.runstore import RunStore

#: Files of a directory that are not part of its content (partial writes of a killed writer).
_SKIP_SUFFIXES = (".tmp",)


def directory_files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path (empty when it does not exist)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(_SKIP_SUFFIXES) and ".tmp." not in p.name}


def write_files(root: Path, contents: dict[str, bytes]) -> None:
    for rel, data in contents.items():
        write_bytes_atomic(root / rel, data)


@contextmanager
def scratch_run(run_id: str, run_files: dict[str, bytes], **dirs: dict[str, bytes]) -> Iterator[tuple[Path, Run]]:
    """A temporary store holding run ``run_id`` as ``run_files`` (and each of ``dirs`` as a folder
    beside the store's ``runs/``); yields its root and the opened run, and deletes it all after."""
    with tempfile.TemporaryDirectory(prefix="ratchet-scratch-") as scratch:
        root = Path(scratch)
        for name, files in dirs.items():
            write_files(root / name, files)
        write_files(root / "runs" / run_id, run_files)
        yield root, RunStore(root / "runs").open_run(run_id)


def replace_run_files(store: Any, run_id: str, files: dict[str, bytes]) -> Run:
    """Make run ``run_id`` of ``store`` hold exactly ``files``, then rebuild its index rows.
    Idempotent: a driver killed halfway through this repairs it by doing it again."""
    run = store.open_run(run_id)
    for stale in set(directory_files(run.dir)) - set(files):
        (run.dir / stale).unlink(missing_ok=True)
    write_files(run.dir, files)
    run.reindex()
    return run


@dataclass(frozen=True)
class RunJob:
    """Continue run ``run_id`` (now ``run_files``) with ``work(root, run)`` on a scratch copy whose
    ``root`` also holds each of ``dirs`` as a folder. ``work`` must pickle (a module-level function
    or a partial of one), so that any executor can ship the job."""

    run_id: str
    run_files: dict[str, bytes]
    work: Callable[[Path, Run], Any]
    dirs: dict[str, dict[str, bytes]] = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    run_id: str
    files: dict[str, bytes]
    value: Any
    """What ``work`` returned."""


def run_job(job: RunJob) -> RunResult:
    """Do ``job`` in a scratch store (on whichever worker runs it); its run's files come back."""
    with scratch_run(job.run_id, job.run_files, **job.dirs) as (root, run):
        value = job.work(root, run)
        return RunResult(job.run_id, directory_files(run.dir), value)


def continue_runs(executor: Executor, jobs: Sequence[RunJob], store: Any,
                  given_up: Callable[[RunJob, Any], RunResult] | None = None) -> Iterator[RunResult]:
    """Each job on ``executor``; each result's files are written into ``store`` before it is yielded.
    ``given_up(job, error)`` stands in for a job the executor gave up on (its worker died on every
    attempt); without it that ends the map with the error."""
    kwargs = {} if given_up is None else {"given_up": lambda i, error: given_up(jobs[i], error)}
    for result in executor.map(run_job, jobs, **kwargs):
        replace_run_files(store, result.run_id, result.files)
        yield result
