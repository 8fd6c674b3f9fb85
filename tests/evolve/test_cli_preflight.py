"""What is settled before an evolve run pays for anything: a warning when the held-in split is too
small for the gate to ever accept, a workspace found from any directory, and the one-call library
API that the command itself runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from doubles import make_workspace
from typer.testing import CliRunner

from ratchet import api
from ratchet.cli import app
from ratchet.contracts import RatchetError
from ratchet.evolve.config import GateOptions
from ratchet.evolve.context import EngineContext
from ratchet.evolve.gate import BootstrapGate, PairedGate
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.preflight import gate_reach_warning, load_evolve_config, resolve_workspace
from ratchet.store import RunStore

runner = CliRunner()


def _gate(cls=PairedGate, **options) -> PairedGate:
    ctx = EngineContext(None, Path("."), None, None, 0)
    return cls(GateOptions(**options), ctx)


def test_the_gate_cannot_accept_on_five_held_in_tasks_and_can_on_six() -> None:
    """With n tasks the best a sign-flip test can reach is 1/2^n; the first test of a run is at
    alpha/2 = 0.025: 1/32 is not below it, 1/64 is."""
    warning = gate_reach_warning(_gate(), 5)
    assert warning is not None and "5 task(s)" in warning and "0.03125" in warning and "0.025" in warning
    assert gate_reach_warning(_gate(), 6) is None
    assert gate_reach_warning(_gate(alpha=0.2), 4) is None  # a looser gate reaches further: 1/16 < 0.1
    assert gate_reach_warning(_gate(correction="none"), 5) is None  # tested at alpha itself: 1/32 < 0.05
    assert gate_reach_warning(_gate(BootstrapGate), 3) is None  # a bootstrap of all-positive gains: p = 1/2001


def _config(tmp_path: Path, tasks: int, heldin: float) -> Path:
    make_workspace(tmp_path, p=0.1, tasks=tasks)
    data = {"workspace": "ws", "suite": {"name": "noisy", "options": {"tasks": tasks}},
            "splits": {"search": 0.25, "heldin": heldin, "heldout": 0.25}, "selector": {"name": "greedy"},
            "proposers": [{"name": "doubles:PlantedProposer", "options": {"gain": 0.4}}],
            "iterations": 1, "static": {"load_entry": False}}
    path = tmp_path / "evolve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_run_whose_held_in_split_is_too_small_says_so_at_its_start(tmp_path: Path) -> None:
    small = _config(tmp_path / "small", tasks=16, heldin=0.25)  # 4 held-in tasks
    out = runner.invoke(app, ["evolve", str(small), "--store", str(tmp_path / "runs")])
    assert out.exit_code == 0, (out.output, out.exception)
    [warning] = [line for line in out.output.splitlines() if line.startswith("warning:")]
    assert "held-in split has 4 task(s)" in warning and "splits.heldin" in out.output
    assert out.output.index("warning:") < out.output.index("step 1/1")  # before the first step, not after

    enough = _config(tmp_path / "enough", tasks=40, heldin=0.25)  # 10 held-in tasks
    out = runner.invoke(app, ["evolve", str(enough), "--store", str(tmp_path / "runs")])
    assert out.exit_code == 0 and "warning:" not in out.output


def test_a_relative_workspace_is_found_from_any_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the YAML file first; else in the nearest directory above it that has it (how the
    shipped examples name theirs, from the repository root); the working directory does not matter."""
    repo = tmp_path / "repo"
    beside = repo / "examples" / "one"
    (beside / "ws").mkdir(parents=True)
    assert resolve_workspace(Path("ws"), beside / "evolve.yaml") == (beside / "ws").resolve()
    assert resolve_workspace(Path("."), beside / "evolve.yaml") == beside.resolve()
    assert resolve_workspace(Path("examples/one"), beside / "evolve.yaml") == beside.resolve()  # from the root
    monkeypatch.chdir(tmp_path)
    assert resolve_workspace(Path("nowhere"), beside / "evolve.yaml") == (tmp_path / "nowhere").resolve()


@pytest.mark.parametrize("example", sorted(p for p in (Path(__file__).parents[2] / "examples").glob("*/*.yaml")
                                           if "workspace:" in p.read_text()))
def test_every_shipped_example_finds_its_workspace_from_another_directory(example: Path, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_evolve_config(example)
    assert cfg.workspace.is_absolute() and load_manifest(cfg.workspace).name
    assert example.parent == cfg.workspace or example.parent in cfg.workspace.parents or \
        cfg.workspace in example.parents  # its own example's workspace, never the cwd


def test_the_library_call_is_what_the_command_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, tasks=40, heldin=0.25)
    monkeypatch.chdir(tmp_path.parent)  # the config's relative workspace is not under the cwd
    seen: list[str] = []
    result = api.evolve(path, overrides=["iterations=2"], store=tmp_path / "runs", on_event=lambda e: seen.append(e["kind"]),
                        on_start=lambda run: seen.append("start"))
    assert result.summary["state"] == "done" and result.summary["accepted"] >= 1 and result.warnings == []
    assert seen[0] == "start" and "step" in seen
    [row] = RunStore(tmp_path / "runs").list_runs(kind=api.EVOLVE_KIND)
    assert row["id"] == result.run_id and row["status"] == "done" and result.run_dir.is_dir()
    resumed = api.resume_evolve(result.run_id, overrides=["iterations=3"], store=tmp_path / "runs")
    assert resumed.run_id == result.run_id
    assert resumed.summary["accepted"] + resumed.summary["rejected"] >= result.summary["accepted"] + result.summary["rejected"]
    with pytest.raises(RatchetError, match="config object"):
        api.evolve(load_evolve_config(path), overrides=["iterations=1"])


def test_a_run_whose_engine_cannot_be_built_is_marked_failed(tmp_path: Path) -> None:
    path = _config(tmp_path, tasks=40, heldin=0.25)
    with pytest.raises(RatchetError):
        api.evolve(path, overrides=["selector.name=nosuch"], store=tmp_path / "runs")
    [row] = RunStore(tmp_path / "runs").list_runs()
    assert row["status"] == "failed"
    assert "nosuch" in RunStore(tmp_path / "runs").open_run(row["id"]).status()["summary"]["error"]
