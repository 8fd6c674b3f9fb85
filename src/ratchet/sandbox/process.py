"""The worker process seen from the parent: its pipes, framed replies read against a deadline,
and killing it with everything it started.

:class:`ratchet.sandbox.sandbox.Sandbox` decides when to start, call, recycle and kill a worker;
this module is how: the length-prefixed frames both sides speak (the worker's end is
``worker.py``), the poll that bounds every read, and the process-group and uid sweep that leaves
nothing of a killed worker running.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ratchet.sandbox.errors import HarnessCrashed, HarnessError, HarnessMemoryError, HarnessTimeout
from ratchet.sandbox.isolation import Mechanism

HEADER = struct.Struct(">I")
"""The frame header: the body's length in bytes, big-endian."""
_STDERR_TAIL = 4000


class WorkerDied(Exception):
    """The worker closed its pipe (it exited or was killed)."""


class ReplyLate(Exception):
    """No reply before the deadline."""


class WorkerProcess:
    """One running worker process and its pipes. Not thread-safe; the Sandbox serialises use."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr_path: Path, uid: int | None, mech: Mechanism):
        self.proc = proc
        self.stderr_path = stderr_path
        self.uid = uid
        self.mech = mech
        assert proc.stdin is not None and proc.stdout is not None
        self.fd_in = proc.stdin.fileno()
        self.fd_out = proc.stdout.fileno()
        self.buf = bytearray()
        self.poller = select.poll()
        self.poller.register(self.fd_out, select.POLLIN | select.POLLHUP | select.POLLERR)
        self.killed_by_us = False
        self.recycle = False

    def send(self, payload: bytes) -> None:
        data = memoryview(HEADER.pack(len(payload)) + payload)
        try:
            while data:
                data = data[os.write(self.fd_in, data) :]
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied() from exc

    def receive(self, deadline: float, limit: int) -> bytes:
        buf = self.buf
        while True:
            if len(buf) >= 4:
                (size,) = HEADER.unpack_from(buf)
                if size > limit:
                    raise OverflowError(size)
                if len(buf) >= 4 + size:
                    body = bytes(buf[4 : 4 + size])
                    del buf[: 4 + size]
                    return body
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.poller.poll(max(remaining * 1000.0, 0.0)):
                raise ReplyLate()
            chunk = os.read(self.fd_out, 1 << 16)
            if not chunk:
                raise WorkerDied()
            buf += chunk

    def kill(self) -> None:
        """End the worker and everything it started, at once (no grace: its state is disposable)."""
        self.killed_by_us = True
        kill_tree(self.proc, self.uid)

    def stderr_tail(self) -> str:
        try:
            with open(self.stderr_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - _STDERR_TAIL))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def death_error(self, when: str, *, cpu_seconds: int, clean: Callable[[str], str]) -> HarnessError:
        """Classify how this worker, which stopped answering, ended (``when``: "during f", ...);
        ``clean`` strips host paths from its stderr tail."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        # bubblewrap reports a child killed by signal N as exit status 128 + N.
        sig = -code if code < 0 else (code - 128 if self.mech.name == "bwrap" and code > 128 else None)
        tail = clean(self.stderr_tail())
        if sig == signal.SIGXCPU:
            return HarnessTimeout(
                f"the worker spent its CPU-time budget of {cpu_seconds} s {when}",
                limit="cpu",
                traceback_tail=tail,
            )
        if "MemoryError" in tail or "Cannot allocate memory" in tail:
            return HarnessMemoryError(f"the worker ran out of memory {when}", traceback_tail=tail)
        if sig is not None and 0 < sig < signal.NSIG:
            how = f"was killed by {signal.Signals(sig).name}"
            if sig == signal.SIGKILL and not self.killed_by_us:
                how += " (the code may have killed its own process, or the system ran out of memory)"
        else:
            how = f"exited with status {code}"
        return HarnessCrashed(f"the worker process {how} {when}", traceback_tail=tail)


def kill_tree(proc: subprocess.Popen[bytes], uid: int | None) -> None:
    # The worker leads its own process group (start_new_session). Under bubblewrap, killing bwrap
    # ends the PID namespace (--die-with-parent), which ends every process in it, however
    # double-forked; the kernel does that asynchronously, so we also wait until no process of the
    # worker's unique uid is left. Without bubblewrap that uid is how escaped processes are found.
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if uid is not None:
        kill_uid(uid)
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def kill_uid(uid: int) -> None:
    """SIGKILL every process whose real uid is ``uid`` (a uid only this Sandbox's worker uses)
    until none is left (at most about two seconds)."""
    for _ in range(200):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as fh:
                    for line in fh:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                os.kill(int(entry), signal.SIGKILL)
                                found = True
                            break
            except (OSError, ValueError):
                continue
        if not found:
            return
        time.sleep(0.01)
