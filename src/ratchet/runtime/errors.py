"""Control flow of the agent loop, by exceptions that carry the message the model or caller reads."""

from __future__ import annotations

from ratchet.contracts import RatchetError


class AgentException(RatchetError):
    """Base of the loop's own exceptions."""


class NonTerminating(AgentException):
    """The turn went wrong; the message goes back to the model and the loop goes on."""


class FormatError(NonTerminating):
    """The reply held no parsable tool call."""


class ToolError(NonTerminating):
    """A tool failed; the model sees ``error: <message>``."""


class Refused(ToolError):
    """A middleware declined to run a call (a repeat of one already answered). The call did
    nothing, so it is not a failure that stops the rest of the reply. ``failed_before``: the call
    failed when it last ran on these files, so it would fail again (a ``submit`` after it in the
    same reply rests on a failure)."""

    def __init__(self, message: str, *, failed_before: bool = False) -> None:
        super().__init__(message)
        self.failed_before = failed_before


class PermissionDenied(ToolError):
    """The permission policy refused a tool call; ``rule`` names the rule that refused it."""

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(f"permission denied by {rule}: {message}")
        self.rule = rule


class Terminating(AgentException):
    """The run ends; ``exit_status`` names why."""

    exit_status = "terminated"
    result: str | None = None
    """The tool result the model would have read, when the run ended on what a call returned
    (set by the loop; it joins the conversation before the run ends)."""


class Submitted(Terminating):
    """The agent said it is done (its message is the summary)."""

    exit_status = "submitted"


class LimitsExceeded(Terminating):
    """A step, token or format-error limit was reached."""

    exit_status = "limits_exceeded"


class Interrupted(Terminating):
    """Someone asked the agent to stop (``interrupt_agent``); it can be resumed."""

    exit_status = "interrupted"


class RepeatedFailure(Terminating):
    """The model kept repeating a tool call that had already failed the same way."""

    exit_status = "repeated_failure"
