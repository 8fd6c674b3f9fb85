"""Settings of the sandbox: limits per call and per worker, imports, isolation."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import Field

from ratchet.config import Settings

#: In ``allowed_imports``, this entry stands for every standard-library module name of the
#: interpreter (``sys.stdlib_module_names``).
STDLIB = "@stdlib"

#: Standard-library modules refused by default: they start processes, open sockets or call C
#: directly. The OS isolation is the real barrier; refusing them gives a clear error early.
DEFAULT_BLOCKED = [
    "ctypes",
    "_ctypes",
    "subprocess",
    "_posixsubprocess",
    "multiprocessing",
    "_multiprocessing",
    "socket",
    "_socket",
    "ssl",
    "_ssl",
    "pty",
]


#: What of the host a worker needs besides its interpreter: programs, shared libraries, the
#: dynamic loader's cache and the time zone. Deliberately not ``/usr/local/src``, ``/usr/src``,
#: ``/usr/share``, ``/opt``, ``/srv``, ``/var``, ``/home`` or ``/work``: checkouts, run stores and
#: model files live in such places.
SYSTEM_PATHS = [
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/usr/libexec",
    "/usr/local/bin",
    "/usr/local/lib",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/alternatives",
]


class SandboxConfig(Settings):
    """How candidate code is run: one isolated, persistent worker process per candidate."""

    call_timeout_s: float = Field(2.0, gt=0)
    """Wall-clock limit for one call (each item of a batch has its own). The worker raises inside
    the code at the limit; if the code does not yield, the parent kills the worker's whole process
    tree ``kill_grace_s`` later. Either way the call fails with HarnessTimeout."""

    start_timeout_s: float = Field(20.0, gt=0)
    """Wall-clock limit for loading the candidate's modules in a fresh worker (the interpreter's
    own start-up comes on top). Past it the load fails with HarnessTimeout naming the line it was
    stopped at, and, like a syntax error, every later call of the same Sandbox fails at once with
    that error instead of starting a worker and waiting again."""

    candidate_budget_s: float | None = Field(600.0, gt=0)
    """Wall-clock seconds one Sandbox (one candidate) may spend in its worker over its whole life:
    starts, loads and calls together. Once spent, the call running finishes (or times out) and
    every later call fails at once with HarnessTimeout (limit "budget"), so a candidate whose calls
    each run near ``call_timeout_s`` cannot hold an evaluation for hours. None: no budget."""

    kill_grace_s: float = Field(0.5, ge=0)
    """Extra time after ``call_timeout_s`` before the parent kills a worker that ignored the
    in-process timeout (a C-level loop, a candidate catching BaseException)."""

    cpu_seconds: int = Field(600, gt=0)
    """CPU-time budget of one worker over its whole life (RLIMIT_CPU). The worker asks to be
    recycled at 80% of it, so long evaluations restart it between calls; spending it inside one
    call kills the worker with SIGXCPU (HarnessTimeout, limit "cpu")."""

    memory_mb: int = Field(1024, ge=128)
    """Address-space limit of the worker (RLIMIT_AS), in MiB. Python with numpy loaded maps about
    100 MiB (measured), so the default leaves about 900 MiB to the candidate."""

    max_processes: int = Field(16, ge=1)
    """Most processes and threads the worker's unprivileged user may have (RLIMIT_NPROC): the
    fork-bomb guard. Each worker runs under its own unused uid, so the count is per worker."""

    max_file_mb: int = Field(16, ge=0)
    """Largest file the code may write (RLIMIT_FSIZE), in MiB; a write past it fails with EFBIG."""

    max_output_kb: int = Field(256, ge=1)
    """Largest JSON result of one call and most text one call may print, in KiB. Past it the call
    fails with HarnessOutputError."""

    allowed_imports: list[str] = Field(default_factory=lambda: [STDLIB, "numpy"])
    """Modules the code may import (an entry allows its submodules too; ``@stdlib`` means every
    standard-library module). Checked on every import in the worker, including imports made by
    allowed modules. Packages above an allowed module (``ratchet`` for
    ``ratchet.envs.harnesslib``) may be imported, but nothing else in them."""

    blocked_imports: list[str] = Field(default_factory=lambda: list(DEFAULT_BLOCKED))
    """Modules refused even when ``allowed_imports`` covers them (process, socket and C-call
    modules of the standard library by default)."""

    extra_import_paths: list[Path] = Field(default_factory=list)
    """Read-only directories added to the front of the worker's ``sys.path`` (and made visible
    inside the sandbox even under a hidden path), e.g. a harness helper library."""

    system_paths: list[Path] = Field(default_factory=lambda: [Path(p) for p in SYSTEM_PATHS])
    """Host paths bound read-only into the bubblewrap sandbox besides the interpreter's prefixes,
    ``extra_import_paths`` and the candidate's own files: the system's programs, shared libraries
    and a few files of ``/etc`` the dynamic loader reads. Nothing else of the host filesystem
    exists inside (no checkout, run store, model cache or home); paths missing here are skipped."""

    hidden_paths: list[Path] = Field(default_factory=lambda: [Path.home()])
    """Directories and files the code must not see even where they lie inside something bound in
    (an empty read-only view replaces them), e.g. a secret directory under the interpreter's prefix
    or a file of the scratch directory that a policy does not let the code read. Under
    bubblewrap anything not bound is absent anyway (the home, run stores, checkouts); without
    bubblewrap nothing can be hidden."""

    isolation: Literal["auto", "bwrap", "unshare", "none"] = "auto"
    """OS isolation: ``bwrap`` (bubblewrap: read-only root, private /tmp, hidden paths, new network,
    PID, IPC and UTS namespaces), ``unshare`` (network namespace only), ``none`` (resource limits
    and an unprivileged uid only). ``auto`` takes the strongest that works here and warns loudly
    when it has to fall back. Asking for a mechanism that is missing is an error."""

    network: bool = False
    """Give the code the host's network. Off by default: the worker gets an empty network namespace."""

    scratch_dir: Path | None = None
    """The one writable directory (the worker's working directory). Default: a fresh temporary
    directory per Sandbox, removed on close; a given directory is kept."""

    python: str = Field(default_factory=lambda: sys.executable)
    """Interpreter that runs the worker (it must be able to import the allowed modules)."""
