"""The tool that ends a run. A workspace tool: edit it like any other part of the harness."""

from ratchet.runtime.errors import Submitted

TOOLS = ("submit",)


def submit(ctx, summary: str) -> str:
    """Say the task is done and end the run.

    Args:
        summary: one line on what was changed and how it was checked.
    """
    raise Submitted(summary)
