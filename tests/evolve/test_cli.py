"""``ratchet evolve``: a run from a YAML file with --set overrides (one line per step off a
terminal), then status, diff, approve and export on it; --help shows examples."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from doubles import FILE, make_workspace
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.evolve.archive import Archive
from ratchet.store import RunStore

runner = CliRunner()


def _config(tmp_path: Path, **extra) -> Path:
    make_workspace(tmp_path, p=0.1)
    data = {"workspace": "ws", "suite": {"name": "noisy", "options": {"tasks": 40}},
            "splits": {"search": 0.25, "heldin": 0.25, "heldout": 0.25, "test": 0.25},
            "selector": {"name": "greedy"}, "proposers": [{"name": "doubles:PlantedProposer", "options": {"gain": 0.4}}],
            "iterations": 5, "static": {"load_entry": False}, **extra}
    path = tmp_path / "evolve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_run_status_diff_export(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    root = str(tmp_path / "runs")
    out = _invoke("evolve", str(cfg), "--set", "iterations=2", "--root", root)
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == ["1/2", "2/2"] and "accepted" in steps[0]  # --set took effect
    assert "test split (10 tasks): original" in out
    # piped, a line per task evaluation run: the original's pass over its splits is the longest phase
    counts = [int(line.split("[")[1].split()[0]) for line in out.splitlines() if line.startswith("  evaluated ")]
    assert counts == list(range(1, len(counts) + 1)) and len(counts) >= 30  # search + held-in + held-out: 10 each
    [row] = RunStore(root).list_runs(kind="evolve")
    run = RunStore(root).open_run(row["id"])
    accepted = [c for c in run.candidates() if c["status"] == "accepted" and c["parent_id"]]

    status = _invoke("evolve", "status", run.id, "--root", root)
    assert accepted[0]["id"] in status and "original" in status

    diff = _invoke("evolve", "diff", run.id, accepted[0]["id"], "--root", root)
    assert f"--- a/{FILE}" in diff and '"default": 0.5' in diff and "gate: held-in gain" in diff
    assert Archive(run).diff(accepted[0]["id"]) in diff  # piped, the diff verbatim: no line cropped or wrapped
    assert _invoke("evolve", "diff", run.id, accepted[0]["id"][:5], "--root", root) == diff  # a start of the id
    assert _invoke("evolve", "diff", str(run.dir), accepted[0]["id"]) == diff  # the run's directory, as printed
    refused = runner.invoke(app, ["evolve", "status", str(run.dir), "--root", str(tmp_path)])
    assert refused.exit_code != 0 and "is a path, not a run id" in str(refused.exception)
    assert refused.exception.hint == f"name the run by its id with its store: --store {root} {run.id}"

    dest = tmp_path / "exported"
    _invoke("evolve", "export", run.id, str(dest), "--root", root)
    log = subprocess.run(["git", "log", "--format=%s", "main"], cwd=dest, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1 + len(accepted) and log.stdout.splitlines()[-1].startswith("original")
    assert json.loads((dest / FILE).read_text())["default"] > 0.1 and (dest / "grader" / "settings.json").exists()


def test_status_of_a_run_still_going_counts_from_the_store(tmp_path: Path) -> None:
    """A run's summary is written when it stops (and a resumed one keeps its last stop's), so
    status read it as "None; 0 task evaluations" while the run was spending."""
    cfg = _config(tmp_path)
    root = str(tmp_path / "runs")
    _invoke("evolve", str(cfg), "--set", "iterations=2", "--root", root)
    [row] = RunStore(root).list_runs(kind="evolve")
    run = RunStore(root).open_run(row["id"])
    evals = len(run.read_jsonl("evolve/evals.jsonl"))
    stopped = " ".join(_invoke("evolve", "status", run.id, "--root", root).split())
    assert f"{run.id}: done;" in stopped
    run.append_jsonl("evolve/evals.jsonl", {"task_id": "t-late", "score": 0.0})  # one more, as a resumed run makes
    run.set_status("running")
    going = " ".join(_invoke("evolve", "status", run.id, "--root", root).split())
    decided = {s: sum(1 for c in run.candidates() if c["status"] == s) for s in ("accepted", "rejected")}
    assert (f"{run.id}: running; {decided['accepted']} accepted, {decided['rejected']} rejected, "
            f"{evals + 1} task evaluations") in going


def test_diff_piped_prints_long_lines_whole(tmp_path: Path, monkeypatch) -> None:
    """Off a terminal rich cropped every code line at 80 columns, so a diff of a workflow showed
    half of each changed line."""
    cfg = _config(tmp_path)
    root = str(tmp_path / "runs")
    _invoke("evolve", str(cfg), "--set", "iterations=1", "--root", root)
    [row] = RunStore(root).list_runs(kind="evolve")
    long = "+    if found is None or found.group(1) in guessed:  # " + "x" * 150 + "\n"
    monkeypatch.setattr(Archive, "diff", lambda self, candidate: long)
    root_id = RunStore(root).open_run(row["id"]).candidates()[0]["id"]
    assert long in _invoke("evolve", "diff", row["id"], root_id, "--root", root)


def test_approve_releases_a_waiting_candidate_and_resume_continues(tmp_path: Path) -> None:
    cfg = _config(tmp_path, iterations=1, approval={"required": True, "wait": "end"})
    root = str(tmp_path / "runs")
    out = _invoke("evolve", "run", str(cfg), "--root", root)
    assert "waiting for approval" in out
    run_id = RunStore(root).list_runs(kind="evolve")[0]["id"]
    run = RunStore(root).open_run(run_id)
    held = next(c["id"] for c in run.candidates() if c["status"] == "waiting")
    refused = runner.invoke(app, ["evolve", "approve", run_id, run.candidates()[0]["id"], "--root", root])
    assert refused.exit_code != 0 and "not waiting for approval" in str(refused.exception)
    assert "ratchet evolve resume" in _invoke("evolve", "approve", run_id, held[:6], "--root", root)  # a start of the id
    _invoke("evolve", "resume", run_id, "--root", root)
    assert run.status()["status"] == "done" and {c["id"]: c["status"] for c in run.candidates()}[held] == "accepted"


def test_reject_turns_a_waiting_candidate_down_and_resume_continues_without_it(tmp_path: Path) -> None:
    cfg = _config(tmp_path, iterations=1, approval={"required": True, "wait": "end"})
    root = str(tmp_path / "runs")
    _invoke("evolve", "run", str(cfg), "--root", root)
    run = RunStore(root).open_run(RunStore(root).list_runs(kind="evolve")[0]["id"])
    held = next(c["id"] for c in run.candidates() if c["status"] == "waiting")
    out = _invoke("evolve", "reject", run.id, held, "--reason", "too clever", "--root", root)
    assert f"rejected {held}" in out and "ratchet evolve resume" in out
    twice = runner.invoke(app, ["evolve", "approve", run.id, held, "--root", root])  # a verdict is given once
    assert twice.exit_code != 0 and "already rejected" in str(twice.exception)
    _invoke("evolve", "resume", run.id, "--root", root)
    assert run.status()["status"] == "done" and {c["id"]: c["status"] for c in run.candidates()}[held] == "rejected"
    assert "rejected by a person: too clever (the gate had accepted it: held-in gain" in _invoke("evolve", "diff", run.id, held, "--root", root)


def test_help_shows_examples_and_commands() -> None:
    out = _invoke("evolve", "--help")
    for word in ("ratchet evolve resume RUN_ID", "approve", "reject", "export", "status", "diff"):
        assert word in out


def test_resume_of_a_run_killed_before_its_config_copy_starts_from_run_json(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    root = str(tmp_path / "runs")
    _invoke("evolve", str(cfg), "--set", "iterations=1", "--root", root)
    [row] = RunStore(root).list_runs(kind="evolve")
    run = RunStore(root).open_run(row["id"])
    run.path("evolve/config.yaml").unlink()  # what a kill right after run.json leaves
    kept = len(run.read_jsonl("evolve/evals.jsonl"))
    out = _invoke("evolve", "resume", run.id, "--set", "iterations=2", "--root", root)
    assert out.startswith(f"run {run.id} resumed: 2 steps in all; 2 candidates decided and {kept} task evaluations kept")
    assert "step 2/2" in out and yaml.safe_load(run.path("evolve/config.yaml").read_text())["iterations"] == 2


def test_status_lists_the_steps_that_made_no_candidate(tmp_path: Path) -> None:
    cfg = _config(tmp_path, iterations=1, proposers=[{"name": "noop"}])
    root = str(tmp_path / "runs")
    _invoke("evolve", str(cfg), "--root", root)
    run_id = RunStore(root).list_runs(kind="evolve")[0]["id"]
    status = _invoke("evolve", "status", run_id, "--root", root)
    assert "failed proposals" in status and "noop" in status and "static check" in status
    assert re.search(r"│ 1\s+│ \w+\s+│ noop", status), status  # the first step, numbered as the progress lines number it


def test_commands_refuse_a_run_of_another_kind_and_a_missing_config_by_name(tmp_path: Path) -> None:
    root = str(tmp_path / "runs")
    other = RunStore(root).create_run("agent", {"model": "scripted:", "tasks": []})
    for args in (["status", other.id], ["diff", other.id, "abc"], ["approve", other.id, "abc"],
                 ["reject", other.id, "abc"], ["export", other.id, str(tmp_path / "out")], ["resume", other.id]):
        out = runner.invoke(app, ["evolve", *args, "--root", root])
        assert out.exit_code != 0 and f"run {other.id} is not an evolve run (its kind is agent)" in str(out.exception), args
    assert not other.path("evolve").exists()  # resume wrote no evolve config into the other run
    missing = runner.invoke(app, ["evolve", str(tmp_path / "nope.yaml"), "--root", root])
    assert missing.exit_code != 0 and "config file not found" in str(missing.exception)
    assert "--config" not in missing.exception.hint  # `ratchet evolve` takes the file as an argument


def test_a_run_that_cannot_start_is_not_left_running(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    root = str(tmp_path / "runs")
    bad_model = runner.invoke(app, ["evolve", str(cfg), "--set", "model=bogus:x", "--root", root])
    assert bad_model.exit_code != 0 and "bad model spec 'bogus:x'" in str(bad_model.exception)
    assert RunStore(root).list_runs(kind="evolve") == []  # no run made for a model that cannot load
    bad_selector = runner.invoke(app, ["evolve", str(cfg), "--set", "selector.name=nope", "--root", root])
    assert bad_selector.exit_code != 0 and "unknown selector 'nope'" in str(bad_selector.exception)
    [row] = RunStore(root).list_runs(kind="evolve")
    status = RunStore(root).open_run(row["id"]).status()
    assert status["status"] == "failed" and "unknown selector 'nope'" in status["summary"]["error"]
