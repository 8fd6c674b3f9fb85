"""Whole programs run in a sandbox worker: test programs, graders' checks, a verifier's asserts.

A program is executed by a tiny runner module loaded into a :class:`Sandbox` worker (no network,
read-only filesystem, time and memory limits), its prints captured. It passes when it runs to the
end; an exception, an ``exit()``, a timeout or a crash is a failed :class:`ProgramResult` whose
output says what happened, never an exception in the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from ratchet.sandbox.config import SandboxConfig
from ratchet.sandbox.errors import HarnessError, HarnessTimeout
from ratchet.sandbox.sandbox import Sandbox

#: The module that runs a program in the worker, its prints captured.
RUNNER_SOURCE = '''
import contextlib
import io


def run(program):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, "program.py", "exec"), {"__name__": "__main__"})
    return out.getvalue()[-4000:]
'''


@dataclass(frozen=True)
class ProgramResult:
    """What running one program in the sandbox gave."""

    passed: bool
    output: str
    timed_out: bool = False


def program_sandbox(timeout_s: float, memory_mb: int = 1024) -> Sandbox:
    """A sandbox that runs whole programs through :data:`RUNNER_SOURCE` (use it as a context manager)."""
    return Sandbox({"runner.py": RUNNER_SOURCE}, entry="runner.py",
                   config=SandboxConfig(call_timeout_s=timeout_s, memory_mb=memory_mb))


def run_program(sandbox: Sandbox, program: str, timeout_s: float) -> ProgramResult:
    """Run ``program`` in ``sandbox`` (a :func:`program_sandbox`); a failure or a timeout is a result."""
    try:
        return ProgramResult(True, str(sandbox.call("run", program, timeout_s=timeout_s)))
    except HarnessTimeout as exc:
        return ProgramResult(False, exc.feedback()[-2000:], timed_out=True)
    except HarnessError as exc:
        return ProgramResult(False, exc.feedback()[-2000:])


def run_once(program: str, timeout_s: float, memory_mb: int = 1024) -> ProgramResult:
    """Run one program in a fresh sandbox worker that is closed afterwards."""
    with program_sandbox(timeout_s, memory_mb) as sandbox:
        return run_program(sandbox, program, timeout_s)
