"""Errors a candidate's code can cause, each carrying text a refiner model can act on.

Every error is raised in the parent (the evaluator's side) from plain data the worker sent or from
what the parent observed (a deadline passed, the worker died), so a candidate cannot forge an
exception object. ``kind`` is a short stable tag for counting and for the run store.
"""

from __future__ import annotations

import traceback
from typing import Any

from ratchet.contracts import RatchetError

#: How many lines of a traceback a refiner sees.
TRACEBACK_LINES = 15


class HarnessError(RatchetError):
    """Base of every failure of candidate code run in the sandbox.

    ``message`` says what happened in one line; ``traceback_tail`` holds the last lines of the
    candidate's traceback (worker internals and absolute paths removed; empty when the worker was
    killed); ``output_tail`` the end of what the code printed during the failing call.
    """

    kind = "error"
    advice = ""

    def __init__(
        self,
        message: str,
        *,
        traceback_tail: str = "",
        output_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.message = message
        lines = traceback_tail.strip("\n").splitlines()
        self.traceback_tail = "\n".join(lines[-TRACEBACK_LINES:])
        self.output_tail = output_tail

    def feedback(self) -> str:
        """The text a refiner model should see: what failed, where, and what to change."""
        parts = [f"{self.title()}: {self.message}"]
        if self.traceback_tail:
            parts.append(self.traceback_tail)
        if self.output_tail.strip():
            parts.append("Output printed before the failure (tail):\n" + self.output_tail.strip()[-1000:])
        if self.advice:
            parts.append(self.advice)
        return "\n".join(parts)

    def title(self) -> str:
        return "Harness error"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for logs and the run store."""
        return {
            "kind": self.kind,
            "message": self.message,
            "traceback_tail": self.traceback_tail,
            "output_tail": self.output_tail,
        }

    def __reduce__(self) -> tuple[Any, ...]:
        # Executors move errors between processes; keep every field, not just the message.
        return (
            _rebuild,
            (
                type(self),
                self.message,
                self.traceback_tail,
                self.output_tail,
                self.hint,
                getattr(self, "limit", None),
            ),
        )


def _rebuild(
    cls: type[HarnessError], message: str, tb: str, out: str, hint: str | None, limit: str | None
) -> HarnessError:
    error = cls(message, traceback_tail=tb, output_tail=out, hint=hint)
    if limit is not None:
        error.limit = limit  # type: ignore[attr-defined]
    return error


class HarnessTimeout(HarnessError):
    """The code ran past its wall-clock limit for one call (``limit == "wall"``) or spent the
    worker's CPU-time budget (``limit == "cpu"``)."""

    kind = "timeout"
    advice = "Make sure every loop terminates and the function returns quickly (avoid infinite loops)."

    def __init__(self, message: str, *, limit: str = "wall", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.limit = limit

    def title(self) -> str:
        return "Timeout" if self.limit == "wall" else "CPU time limit exceeded"


class HarnessMemoryError(HarnessError):
    """The code allocated more memory than the worker's address-space limit allows."""

    kind = "memory"
    advice = "Use far less memory: avoid building huge lists, strings or arrays."

    def title(self) -> str:
        return "Memory limit exceeded"


class HarnessCrashed(HarnessError):
    """The worker process died (a signal, an exit, a broken protocol) outside a clean error."""

    kind = "crashed"
    advice = "Do not exit, kill processes or write to file descriptors you did not open."

    def title(self) -> str:
        return "Harness process crashed"


class HarnessCodeError(HarnessError):
    """The code raised an exception, failed to load (syntax error), or lacks the function."""

    kind = "code"

    def title(self) -> str:
        return "Code error"


class HarnessImportError(HarnessCodeError):
    """The code imported a module outside the allow-list."""

    kind = "import"
    advice = (
        "Use only the allowed modules: by default the Python standard library and numpy, without "
        "process, network and C-call modules (subprocess, multiprocessing, socket, ssl, ctypes, pty)."
    )

    def title(self) -> str:
        return "Import not allowed"


class HarnessOutputError(HarnessError):
    """The code returned something that is not plain JSON data, or returned/printed too much."""

    kind = "output"
    advice = (
        "Return only plain values (str, int, float, bool, None, list, dict with str keys) of modest size."
    )

    def title(self) -> str:
        return "Bad output"


class HarnessSkipped(HarnessError):
    """In a batch, an item that was not run because an earlier item killed the worker."""

    kind = "skipped"

    def title(self) -> str:
        return "Not run"


_BY_KIND: dict[str, type[HarnessError]] = {
    cls.kind: cls
    for cls in (
        HarnessTimeout,
        HarnessMemoryError,
        HarnessCrashed,
        HarnessCodeError,
        HarnessImportError,
        HarnessOutputError,
        HarnessSkipped,
    )
}


def error_from_reply(data: Any) -> HarnessError:
    """Rebuild an error from the worker's plain reply; anything malformed is a crash."""
    if not isinstance(data, dict):
        return HarnessCrashed("the worker sent a malformed error reply")
    kind = data.get("kind")
    cls = _BY_KIND.get(kind if isinstance(kind, str) else "", HarnessCodeError)
    message = str(data.get("message", ""))[:4000]
    tb = str(data.get("tb", ""))[-20000:]
    out = str(data.get("out", ""))[-4000:]
    return cls(message, traceback_tail=tb, output_tail=out)


def feedback_of(exc: BaseException) -> str:
    """The text a refiner sees for a failed call: a sandbox error's ``feedback()``, else the
    exception's own last line (an in-process call raises the candidate's exception itself)."""
    feedback = getattr(exc, "feedback", None)
    if callable(feedback):
        try:
            return str(feedback())
        except Exception:  # a broken feedback() must not hide the original error
            pass
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()
