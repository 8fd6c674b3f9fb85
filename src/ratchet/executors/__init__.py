"""Where rollouts, evaluations and synthesis jobs run: local processes (the default) or Ray tasks,
behind one ``contracts.Executor``; long-lived loops run as Ray actors (:mod:`ratchet.executors.ray`).

Whatever the executor, work comes back to the driver as plain results and the driver writes the
run store. :func:`build_executor` makes the one a config names.
"""

from ratchet.executors.config import ExecutorConfig
from ratchet.executors.local import LocalExecutor, default_workers
from ratchet.executors.retries import ExecutorStats, OnLost, UnitLost


def build_executor(config: ExecutorConfig | None = None, *, local_workers: int = 1,
                   on_lost: OnLost | None = None):
    """The executor ``config`` names. ``local_workers`` is the local worker count when the config
    leaves it open (1: in this process, as the engine and the suite run by default)."""
    config = config or ExecutorConfig()
    if config.kind == "ray":
        from ratchet.executors.ray import RayExecutor  # deferred: imports ray, an optional dependency

        return RayExecutor(config, on_lost=on_lost)
    return LocalExecutor(config.workers or local_workers)


__all__ = ["ExecutorConfig", "ExecutorStats", "LocalExecutor", "OnLost", "UnitLost", "build_executor", "default_workers"]
