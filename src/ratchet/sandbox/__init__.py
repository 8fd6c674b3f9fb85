"""Isolated, persistent workers that run untrusted candidate code and return plain data.

A :class:`Sandbox` loads one candidate's files into a separate process (bubblewrap namespaces
when available, see :func:`isolation_report`), keeps it warm across thousands of calls, and turns
every misbehaviour into a :class:`HarnessError` whose :meth:`~HarnessError.feedback` a refiner
model can read. The evaluator always stays in the calling process. See docs/sandbox.md.
"""

from ratchet.sandbox.config import SandboxConfig
from ratchet.sandbox.errors import (
    HarnessCodeError,
    HarnessCrashed,
    HarnessError,
    HarnessImportError,
    HarnessMemoryError,
    HarnessOutputError,
    HarnessSkipped,
    HarnessTimeout,
)
from ratchet.sandbox.isolation import IsolationUnavailable, SandboxIsolationWarning, isolation_report
from ratchet.sandbox.sandbox import Sandbox

__all__ = [
    "HarnessCodeError",
    "HarnessCrashed",
    "HarnessError",
    "HarnessImportError",
    "HarnessMemoryError",
    "HarnessOutputError",
    "HarnessSkipped",
    "HarnessTimeout",
    "IsolationUnavailable",
    "Sandbox",
    "SandboxConfig",
    "SandboxIsolationWarning",
    "isolation_report",
]
