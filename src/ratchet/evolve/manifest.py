"""A harness workspace's manifest: which files the loop may edit and which it must never touch.

A workspace is a directory with a ``manifest.yaml``::

    name: humaneval-coder
    editable: ["prompts/*.md", "workflow.py"]   # the surfaces proposals may change
    protected: ["grader/**", "data/**"]          # the evaluator, its data, its settings: hash-pinned
    entry: workflow.py                           # the file the evaluator loads (optional)
    features: [length, calls]                    # metrics a MAP-Elites grid bins on (optional)
"""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

from ratchet.config import Settings, load_config

MANIFEST_NAME = "manifest.yaml"


class Manifest(Settings):
    """The declared surfaces of a harness workspace."""

    name: str
    """A short name for the harness, used in run names and exports."""
    editable: list[str]
    """Glob patterns (relative to the workspace, ``**`` allowed) of the files proposals may change or add."""
    protected: list[str] = []
    """Glob patterns of files no candidate may change: the evaluator, its data, its settings."""
    entry: str | None = None
    """The file the evaluator loads from a candidate (e.g. ``workflow.py``), if the suite needs one."""
    features: list[str] = []
    """Names of per-candidate metrics that a MAP-Elites grid bins candidates on."""

    def is_editable(self, relpath: str) -> bool:
        return any(fnmatch(relpath, pattern) for pattern in self.editable) and not self.is_protected(relpath)

    def is_protected(self, relpath: str) -> bool:
        return any(fnmatch(relpath, pattern) for pattern in self.protected) or relpath == MANIFEST_NAME


def load_manifest(workspace: str | Path) -> Manifest:
    """Read ``workspace/manifest.yaml``; a missing or invalid manifest fails naming the key."""
    return load_config(Manifest, Path(workspace) / MANIFEST_NAME)
