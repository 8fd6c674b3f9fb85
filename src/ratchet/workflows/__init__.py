"""Workflows built from operators: the operator library (``flowops``, put into the sandbox by the
workflow suites), an operator-level spec a small model can write (``spec``), the proposers and
selector that search over workflows, and the comparison of a searched workflow with best-of-k at
equal cost (``headline``). See docs/workflows.md."""

from ratchet.workflows.library import LIBRARY_FILE, LIBRARY_MODULE, library_files
from ratchet.workflows.spec import MENU, WorkflowSpec, compile_spec, parse_spec

__all__ = ["LIBRARY_FILE", "LIBRARY_MODULE", "MENU", "WorkflowSpec", "compile_spec", "library_files", "parse_spec"]
