"""The operator library as files a workflow carries: how ``flowops`` gets into the sandbox.

The sandbox worker imports only the standard library and the candidate's own files (the project
is not visible inside it). So, as with AutoHarness's ``harnesslib``, the library travels as a file
beside ``workflow.py``: a workspace lists ``flowops.py`` among its files and ``import flowops``
works in the worker. :func:`install` writes it into a workspace; :func:`is_stale` tells whether
a workspace's copy differs from the package's (a test keeps the shipped examples in step).
"""

from __future__ import annotations

from pathlib import Path

from ratchet.workflows import flowops

LIBRARY_FILE = "flowops.py"
LIBRARY_PATH = Path(flowops.__file__)


def library_files() -> dict[str, str]:
    """The library's file as a candidate file: ``{"flowops.py": source}``."""
    return {LIBRARY_FILE: LIBRARY_PATH.read_text()}


def install(workspace: Path) -> Path:
    """Write (or refresh) the library into ``workspace``; returns the file written."""
    target = Path(workspace) / LIBRARY_FILE
    tmp = target.with_suffix(".py.tmp")
    tmp.write_text(LIBRARY_PATH.read_text())
    tmp.replace(target)  # atomic: a reader never sees half a library
    return target


def is_stale(workspace: Path) -> bool:
    """True when ``workspace`` has no copy of the library or one that differs from the package's."""
    target = Path(workspace) / LIBRARY_FILE
    return not target.exists() or target.read_text() != LIBRARY_PATH.read_text()
