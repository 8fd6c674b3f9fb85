"""Child processes the server starts, watches and restarts, and that cannot outlive or hang it.

Three dangers of loops in their own processes, and what this module does about each:

* **A child that outlives its parent** (the server is SIGKILLed: the judge and a trainer holding
  gigabytes keep running). Each child asks the kernel for SIGTERM when its parent dies
  (``prctl(PR_SET_PDEATHSIG)`` on Linux) and also watches the read end of a pipe whose only write
  end the parent holds: the parent's death closes it, whatever the platform. A pid file per loop
  (``loops/NAME.pid``) lets the next server on the same run find and stop a child that escaped both.
* **Shutdown that hangs on a dead child.** The stop signal is that pipe, not a shared lock: the
  parent closes its end, which no dead child can block (a ``multiprocessing.Event`` is a condition
  variable whose ``set()`` waits for every sleeper to wake, including one that was SIGKILLed).
  Then the parent joins with a deadline, terminates, and kills.
* **A dead loop that stays dead.** :class:`Supervisor` checks its children every ``watch_s`` and
  restarts a dead one after a backoff, at most ``max_restarts`` times within ``restart_window_s``
  (:class:`RestartPolicy`); every death and restart is logged and written to ``loops/loops.json``,
  which ``ratchet serve status`` shows.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.processes import process_alive, process_start
from ratchet.store.files import read_json, write_json_atomic

log = logging.getLogger("ratchet.online.supervision")

#: Supervision state of a run's loops, in its ``loops/`` directory beside the pid files.
STATUS_FILE = "loops.json"
_PR_SET_PDEATHSIG = 1


class StopSignal:
    """What a loop polls to know it should stop: ``is_set()`` / ``wait(timeout)`` like an Event.

    Set when the parent closes its end of the pipe (an orderly stop) or dies (the kernel closes it),
    or when this process's parent is no longer ``parent_pid``. Nothing here can block on another
    process: a dead parent makes the pipe readable, it does not hold a lock.
    """

    def __init__(self, reader: Connection, parent_pid: int) -> None:
        self._reader = reader
        self.parent_pid = parent_pid
        self._set = False
        # Held by the start-up guard while it decides to end the process, and by the loop's first
        # look at the signal: one of the two owns the stop, never both (see guard_startup).
        self._lock = threading.Lock()
        self._asked = False

    def __getstate__(self) -> dict[str, Any]:
        # Sent to the child at spawn: a lock does not pickle, and the child needs its own anyway.
        return {"_reader": self._reader, "parent_pid": self.parent_pid}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_reader"], state["parent_pid"])

    @classmethod
    def pair(cls, ctx: Any = None) -> tuple[StopSignal, Connection]:
        """(the signal for one child, the write end the parent keeps and closes to stop it)."""
        reader, writer = (ctx or mp).Pipe(duplex=False)
        return cls(reader, os.getpid()), writer

    def _arrived(self, timeout: float = 0.0) -> bool:
        return bool(self._reader.poll(timeout)) or os.getppid() != self.parent_pid

    def _first_look(self) -> None:
        if not self._asked:
            with self._lock:
                self._asked = True

    def is_set(self) -> bool:
        self._first_look()
        if not self._set:
            self._set = self._arrived()
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        self._first_look()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.is_set():
            # Polling the parent pid at least twice a second covers platforms without pipe EOF on death.
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                break
            if self._reader.poll(left):
                self._set = True
        return self._set

    def guard_startup(self, name: str, poll_s: float = 0.2) -> threading.Thread:
        """In a child, before its slow imports and model load: until the loop first looks at this
        signal, a thread of this process watches it and ends the process (exit code 0) when the
        stop comes.

        Why: a loop polls its stop between units of work, and its start-up (imports, a trainer
        loading and dequantizing its model: seconds to a minute under load) is no unit of work; a
        stop sent then went unseen until the parent's deadline, which terminated the loop (exit
        −15). Nothing is lost by ending it there: a loop claims work only after its first look.
        """

        def watch() -> None:
            while True:
                arrived = self._arrived(poll_s)
                with self._lock:
                    if self._asked:
                        return  # the loop has the stop in hand from here on
                    if arrived:
                        logging.getLogger(f"ratchet.online.{name}").info(
                            "the %s loop was stopped while it started; exiting", name)
                        logging.shutdown()
                        os._exit(0)

        thread = threading.Thread(target=watch, name=f"{name}-startup-stop", daemon=True)
        thread.start()
        return thread

    def close_parent_copy(self) -> None:
        """The parent's copy of the read end, once the child has its own."""
        self._reader.close()


