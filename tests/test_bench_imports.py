"""No bench imports the command line or another bench, and none writes its results by hand: what
benches share lives in the library, `bench/_results.py` (the one results writer) or `bench/_setup.py`."""

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


#: Benches held to the rules later (none now: every bench is held to both).
_NOT_YET: tuple[str, ...] = ()
_WRITE_NOT_YET: tuple[str, ...] = ()


def _benches(not_yet: tuple[str, ...] = _NOT_YET) -> list[Path]:
    return [p for p in sorted(BENCH.glob("*.py")) if not p.name.startswith(not_yet)]


def test_no_bench_imports_another_bench() -> None:
    """What benches share lives in the library or in a support module (``bench/_*.py``, which
    ``python -m bench`` does not run), never in another bench."""
    offenders = []
    for path in _benches():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [module] if module != "bench" else [f"bench.{alias.name}" for alias in node.names]
            offenders += [f"{path.name}:{node.lineno}: {n}" for n in names
                          if n.startswith("bench.") and not n.split(".")[1].startswith("_")]
    assert offenders == []


def test_benches_write_results_only_through_the_writer() -> None:
    """``bench/results`` is written by ``bench/_results.py`` alone: a ``write_text``, ``write_bytes``
    or ``json.dump`` whose target names the results folder is a result written by hand."""
    offenders = []
    for path in _benches(_WRITE_NOT_YET):
        if path.name == "_results.py":
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr in ("write_text", "write_bytes"):
                target = ast.get_source_segment(source, node.func.value) or ""
            elif node.func.attr == "dump" and len(node.args) > 1:
                target = ast.get_source_segment(source, node.args[1]) or ""
            else:
                continue
            if "RESULTS" in target or "results" in target:
                offenders.append(f"{path.name}:{node.lineno}: {target}")
    assert offenders == []


def test_the_rules_catch_what_they_name(tmp_path, monkeypatch) -> None:
    (tmp_path / "a_bench.py").write_text(
        "from bench.other_bench import x\nfrom bench import other\nfrom bench._results import RESULTS\n"
        "(RESULTS / 'a.json').write_text('{}')\n")
    monkeypatch.setitem(globals(), "BENCH", tmp_path)
    for test in (test_no_bench_imports_another_bench, test_benches_write_results_only_through_the_writer):
        try:
            test()
        except AssertionError as exc:
            assert "a_bench.py" in str(exc)
        else:
            raise AssertionError(f"{test.__name__} passed on a bench that breaks it")
