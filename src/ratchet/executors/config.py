"""Where work runs: the executor's settings (``executor:`` in a run's YAML, ``--executor`` on the CLI)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ratchet.config import Settings


class ExecutorConfig(Settings):
    """Local processes (the default) or a Ray cluster. Results always come back to the driver,
    which alone writes the run store; only the work itself is spread out."""

    kind: Literal["local", "ray"] = "local"
    """``local``: a process pool on this machine (one worker: in this process); ``ray``: Ray tasks
    on a cluster (``ray`` extra)."""
    workers: int | None = Field(default=None, ge=1)
    """Most units of work in flight at once. local: processes (None: the caller's default, one in
    this process for the engine and the suite); ray: tasks in flight (None: the cluster's CPUs
    divided by ``num_cpus``)."""
    address: str | None = None
    """ray: the cluster to join — ``auto`` (a cluster started with ``ray start`` on this machine),
    ``ray://HOST:10001`` (Ray client) or ``HOST:6379``; None starts a private Ray instance here."""
    num_cpus: float = Field(default=1.0, gt=0)
    """ray: CPUs each task asks the scheduler for."""
    num_gpus: float = Field(default=0.0, ge=0)
    """ray: GPUs each task asks for (0 for harness search and CPU evaluation)."""
    max_retries: int = Field(default=2, ge=0)
    """ray: times a task whose worker or node died is run again before the run gives it up. A lost
    attempt's results never reach the store, so nothing it did is counted."""
    local_cpus: int | None = Field(default=None, ge=1)
    """ray with no ``address``: CPUs of the private instance (None: Ray's own count)."""
    model_threads: int = Field(default=4, ge=1)
    """ray: model calls of remote evaluations the driver answers at once (they all go through the
    run's one budget and journal, in the driver; see ``executors/gateway.py``)."""
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    """ray: a Ray runtime environment for the tasks (``env_vars``, ``working_dir``, ``pip``…); the
    driver's PYTHONPATH is added to ``env_vars`` so workers import the same Ratchet."""