def die_with_parent(parent_pid: int) -> None:
    """In a child: get SIGTERM when the parent dies (Linux), and exit now if it is already gone."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
                log.warning("prctl(PR_SET_PDEATHSIG) failed (errno %d); the stop pipe still ends this loop",
                            ctypes.get_errno())
        except (OSError, AttributeError):
            log.warning("no prctl here; the stop pipe still ends this loop when the server dies")
    if os.getppid() != parent_pid:  # the parent died before the signal was asked for: none would come
        os._exit(1)


# ---------------------------------------------------------------------------------------------
# Pid files: one loop of a run at a time
# ---------------------------------------------------------------------------------------------


def write_pidfile(path: Path, pid: int) -> None:
    """Record child ``pid`` and this process (its parent), each with its start time (pid reuse)."""
    write_json_atomic(path, {"pid": pid, "started": process_start(pid), "parent_pid": os.getpid(),
                             "parent_started": process_start(os.getpid())})


def clear_stale(path: Path, what: str, kill_wait_s: float = 5.0) -> str | None:
    """Make sure the process recorded in pid file ``path`` no longer runs; returns what was done.

    A recorded process that still runs while the server that started it is gone is an orphan: it
    is sent SIGTERM, then SIGKILL after ``kill_wait_s``. One whose server still runs (another
    ``ratchet serve`` on the same run) is refused: two trainers on one run would train twice.
    """
    try:
        record = read_json(path)
    except RatchetError:
        record = None  # a damaged pid file names no process
    if not isinstance(record, dict) or "pid" not in record:
        path.unlink(missing_ok=True)
        return None
    pid, parent = int(record["pid"]), int(record.get("parent_pid") or 0)
    if not process_alive(pid, record.get("started")):
        path.unlink(missing_ok=True)
        return None
    if parent and parent != os.getpid() and process_alive(parent, record.get("parent_started")):
        raise RatchetError(f"the {what} loop of this run (pid {pid}) belongs to a server that is still running "
                           f"(pid {parent})", hint=f"stop that server first (Ctrl-C, or kill {parent}), or serve "
                                                   "another run (--run NAME)")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + kill_wait_s
    while process_alive(pid, record.get("started")) and time.monotonic() < deadline:
        time.sleep(0.05)
    how = "SIGTERM"
    if process_alive(pid, record.get("started")):
        os.kill(pid, signal.SIGKILL)
        how = "SIGKILL"
    path.unlink(missing_ok=True)
    message = f"stopped a {what} loop left running by an earlier server (pid {pid}, {how})"
    log.warning(message)
    return message


# ---------------------------------------------------------------------------------------------
# Restarts
# ---------------------------------------------------------------------------------------------


class RestartPolicy:
    """Restart after ``backoff_s``, doubling (to ``backoff_max_s``) with each restart in the last
    ``window_s``; none once ``max_restarts`` happened in that window."""

    def __init__(self, max_restarts: int, window_s: float, backoff_s: float, backoff_max_s: float) -> None:
        self.max_restarts = max_restarts
        self.window_s = window_s
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s

    def delay(self, restarts: list[float], now: float) -> float | None:
        """Seconds to wait before the next restart given earlier restart times; None: give up."""
        recent = [t for t in restarts if now - t < self.window_s]
        if len(recent) >= self.max_restarts:
            return None
        return min(self.backoff_max_s, self.backoff_s * 2 ** len(recent))


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class _Child:
    name: str
    proc: Any = None
    writer: Connection | None = None
    state: str = "starting"
    restarts: list[float] = field(default_factory=list)
    last_exit: int | None = None
    last_exit_at: float | None = None
    restart_at: float | None = None


#: Starts one loop's process: (name, the stop signal it must poll) -> a started process.
Spawn = Callable[[str, StopSignal], Any]


class Supervisor:
    """Starts named child processes, restarts the ones that die, stops them all without hanging."""

    def __init__(self, names: list[str], spawn: Spawn, policy: RestartPolicy, state_dir: Path, *,
                 watch_s: float = 0.5, ctx: Any = None) -> None:
        self._spawn = spawn
        self.policy = policy
        self.state_dir = Path(state_dir)
        self.watch_s = watch_s
        self._ctx = ctx
        self.children = {name: _Child(name) for name in names}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        #: Set once every child has exited: the watcher thread lives until then (see _watch).
        self._children_gone = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ starting

    def _pidfile(self, name: str) -> Path:
        return self.state_dir / f"{name}.pid"

    def _launch(self, child: _Child) -> None:
        stop, writer = StopSignal.pair(self._ctx)
        child.proc = self._spawn(child.name, stop)
        stop.close_parent_copy()
        child.writer, child.state, child.restart_at = writer, "running", None
        write_pidfile(self._pidfile(child.name), child.proc.pid)
        log.info("started the %s loop (pid %d)", child.name, child.proc.pid)

    def start(self) -> Supervisor:
        """Stop what an earlier server left running on this run, start every child, begin watching.

        Call from a thread that lives as long as the children: Linux sends the parent-death signal
        when the thread that started a child exits.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for name in self.children:
            clear_stale(self._pidfile(name), name)
        with self._lock:
            for child in self.children.values():
                self._launch(child)
            self.write_status()
        self._thread = threading.Thread(target=self._watch, name="loop-supervisor", daemon=True)
        self._thread.start()
        return self

    # ------------------------------------------------------------------ watching

    def _watch(self) -> None:
        while not self._stopping.wait(self.watch_s):
            try:
                self.check()
            except Exception:  # the watcher must outlive anything one check trips over
                log.exception("checking the loops failed")
        # A child this thread restarted asked for SIGTERM when its parent dies, and on Linux its
        # "parent" is this thread: returning now would kill it (exit −15) while it is still
        # finishing its orderly stop. So the thread stays until stop() has seen every child exit.
        self._children_gone.wait()

    def check(self) -> None:
        """One supervision pass: note children that died, restart those whose backoff is over."""
        with self._lock:
            if self._stopping.is_set():
                return
            changed = False
            now = time.monotonic()
            for child in self.children.values():
                if child.state == "running" and not child.proc.is_alive():
                    changed = True
                    self._died(child, now)
                elif child.state == "restarting" and child.restart_at is not None and now >= child.restart_at:
                    changed = True
                    child.restarts.append(now)
                    try:
                        self._launch(child)
                    except Exception:  # e.g. out of memory or fds: counts as one more death
                        log.exception("could not restart the %s loop", child.name)
                        self._died(child, now)
            if changed:
                self.write_status()

    def _died(self, child: _Child, now: float) -> None:
        child.last_exit, child.last_exit_at = child.proc.exitcode, time.time()
        self._close_writer(child)
        self._pidfile(child.name).unlink(missing_ok=True)
        delay = self.policy.delay(child.restarts, now)
        why = describe_exit(child.last_exit)
        if delay is None:
            child.state = "failed"
            log.error("the %s loop (pid %d) died (%s) after %d restarts within %.0fs; leaving it down (serving "
                      "goes on; the log above says why it died)", child.name, child.proc.pid, why,
                      self.policy.max_restarts, self.policy.window_s)
            return
        child.state, child.restart_at = "restarting", now + delay
        log.warning("the %s loop (pid %d) died (%s); restarting it in %.1fs", child.name, child.proc.pid, why, delay)

    # ------------------------------------------------------------------ reporting

    def status(self) -> dict[str, Any]:
        """Per loop: state (running / restarting / failed / stopped), pid, restarts, last exit."""
        # restart_at is kept on the monotonic clock; the file gets wall-clock time, which other
        # processes can compare with theirs.
        now, wall = time.monotonic(), time.time()
        loops = {}
        for child in self.children.values():
            loops[child.name] = {
                "state": child.state,
                "pid": child.proc.pid if child.proc is not None else None,
                "restarts": len(child.restarts),
                "last_exit": describe_exit(child.last_exit) if child.last_exit_at is not None else None,
                "last_exit_at": child.last_exit_at,
                "restart_at": wall + max(0.0, child.restart_at - now) if child.restart_at else None,
            }
        return {"supervisor_pid": os.getpid(), "supervisor_started": process_start(os.getpid()),
                "updated_at": time.time(), "loops": loops}

    def write_status(self) -> None:
        write_json_atomic(self.state_dir / STATUS_FILE, self.status())

    # ------------------------------------------------------------------ stopping

    @staticmethod
    def _close_writer(child: _Child) -> None:
        if child.writer is not None:
            child.writer.close()
            child.writer = None

    def stop(self, timeout_s: float = 30.0) -> dict[str, int | None]:
        """Signal every child, wait up to ``timeout_s`` in all, terminate then kill the rest.

        Returns each child's exit code. Never blocks on a dead child: closing a pipe cannot, and
        every join has a deadline.
        """
        with self._lock:
            self._stopping.set()  # no restart from here on
            for child in self.children.values():
                self._close_writer(child)
        deadline = time.monotonic() + timeout_s
        for child in self.children.values():
            proc = child.proc
            if proc is None:
                continue
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                log.warning("the %s loop did not stop in %.0fs; terminating it", child.name, timeout_s)
                proc.terminate()
                proc.join(5)
            if proc.is_alive():
                log.warning("the %s loop ignored SIGTERM; killing it", child.name)
                proc.kill()
                proc.join(5)
            child.state = "stopped"
            self._pidfile(child.name).unlink(missing_ok=True)
        # Only now may the watcher thread end: children it restarted get the parent-death signal
        # when it does.
        self._children_gone.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.write_status()
        return {child.name: child.proc.exitcode if child.proc is not None else None
                for child in self.children.values()}


def read_status(state_dir: Path) -> dict[str, Any] | None:
    """The loops' supervision state of a run, with ``server_alive`` (is the supervisor running)."""
    try:
        status = read_json(Path(state_dir) / STATUS_FILE)
    except RatchetError:
        return None
    if not isinstance(status, dict):
        return None
    pid = status.get("supervisor_pid")
    status["server_alive"] = bool(pid) and process_alive(int(pid), status.get("supervisor_started"))
    return status
