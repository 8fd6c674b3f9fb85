"""Who holds a training claim on queued samples, and whether that holder still exists.

A claim is a lease: it names its claimer (host, process id, the process's start time, and a random
token) and carries a deadline. :class:`~ratchet.online.queue.TurnQueue` takes samples back when the
deadline has passed or, for a claimer on the same host, as soon as its process is gone. So a
trainer that crashes or is SIGKILLed in the middle of a step never wedges the samples it held.

The process start time guards against pid reuse: a new process that happens to get the dead
trainer's pid has another start time, so it does not keep the dead trainer's claims alive. The
token tells apart two claimers of one process (a training loop restarted inside the same Ray
actor does not inherit the claims of the loop that failed there).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from typing import Protocol, Self

from ratchet.processes import process_alive, process_start

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Claimer:
    """The identity recorded with every claim: host, pid, the pid's start time, a random token."""

    host: str
    pid: int
    started: str | None
    token: str

    @classmethod
    def new(cls) -> Claimer:
        """A claimer for this process with a token of its own."""
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, started=process_start(pid), token=uuid.uuid4().hex)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


_default: dict[int, Claimer] = {}
_default_lock = threading.Lock()


def default_claimer() -> Claimer:
    """The claimer of this process when a caller names none (one per pid, so a fork gets its own)."""
    pid = os.getpid()
    with _default_lock:
        if pid not in _default:
            _default[pid] = Claimer.new()
        return _default[pid]


def claimer_alive(host: str | None, pid: int | None, started: str | None) -> bool | None:
    """True/False for a claimer on this host; None when that cannot be told from here.

    A claimer on another host (a Ray cluster on shared storage) is judged by its deadline only.
    """
    if host is None or pid is None:
        return False  # a claim recorded without a claimer (older queue files) has no one to wait for
    if host != socket.gethostname():
        return None
    return process_alive(int(pid), started)


class Renewable(Protocol):
    def renew(self, claimer: Claimer, lease_s: float) -> int: ...
    def close(self) -> None: ...


class LeaseKeeper:
    """Renews every claim of ``claimer`` from a background thread, every third of the lease.

    A training step may run longer than any lease worth choosing (minutes for a 0.5B model on one
    core), so the claimer's liveness is shown by renewing rather than by a long deadline; torch
    releases the GIL in its kernels, so the thread keeps up during a backward pass. Use as a context
    manager or call :meth:`start` / :meth:`stop`.
    """

    def __init__(self, queue: Renewable, claimer: Claimer, lease_s: float) -> None:
        self.queue = queue
        self.claimer = claimer
        self.lease_s = lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ratchet-lease", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.lease_s / 3):
                try:
                    self.queue.renew(self.claimer, self.lease_s)
                except Exception:  # a busy or briefly unreadable file: the next round retries
                    log.exception("renewing the training claims failed; retrying")
        finally:
            self.queue.close()  # this thread's own connection

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["Claimer", "LeaseKeeper", "claimer_alive", "default_claimer", "process_alive", "process_start"]
