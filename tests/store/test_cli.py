"""`ratchet runs` and `ratchet config` through the command line."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ratchet.cli import config as config_cli
from ratchet.cli import runs as runs_cli
from ratchet.contracts import Candidate, Evaluation, LLMCall, RatchetError
from ratchet.store import RunStore


@pytest.fixture
def app() -> typer.Typer:
    # A fresh app with only these groups: the test does not depend on other command modules.
    app = typer.Typer()
    runs_cli.register(app)
    config_cli.register(app)
    return app


def invoke(app: typer.Typer, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


@pytest.fixture
def populated(tmp_path: Path) -> tuple[RunStore, str]:
    store = RunStore(tmp_path / "runs")
    run = store.create_run("autoharness", {"env": "TicTacToe-v0"})
    root = Candidate.from_files("harness", {"h.py": "a"})
    child = Candidate.from_files("harness", {"h.py": "b"}, parent_id=root.id)
    run.add_candidate(root)
    run.add_candidate(child)
    run.set_candidate_status(child.id, "accepted", 0.875)
    run.add_evaluation(Evaluation(root.id, "search", 0.25))
    run.record_llm_call(LLMCall("local:q", "refine", 1200, 300, 2.0, True))
    run.trajectory_writer("chat", session_id="sess-9").write([{"role": "user", "content": "x"}])
    run.set_status("done", {"best_candidate": child.id})
    store.create_run("serve", {})
    return store, run.id


def test_runs_list(app: typer.Typer, populated: tuple[RunStore, str]) -> None:
    store, run_id = populated
    out = invoke(app, "runs", "list", "--root", str(store.root))
    assert run_id in out and "serve" in out and "0.875" in out and "1,500" in out and "done" in out
    out = invoke(app, "runs", "list", "--root", str(store.root), "--kind", "serve")
    assert run_id not in out and "serve" in out
    assert "no runs" in invoke(app, "runs", "list", "--root", str(store.root), "--kind", "nothing")


def test_runs_show(app: typer.Typer, populated: tuple[RunStore, str]) -> None:
    store, run_id = populated
    out = invoke(app, "runs", "show", run_id[:18], "--root", str(store.root))
    run = store.open_run(run_id)
    root_id, child_id = (r["id"] for r in run.candidates())
    assert run_id in out and "TicTacToe-v0" in out and "best_candidate" in out
    assert root_id in out and child_id in out and "0.875" in out and "0.250" in out  # tree with scores
    tree = out[out.index("candidates (2)"):]
    assert tree.index(root_id) < tree.index(child_id)  # the child is drawn under its parent
    assert "refine" in out and "1,200" in out


def test_runs_show_unknown(app: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["runs", "show", "nope", "--root", str(tmp_path)])
    assert isinstance(result.exception, RatchetError)


def test_runs_delete_session(app: typer.Typer, populated: tuple[RunStore, str]) -> None:
    store, run_id = populated
    out = invoke(app, "runs", "delete-session", "sess-9", "--root", str(store.root))
    assert "1 record" in out
    assert store.open_run(run_id).read_trajectory("chat") == []


def test_runs_reindex(app: typer.Typer, populated: tuple[RunStore, str]) -> None:
    store, _ = populated
    assert "reindexed 2 run(s)" in invoke(app, "runs", "reindex", "--root", str(store.root))


def test_config_show_lists_known_configs(app: typer.Typer) -> None:
    out = invoke(app, "config", "show")
    for name in config_cli.CONFIGS:
        assert name in out
    assert "Where runs are kept" in out


def test_config_show_one(app: typer.Typer) -> None:
    out = invoke(app, "config", "show", "store")
    assert "root" in out and "busy_timeout_s" in out and "RATCHET_RUNS" in out
    assert "busy_timeout_s" in invoke(app, "config", "show", "StoreConfig")  # class names work too
    assert "busy_timeout_s" in invoke(app, "config", "show", "ratchet.store.config:StoreConfig")


def test_config_show_unknown_and_missing_module(app: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(app, ["config", "show", "nosuch"])
    assert isinstance(result.exception, RatchetError) and "store" in (result.exception.hint or "")
    monkeypatch.setitem(config_cli.CONFIGS, "future", "ratchet.not_written_yet:FutureConfig")
    out = invoke(app, "config", "show")
    assert "future" in out and "not available" in out
    result = CliRunner().invoke(app, ["config", "show", "future"])
    assert isinstance(result.exception, RatchetError) and "not available" in str(result.exception)


def test_config_validate(app: typer.Typer, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("root: /tmp/somewhere\nbusy_timeout_s: 5\n")
    out = invoke(app, "config", "validate", str(good), "--kind", "store", "--set", "busy_timeout_s=7")
    assert "valid" in out and "busy_timeout_s: 7.0" in out

    bad = tmp_path / "bad.yaml"
    bad.write_text("rooot: x\nbusy_timeout_s: -1\n")
    result = CliRunner().invoke(app, ["config", "validate", str(bad), "--kind", "store"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "rooot" in result.output and "busy_timeout_s" in result.output and "root" in result.output

    result = CliRunner().invoke(app, ["config", "validate", str(tmp_path / "absent.yaml"), "--kind", "store"])
    assert result.exit_code == 1 and "not found" in result.output


def test_read_commands_do_not_create_a_store(app: typer.Typer, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert "no runs" in invoke(app, "runs", "list", "--root", str(missing))
    result = CliRunner().invoke(app, ["runs", "show", "x", "--root", str(missing)])
    assert isinstance(result.exception, RatchetError) and "RATCHET_RUNS" in (result.exception.hint or "")
    assert not missing.exists()


def test_config_validate_lists_every_problem_as_written(app: typer.Typer, tmp_path: Path) -> None:
    """Each bad key on a line of its own, the evolve components' options included (the engine
    would stop at the first as it builds them), and a value like ``[x]`` shown, not read as markup."""
    bad = tmp_path / "evolve.yaml"
    bad.write_text("workspace: ws\niterations: '[x]'\nseeds: []\nsuite: {name: jsonl, options: {path: t.jsonl}}\n")
    result = CliRunner().invoke(app, ["config", "validate", str(bad), "--kind", "evolve"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    problems = [line for line in result.output.splitlines() if line.startswith("  - ")]
    assert len(problems) == 2 and "2 problems" in result.output
    assert any(p.startswith("  - iterations = '[x]'") for p in problems)  # the brackets survive
    assert any(p.startswith("  - seeds = []") for p in problems)

    components = tmp_path / "components.yaml"
    components.write_text("workspace: ws\nsuite: {name: jsonl, options: {path: t.jsonl, nope: 1}}\n"
                          "selector: {name: nosuch}\ngate: {name: paired, options: {alpha: 2, resamples: 5}}\n")
    result = CliRunner().invoke(app, ["config", "validate", str(components), "--kind", "evolve"], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    problems = [line for line in result.output.splitlines() if line.startswith("  - ")]
    assert [p.split(":")[0].split(" =")[0] for p in problems] == [
        "  - suite.options.nope", "  - selector.name", "  - gate.options.alpha", "  - gate.options.resamples"]

    good = tmp_path / "good.yaml"
    good.write_text("workspace: ws\nsuite: {name: jsonl, options: {path: t.jsonl}}\n")
    assert "valid" in invoke(app, "config", "validate", str(good), "--kind", "evolve")


def test_the_run_store_flag_is_store_and_the_old_names_still_work(app: typer.Typer,
                                                                  populated: tuple[RunStore, str]) -> None:
    store, run_id = populated
    assert run_id in invoke(app, "runs", "list", "--store", str(store.root))
    assert run_id in invoke(app, "runs", "list", "--root", str(store.root))  # the old name, hidden
    shown = invoke(app, "runs", "list", "--help")
    assert "--store" in shown and "--root" not in shown
    result = CliRunner().invoke(app, ["runs", "list", "--store", str(store.root), "--root", str(store.root / "other")])
    assert isinstance(result.exception, RatchetError) and "two different run stores" in str(result.exception)


def test_every_command_names_the_store_by_store_with_its_old_name_hidden() -> None:
    """`--store` in the help of every command that takes a run store; no old name shown anywhere."""
    import click

    from ratchet.cli import app as full_app

    command = typer.main.get_command(full_app)
    with_store = []

    def walk(cmd: click.Command, path: str) -> None:
        names = {opt for p in cmd.params for opt in p.opts if not getattr(p, "hidden", False)}
        assert not names & {"--root", "--run-dir", "--runs-root"} or path == "agent solve" or path == "agent replay", path
        if "--store" in names:
            with_store.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(command, "")
    for expected in ("play", "autoharness", "autoharness export", "evolve run", "evolve resume", "evolve status",
                     "runs list", "runs show", "agent run", "ui", "serve", "serve status", "rollback"):
        assert expected in with_store, (expected, with_store)
