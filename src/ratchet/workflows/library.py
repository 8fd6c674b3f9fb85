"""How the operator library gets into the sandbox.

The sandbox worker imports only the standard library and the candidate's own files (the project
is not visible inside it). So the workflow suites put ``flowops.py`` (standard library only) beside
the candidate's files in the sandbox: ``workflow.libraries`` of a suite's options names it by
import path, and it is there by default (:class:`ratchet.evolve.suites.config.WorkflowOptions`).
A workspace therefore carries no copy; one that does (a run evolving its own operators) has its
copy used instead. :func:`library_files` gives the file for a workflow run outside the suites.
"""

from __future__ import annotations

from pathlib import Path

from ratchet.workflows import flowops

LIBRARY_MODULE = "ratchet.workflows.flowops"
LIBRARY_FILE = "flowops.py"
LIBRARY_PATH = Path(flowops.__file__)


def library_files() -> dict[str, str]:
    """The library's file as a candidate file: ``{"flowops.py": source}``."""
    return {LIBRARY_FILE: LIBRARY_PATH.read_text()}
