"""Whether a process recorded earlier still runs: the one liveness check the project shares.

A record names a process by its pid *and* the start time the kernel gives it, because pids are
reused: a new process that happens to get a dead one's pid has another start time, so it never
passes for the dead one. Training claims (``online.claims``), the learning server's loops
(``online.supervision``), the runtime's sub-agents and scheduler, and the run store (a run whose
owner is gone without marking it is shown ``interrupted``) all read their records through here.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

_PROC = Path("/proc")


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start time in clock ticks since boot) of a process from /proc, None if gone."""
    try:
        raw = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], fields[19]


def _has_proc() -> bool:
    return (_PROC / "self" / "stat").exists()


def process_start(pid: int) -> str | None:
    """The process's start time as /proc records it; None where there is no /proc or no such
    process (a zombie's is still given: it has not been reaped)."""
    if not _has_proc():
        return None
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def process_alive(pid: int, started: str | int | None = None) -> bool:
    """Whether process ``pid`` of this host runs and is the one that started at ``started``.

    A zombie (exited, not yet reaped by its parent) counts as gone: a SIGKILLed child stays a zombie
    until its parent notices, and what it held must not wait for that.
    """
    if _has_proc():
        stat = _proc_stat(pid)
        if stat is None or stat[0] in ("Z", "X"):
            return False
        return started is None or stat[1] == str(started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is just not ours
        return True
    return True


@dataclass(frozen=True)
class ProcessRecord:
    """A process as written into a record: host, pid, and the pid's start time."""

    host: str
    pid: int
    started: str | None

    @classmethod
    def current(cls) -> Self:
        """This process."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start(pid))

    @classmethod
    def of(cls, pid: int) -> Self:
        """Process ``pid`` of this host (e.g. a child just started)."""
        return cls(socket.gethostname(), pid, process_start(pid))

    @classmethod
    def load(cls, data: Any) -> Self | None:
        """The record from its JSON form; None for anything that is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not isinstance(data.get("host"), str):
            return None
        started = data.get("started")
        return cls(data["host"], data["pid"], None if started is None else str(started))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def local(self) -> bool:
        return self.host == socket.gethostname()

    def gone(self) -> bool:
        """True only when the process is known to have ended: it ran on this host and is no longer
        there (another host's process cannot be checked from here, so it is never called gone)."""
        return self.local and not process_alive(self.pid, self.started)
