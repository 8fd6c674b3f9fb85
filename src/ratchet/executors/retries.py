"""What an executor counts about work it ran: tasks, attempts lost to dead workers, retries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

#: Called once per attempt lost to a dead worker: ``{"index", "attempt", "retried", "error"}``.
OnLost = Callable[[dict[str, Any]], None]


@dataclass
class ExecutorStats:
    """Counts since the executor was made. ``lost``: attempts whose worker (or node) died;
    ``retried``: of those, the ones run again; ``given_up``: tasks that ran out of retries."""

    tasks: int = 0
    done: int = 0
    lost: int = 0
    retried: int = 0
    given_up: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
