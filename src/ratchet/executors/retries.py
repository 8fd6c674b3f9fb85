"""What an executor counts about work it ran: tasks, attempts lost to dead workers, retries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ratchet.contracts import RatchetError

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


class UnitLost(RatchetError):
    """A unit whose worker died on every one of its ``attempts`` (``max_retries`` + 1)."""

    def __init__(self, index: int, attempts: int, error: str) -> None:
        super().__init__(f"task {index} was lost {attempts} times (its worker died each time): {error}",
                         hint="raise executor.max_retries, or look for the cause in the Ray logs "
                              "(/tmp/ray/session_latest/logs)")
        self.index, self.attempts, self.error = index, attempts, error

    def __reduce__(self) -> tuple[Any, ...]:  # keyword-free arguments: it pickles like any error
        return (UnitLost, (self.index, self.attempts, self.error))
