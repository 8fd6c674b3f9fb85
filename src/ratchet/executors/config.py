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
    """ray: model calls of remote evaluations in flight at once — with ``model_server: driver``, in
    the driver; with ``node``, at each node's model server (the driver waits on as many). Either way
    every call goes through the run's one budget and journal, in the driver (``executors/gateway.py``)."""
    model_server: Literal["auto", "node", "driver"] = "auto"
    """ray: where the model calls of remote evaluations are computed. ``node``: by one model server
    actor per node, reused by every task on that node, the model loaded (its file sent) once per
    node, while the driver still answers replays from its journal and accounts every call; a model
    that cannot be copied, or nodes with no room for a server, stop the run at its start.
    ``driver``: by the driver's own model, in the driver (the way for a model that cannot be copied
    to the nodes, such as an HTTP one, whose server computes anyway). ``auto``: ``node`` where the
    model can be copied (scripted with a responder, a ``local:`` GGUF) and some node has room for a
    server beside a task, else ``driver`` (logged). See ``executors/node_server.py``."""
    model_server_threads: int = Field(default=1, ge=1)
    """ray, ``model_server: node``: threads each node's model server computes with — the CPUs it asks
    the scheduler for, and an embedded model's ``n_threads``. Each node needs this many CPUs free
    beside its tasks' when the run starts."""
    model_server_gpus: float = Field(default=0.0, ge=0)
    """ray, ``model_server: node``: GPUs each node's model server asks for (an embedded model that
    offloads layers); nodes without them get no server."""
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    """ray: a Ray runtime environment for the tasks (``env_vars``, ``working_dir``, ``pip``…); the
    driver's PYTHONPATH is added to ``env_vars`` so workers import the same Ratchet."""
