"""Where rollouts and evaluations run: local processes now (Ray can slot in behind the same
``contracts.Executor`` later)."""

from ratchet.executors.local import LocalExecutor, default_workers

__all__ = ["LocalExecutor", "default_workers"]
