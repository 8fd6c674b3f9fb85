"""The parent side: one persistent, isolated worker per candidate, called many times cheaply.

The warm path of a call is one write and one read on a pipe (plus a poll for the deadline). The
parent never trusts the worker: it decodes JSON bytes of bounded size, so every value it returns
is plain data, and every error it raises is built here from what it received or observed. The
worker process itself (pipes, framed reads against a deadline, killing it) is
:mod:`ratchet.sandbox.process`; the command line that isolates it is :mod:`ratchet.sandbox.isolation`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Self

from ratchet.sandbox.config import STDLIB, SandboxConfig
from ratchet.sandbox.errors import (
    HarnessCodeError,
    HarnessCrashed,
    HarnessError,
    HarnessOutputError,
    HarnessSkipped,
    HarnessTimeout,
    error_from_reply,
)
from ratchet.sandbox.isolation import command, others_can_use, resolve, worker_env, worker_import_paths
from ratchet.sandbox.process import ReplyLate, WorkerDied, WorkerProcess

# The worker script and the siblings it imports by bare name, copied into a directory of their own.
_WORKER_FILES = ("worker.py", "worker_state.py", "worker_errors.py", "worker_imports.py")
_REPLY_SLACK = 64 * 1024  # room for error texts on top of the result limit
_STARTUP_SLACK_S = 2.0  # interpreter and bubblewrap start-up before the worker's own load alarm


def _cleanup(holder: dict[str, Any]) -> None:
    worker = holder.pop("worker", None)
    if worker is not None:
        worker.kill()
    root = holder.pop("root", None)
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


def _check_files(files: dict[str, str], entry: str) -> None:
    if entry not in files:
        raise HarnessCodeError(
            f"the entry file {entry!r} is not among the candidate's files: {sorted(files)}"
        )
    if not entry.endswith(".py"):
        raise HarnessCodeError(f"the entry file {entry!r} must be a .py file")
    for name in files:
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise HarnessCodeError(f"bad file name {name!r}: use relative paths inside the candidate")


class Sandbox:
    """Runs one candidate's code in a separate, persistent, isolated worker process.

    ``files`` maps relative paths to source text; ``entry`` is the module whose top-level functions
    are callable. The worker starts on first use (or :meth:`start`), is reused across calls, and is
    restarted after it crashes, times out or asks to be recycled. Errors in the code raise
    subclasses of :class:`HarnessError`; the Sandbox stays usable after every one of them.
    A code that fails to load (syntax or import error) fails the same way on every later call.
    """

    def __init__(self, files: dict[str, str], entry: str = "harness.py", config: SandboxConfig | None = None):
        _check_files(files, entry)
        self.files = dict(files)
        self.entry = entry
        self.config = config or SandboxConfig()
        self.mechanism = resolve(self.config.isolation)
        self._lock = threading.Lock()
        self._functions: list[str] | None = None
        self._load_error: HarnessError | None = None
        self._holder: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _cleanup, self._holder)
        self._owns_scratch = self.config.scratch_dir is None
        self._max_reply = self.config.max_output_kb * 1024 + _REPLY_SLACK
        self._closed = False
        self.stats = {"starts": 0, "calls": 0, "kills": 0, "start_s": 0.0}
        self._spent_s = 0.0  # wall time in the worker, against config.candidate_budget_s
        self._prepare_dirs()

    # -- public API ------------------------------------------------------------------------------

    @property
    def isolation(self) -> str:
        """The mechanism in force: ``bwrap``, ``unshare`` or ``rlimits-only``."""
        return self.mechanism.report_name

    @property
    def scratch_dir(self) -> Path:
        """The one directory the code may write."""
        return Path(self._scratch)

    @property
    def worker_pid(self) -> int | None:
        """Host pid of the running worker's outermost process (bwrap under bubblewrap), if any."""
        worker = self._holder.get("worker")
        return None if worker is None else worker.proc.pid

    @property
    def worker_uid(self) -> int | None:
        """The unprivileged uid the code runs as (None when privileges could not be dropped)."""
        return self._uid

    def start(self) -> list[str]:
        """Start the worker if it is not running; return the candidate's public function names."""
        with self._lock:
            self._ensure_worker()
            assert self._functions is not None
            return list(self._functions)

    def functions(self) -> list[str]:
        """Public top-level callables of the entry module (starts the worker if needed)."""
        return self.start()

    def has_function(self, name: str) -> bool:
        """Whether the entry module defines a public callable ``name`` (starts the worker if needed)."""
        return name in self.start()

    def call(self, fn_name: str, *args: Any, seed: int | None = None, timeout_s: float | None = None) -> Any:
        """Call ``fn_name(*args)`` in the worker and return its plain-data result.

        ``args`` must be JSON-able. Before the call the worker seeds ``random`` (and numpy's global
        generator when loaded) with ``seed`` (0 when None). Raises a :class:`HarnessError`.
        """
        status, value = self._run(fn_name, [list(args)], seed, timeout_s, batch=False)[0]
        if status == "error":
            raise value
        return value

    def call_many(
        self,
        fn_name: str,
        arg_tuples: Iterable[Sequence[Any]],
        seed: int | None = None,
        timeout_s: float | None = None,
    ) -> list[tuple[str, Any]]:
        """Call ``fn_name`` once per argument tuple in one round trip; never raises HarnessError.

        Returns ``("ok", value)`` or ``("error", HarnessError)`` per item, in order. Item ``i`` is
        seeded with ``seed + i``, so it gives what ``call(fn_name, *args_i, seed=seed + i)`` gives.
        Each item has its own ``timeout_s``. When an item kills the worker (a hard timeout, a crash)
        the items after it are not run and come back as :class:`HarnessSkipped`.
        """
        items = [list(a) for a in arg_tuples]
        if not items:
            return []
        return self._run(fn_name, items, seed, timeout_s, batch=True)

    def restart(self) -> None:
        """Kill the worker now; the next call starts a fresh one (scratch directory kept)."""
        with self._lock:
            self._stop_worker()

    def close(self) -> None:
        """Kill the worker and remove the temporary directories. Idempotent."""
        with self._lock:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- worker life -----------------------------------------------------------------------------

    def _prepare_dirs(self) -> None:
        root = Path(tempfile.mkdtemp(prefix="ratchet-sandbox-"))
        self._holder["root"] = str(root)
        root.chmod(0o755)
        code = root / "code"
        for name, text in self.files.items():
            path = code / name
            path.parent.mkdir(parents=True, exist_ok=True)
            # Model text can hold lone surrogates (undecodable bytes a backend passed through):
            # written as they are, they make the load fail with a SyntaxError the refiner sees,
            # instead of an encoding error here.
            path.write_bytes(text.encode("utf-8", "surrogatepass"))
        code.mkdir(exist_ok=True)
        for directory, _, names in os.walk(code):
            os.chmod(directory, 0o755)
            for name in names:
                os.chmod(os.path.join(directory, name), 0o644)
        worker_dir = root / "worker"
        worker_dir.mkdir()
        worker_dir.chmod(0o755)
        for name in _WORKER_FILES:
            shutil.copyfile(Path(__file__).with_name(name), worker_dir / name)
            (worker_dir / name).chmod(0o644)
        worker = worker_dir / "worker.py"
        if self.config.scratch_dir is None:
            scratch = root / "scratch"
            scratch.mkdir()
        else:
            scratch = Path(self.config.scratch_dir).resolve()
            scratch.mkdir(parents=True, exist_ok=True)
        self._root, self._code, self._worker_file, self._scratch = (
            str(root),
            str(code),
            str(worker),
            str(scratch),
        )
        self._uid = self._choose_uid()
        if self._uid is not None:
            os.chown(scratch, self._uid, self._uid)
            scratch.chmod(0o700)

    def _choose_uid(self) -> int | None:
        """An unused uid for the worker, so RLIMIT_NPROC counts this worker's processes alone and
        the code cannot signal or write anything of ours. Only root can switch uid."""
        if os.geteuid() != 0:
            return None
        if self.mechanism.name != "bwrap":
            # Without bubblewrap the interpreter is read from the real filesystem; an unprivileged
            # uid must be able to reach it (pyenv under a 0700 /root cannot).
            needed = [self.config.python, self._worker_file, self._code]
            if not all(others_can_use(p) for p in needed):
                import warnings

                warnings.warn(
                    "sandbox: the interpreter is not reachable by an unprivileged uid; the worker "
                    "keeps running as root (no RLIMIT_NPROC, no file-permission protection)",
                    RuntimeWarning,
                    stacklevel=3,
                )
                return None
        return 200_000 + secrets.randbelow(1_000_000_000)

    def _init_frame(self) -> bytes:
        cfg = self.config
        allowed: list[str] = []
        for name in cfg.allowed_imports:
            if name == STDLIB:
                allowed.extend(_stdlib_names(cfg.python))
            else:
                allowed.append(name)
        own = sorted({PurePosixPath(n).parts[0].removesuffix(".py") for n in self.files})
        mb = 1024 * 1024
        limits = {
            "as": cfg.memory_mb * mb,
            "cpu": cfg.cpu_seconds,
            "nproc": cfg.max_processes if self._uid is not None else None,
            "fsize": cfg.max_file_mb * mb,
            "nofile": 256,
            "core": 0,
        }
        init = {
            "code_dir": self._code,
            "entry": self.entry,
            "scratch": self._scratch,
            "own_modules": own,
            "allowed": allowed,
            "blocked": list(cfg.blocked_imports),
            "extra_paths": worker_import_paths(cfg),
            "limits": limits,
            "uid": self._uid,
            "max_output": cfg.max_output_kb * 1024,
            "load_timeout": cfg.start_timeout_s,
        }
        return json.dumps(init).encode()

    def _ensure_worker(self) -> WorkerProcess:
        if self._closed:
            raise HarnessCrashed("the sandbox is closed", hint="create a new Sandbox")
        if self._load_error is not None:
            raise self._load_error
        self._check_budget()
        worker = self._holder.get("worker")
        if worker is not None:
            if worker.recycle or worker.proc.poll() is not None:
                self._stop_worker()
            else:
                return worker
        return self._spawn()

    def _spawn(self) -> WorkerProcess:
        cfg = self.config
        started = time.perf_counter()
        cmd = command(
            self.mechanism, cfg, worker=self._worker_file, code_dir=self._code, scratch=self._scratch
        )
        stderr_path = Path(self._root) / f"stderr-{self.stats['starts']}.log"
        tmp = "/tmp" if self.mechanism.name == "bwrap" else self._scratch
        with open(stderr_path, "wb") as stderr:
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=worker_env(home=self._scratch, tmp=tmp),
                    cwd=self._scratch,
                    start_new_session=True,
                    close_fds=True,
                    bufsize=0,
                )
            except OSError as exc:
                raise HarnessCrashed(f"could not start the worker ({cmd[0]}): {exc}") from None
        worker = WorkerProcess(proc, stderr_path, self._uid, self.mechanism)
        self._holder["worker"] = worker
        self.stats["starts"] += 1
        # The worker stops a slow load itself at start_timeout_s (with a traceback); the parent's
        # deadline adds the interpreter's start-up and the grace for code that ignores the alarm.
        deadline = time.monotonic() + cfg.start_timeout_s + cfg.kill_grace_s + _STARTUP_SLACK_S
        try:
            worker.send(self._init_frame())
            body = worker.receive(deadline, self._max_reply)
            reply = json.loads(body)
        except ReplyLate:
            self._stop_worker()
            self._load_error = HarnessTimeout(
                f"loading {self.entry} did not finish within {cfg.start_timeout_s:g} s and ignored the "
                "in-process timeout; the worker was killed (not retried for this candidate)",
                traceback_tail=self._clean(worker.stderr_tail()),
            )
            raise self._load_error from None
        except (WorkerDied, OverflowError, ValueError):
            error = self._death_error(worker, "while loading the code")
            self._stop_worker()
            raise error from None
        finally:
            self._spent_s += time.perf_counter() - started
        if not isinstance(reply, dict) or "err" in reply:
            self._stop_worker()
            error = error_from_reply(reply.get("err") if isinstance(reply, dict) else None)
            self._load_error = error
            raise error
        names = reply.get("ready")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            self._stop_worker()
            raise HarnessCrashed("the worker sent a malformed start-up reply")
        if reply.get("warning"):
            import warnings

            warnings.warn(f"sandbox: {reply['warning']}", RuntimeWarning, stacklevel=4)
        self._functions = names
        self.stats["start_s"] = time.perf_counter() - started
        return worker

    def _stop_worker(self) -> None:
        worker = self._holder.pop("worker", None)
        if worker is not None:
            worker.kill()

    # -- calls -----------------------------------------------------------------------------------

    def _run(
        self, fn_name: str, items: list[list[Any]], seed: int | None, timeout_s: float | None, batch: bool
    ) -> list[tuple[str, Any]]:
        timeout = self.config.call_timeout_s if timeout_s is None else float(timeout_s)
        seed = 0 if seed is None else int(seed)
        request: dict[str, Any] = {"f": fn_name, "s": seed, "t": timeout}
        if batch:
            request["b"] = items
        else:
            request["a"] = items[0]
        try:
            payload = json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode(
                "utf-8", "surrogatepass"
            )
        except (TypeError, ValueError) as exc:
            raise TypeError(f"sandbox call arguments must be plain JSON data: {exc}") from None
        with self._lock:
            try:
                worker = self._ensure_worker()
            except HarnessError as exc:
                return [("error", exc)] * len(items) if batch else [("error", exc)]
            self.stats["calls"] += len(items)
            began = time.perf_counter()
            try:
                return self._exchange(worker, fn_name, payload, items, timeout)
            finally:
                self._spent_s += time.perf_counter() - began

    def _exchange(
        self, worker: WorkerProcess, fn_name: str, payload: bytes, items: list[list[Any]], timeout: float
    ) -> list[tuple[str, Any]]:
        """Send one request and collect its replies (the lock is held)."""
        results: list[tuple[str, Any]] = []
        grace = timeout + self.config.kill_grace_s
        try:
            worker.send(payload)
        except WorkerDied:
            error = self._death_error(worker, f"before {fn_name} ran")
            self._stop_worker()
            return [("error", error)] + self._skipped(error, len(items) - 1)
        for index in range(len(items)):
            try:
                body = worker.receive(time.monotonic() + grace, self._max_reply)
                data = json.loads(body)
                if not isinstance(data, dict):
                    raise TypeError("reply is not an object")
            except ReplyLate:
                self.stats["kills"] += 1
                self._stop_worker()
                error: HarnessError = HarnessTimeout(
                    f"{fn_name} did not return within {timeout:g} s and ignored the in-process "
                    f"timeout; the worker was killed",
                    limit="wall",
                )
                return results + [("error", error)] + self._skipped(error, len(items) - index - 1)
            except OverflowError as exc:
                self._stop_worker()
                error = HarnessOutputError(
                    f"{fn_name} sent a reply of {exc.args[0]} bytes, more than the limit of "
                    f"{self._max_reply} bytes"
                )
                return results + [("error", error)] + self._skipped(error, len(items) - index - 1)
            except (ValueError, TypeError):
                self._stop_worker()
                error = HarnessCrashed(
                    f"the worker broke the reply protocol during {fn_name}; it was restarted"
                )
                return results + [("error", error)] + self._skipped(error, len(items) - index - 1)
            except WorkerDied:
                error = self._death_error(worker, f"during {fn_name}")
                self._stop_worker()
                return results + [("error", error)] + self._skipped(error, len(items) - index - 1)
            if data.get("x"):
                worker.recycle = True
            if "ok" in data:
                results.append(("ok", data["ok"]))
            else:
                results.append(("error", error_from_reply(data.get("err"))))
        if worker.recycle:
            self._stop_worker()
        return results

    def _check_budget(self) -> None:
        budget = self.config.candidate_budget_s
        if budget is not None and self._spent_s >= budget:
            self._stop_worker()
            self._load_error = HarnessTimeout(
                f"the candidate spent its evaluation budget of {budget:g} s (sandbox.candidate_budget_s) "
                f"after {self.stats['calls']} calls; no further calls are run",
                limit="budget",
            )
            raise self._load_error

    @staticmethod
    def _skipped(cause: HarnessError, count: int) -> list[tuple[str, Any]]:
        if count <= 0:
            return []
        error = HarnessSkipped(f"not run: an earlier item of the batch ended the worker ({cause.kind})")
        return [("error", error)] * count

    def _clean(self, text: str) -> str:
        return text.replace(self._code + os.sep, "").replace(self._root + os.sep, "")

    def _death_error(self, worker: WorkerProcess, when: str) -> HarnessError:
        """Classify how a worker that stopped answering ended."""
        return worker.death_error(when, cpu_seconds=self.config.cpu_seconds, clean=self._clean)


_STDLIB_CACHE: dict[str, list[str]] = {}


def _stdlib_names(python: str) -> list[str]:
    """The standard-library module names of ``python`` (the worker's interpreter)."""
    import sys

    if python == sys.executable:
        return sorted(sys.stdlib_module_names)
    if python not in _STDLIB_CACHE:
        out = subprocess.run(
            [python, "-c", "import sys; print(' '.join(sorted(sys.stdlib_module_names)))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        _STDLIB_CACHE[python] = out.split()
    return _STDLIB_CACHE[python]
