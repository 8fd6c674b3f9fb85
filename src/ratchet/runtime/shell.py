"""Shell commands inside the project's sandbox: the working directory is the only writable place,
the network is the policy's, the user's home and the run store are hidden.

One sandbox worker per agent, started on the first command and reused. Commands run as the
worker's unprivileged uid, so the working directory is handed to that uid before each command.
"""

from __future__ import annotations

import os

from pathlib import Path

from ratchet.runtime.permissions import Guard
from ratchet.sandbox import HarnessError, Sandbox, SandboxConfig
from ratchet.sandbox.config import DEFAULT_BLOCKED

#: Runs inside the sandbox worker. subprocess is allowed there (the OS isolation is the barrier);
#: on timeout the whole process group is killed so no grandchild keeps the pipes open.
_WORKER_CODE = '''
import os, signal, subprocess, sys

def run(command, timeout_s, max_bytes):
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + ":" + env.get("PATH", "/usr/bin:/bin")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONSAFEPATH", None)  # commands expect `python -c "import mymodule"` to see the cwd
    # pytest's warnings about its own configuration (a plugin of this interpreter, such as
    # pytest-asyncio, asking for an ini option the repository does not set) are about the runner,
    # not the code under test: ~600 characters of every test run a small model would read.
    env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " -W ignore::pytest.PytestDeprecationWarning").strip()
    proc = subprocess.Popen(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    text = out.decode("utf-8", errors="replace")
    cut = len(text) > max_bytes
    return {"returncode": proc.returncode, "output": text[-max_bytes:], "truncated": cut,
            "total_chars": len(text), "timed_out": timed_out}
'''


class Shell:
    """Runs bash commands in one sandbox worker whose writable directory is ``workdir``.

    With a ``guard``, the paths of the working tree its ``readable`` rules do not allow are hidden
    from commands (empty read-only views over them, see :meth:`Guard.unreadable`). The set is
    computed before every command and the worker restarted when it changed, so a file created
    since is covered too. Only bubblewrap can hide paths: under a weaker mechanism a command is
    refused while anything would have to be hidden."""

    def __init__(self, workdir: Path, *, network: bool, hidden: list[Path], memory_mb: int = 4096,
                 guard: Guard | None = None) -> None:
        self.workdir = Path(workdir).resolve()
        self.guard = guard
        blocked = [m for m in DEFAULT_BLOCKED if m not in ("subprocess", "_posixsubprocess")]
        self._hidden = [p for p in [Path.home(), *hidden] if not _contains(p, self.workdir)]
        self.config = SandboxConfig(call_timeout_s=60, scratch_dir=self.workdir, blocked_imports=blocked,
                                    network=network, hidden_paths=list(self._hidden), memory_mb=memory_mb,
                                    max_processes=64, max_file_mb=64, max_output_kb=1024, cpu_seconds=3600)
        self._sandbox: Sandbox | None = None
        self.masked: list[Path] = []
        """The working-tree paths the running worker hides (the guard's unreadable ones)."""

    def run(self, command: str, timeout_s: float, max_bytes: int) -> dict:
        """``{"returncode", "output", "truncated", "total_chars", "timed_out"}``; a sandbox failure
        comes back as returncode None with its feedback as output. Raises PermissionDenied when
        unreadable paths cannot be hidden here."""
        if self._sandbox is None:
            self._sandbox = Sandbox({"shell.py": _WORKER_CODE}, entry="shell.py", config=self.config)
        self._mask_unreadable()
        self._hand_over()
        try:
            return self._sandbox.call("run", command, timeout_s, max_bytes, timeout_s=timeout_s + 10)
        except HarnessError as exc:
            return {"returncode": None, "output": exc.feedback(), "truncated": False, "total_chars": 0,
                    "timed_out": exc.kind == "timeout"}

    def _mask_unreadable(self) -> None:
        if self.guard is None or self._sandbox is None:
            return
        masked = self.guard.unreadable()
        if masked and self._sandbox.mechanism.name != "bwrap":
            raise self.guard.deny("readable", f"{len(masked)} path(s) of the working tree are not readable "
                                  f"(e.g. {masked[0].relative_to(self.workdir)}) and only bubblewrap can hide "
                                  f"them from commands (isolation here: {self._sandbox.isolation})")
        if masked != self.masked:
            self.masked = masked
            self._sandbox.config.hidden_paths = [*self._hidden, *masked]
            self._sandbox.restart()  # the next call starts a worker with the new views

    def _hand_over(self) -> None:
        uid = self._sandbox.worker_uid if self._sandbox else None
        if uid is None:
            return
        # The directory itself too: another agent's sandbox on the same tree (a sub-agent's, made
        # after this one) took it over, and a command that cannot write its cwd cannot make a
        # temporary file either (the sandbox's /tmp is not the worker's).
        if os.lstat(self.workdir).st_uid != uid:
            os.chown(self.workdir, uid, uid)
        for dirpath, dirs, names in os.walk(self.workdir):
            for name in dirs + names:
                path = os.path.join(dirpath, name)
                if os.lstat(path).st_uid != uid:
                    os.lchown(path, uid, uid)

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


def _contains(parent: Path, child: Path) -> bool:
    parent = Path(parent).resolve()
    return child == parent or parent in child.parents


