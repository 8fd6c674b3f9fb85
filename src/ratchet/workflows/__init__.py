"""Workflows built from operators: the operator library (``flowops``, run inside the sandbox), how it
travels with a workflow (``library``), and an operator-level spec a small model can write (``spec``).
See docs/workflows.md."""

from ratchet.workflows.library import LIBRARY_FILE, install, is_stale, library_files
from ratchet.workflows.spec import MENU, WorkflowSpec, compile_spec, parse_spec

__all__ = ["LIBRARY_FILE", "MENU", "WorkflowSpec", "compile_spec", "install", "is_stale", "library_files", "parse_spec"]
