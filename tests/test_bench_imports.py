"""No bench imports the command line: what a bench needs lives in the library."""

from __future__ import annotations

import ast
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_no_bench_imports_or_runs_the_cli_module() -> None:
    offenders = []
    for path in sorted(BENCH.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "ratchet.cli" in node.value:
                names = [node.value]  # python -c "from ratchet.cli import …" is an import too
            offenders += [f"{path.name}:{node.lineno}: {n}" for n in names if n.startswith("ratchet.cli") or "ratchet.cli" in n]
    assert offenders == []
