"""``ratchet evolve init`` and the JSONL example it matches: a user's first own run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.cli.evolve_init import MANIFEST_YAML, SYSTEM_MD, WORKFLOW_PY, write_starter
from ratchet.contracts import RatchetError
from ratchet.envs.tasks import load_suite, verify
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.preflight import component_problems, load_evolve_config

runner = CliRunner()
EXAMPLE = Path(__file__).parents[2] / "examples" / "jsonl-suite"


def test_init_writes_a_workspace_that_loads_and_refuses_to_overwrite(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, ["evolve", "init", "mine"])
    assert out.exit_code == 0, (out.output, out.exception)
    assert "start it with: ratchet evolve mine/evolve.yaml" in out.output
    cfg = load_evolve_config(tmp_path / "mine" / "evolve.yaml")
    assert cfg.workspace == (tmp_path / "mine").resolve() and component_problems(cfg) == []
    assert load_manifest(cfg.workspace).name == "mine"
    tasks = load_suite(tmp_path / "mine" / "tasks.jsonl")
    assert [t.id for t in tasks] == ["add", "is-even", "initials"]

    (tmp_path / "mine" / "prompts" / "system.md").write_text("mine, edited")
    again = runner.invoke(app, ["evolve", "init", "mine"])
    assert again.exit_code != 0 and isinstance(again.exception, RatchetError)
    assert "already has evolve.yaml" in str(again.exception) and "nothing was written" in str(again.exception)
    assert (tmp_path / "mine" / "prompts" / "system.md").read_text() == "mine, edited"


def test_init_names_a_given_suite_from_the_workspace(tmp_path: Path) -> None:
    suite = tmp_path / "data" / "my-tasks.jsonl"
    suite.parent.mkdir()
    suite.write_text((EXAMPLE / "tasks.jsonl").read_text())
    written = write_starter(tmp_path / "ws", suite, model="scripted:")
    assert [p.name for p in written] == ["evolve.yaml", "manifest.yaml", "workflow.py", "system.md"]
    cfg = load_evolve_config(tmp_path / "ws" / "evolve.yaml")
    assert cfg.suite.options["path"] == str(suite)  # outside the workspace: named in full
    assert len(load_suite(cfg.workspace / cfg.suite.options["path"])) == 16
    inside = tmp_path / "ws2" / "data" / "tasks.jsonl"
    inside.parent.mkdir(parents=True)
    inside.write_text(suite.read_text())
    write_starter(tmp_path / "ws2", inside)
    assert load_evolve_config(tmp_path / "ws2" / "evolve.yaml").suite.options["path"] == "data/tasks.jsonl"  # travels with it
    with pytest.raises(RatchetError, match="no suite file"):
        write_starter(tmp_path / "other", tmp_path / "absent.jsonl")
    assert not (tmp_path / "other").exists()


def test_the_example_is_the_starter_with_a_suite_of_sixteen() -> None:
    """examples/jsonl-suite is what `ratchet evolve init` writes, so the page that teaches one
    teaches the other."""
    assert (EXAMPLE / "workflow.py").read_text() == WORKFLOW_PY
    assert (EXAMPLE / "prompts" / "system.md").read_text() == SYSTEM_MD
    assert (EXAMPLE / "manifest.yaml").read_text() == MANIFEST_YAML.format(name="jsonl-suite")
    cfg = load_evolve_config(EXAMPLE / "evolve.yaml")
    assert cfg.workspace == EXAMPLE.resolve() and component_problems(cfg) == []


def test_every_example_task_passes_its_reference_and_fails_a_wrong_answer() -> None:
    """The grader is checked both ways: a verifier that passed everything would teach nothing."""
    tasks = load_suite(EXAMPLE / "tasks.jsonl")
    assert len(tasks) == 16 and len({t.id for t in tasks}) == 16
    for task in tasks:
        reference = task.metadata["reference"]
        assert verify(task, [f"```python\n{reference}\n```"]).ok, task.id
        name = reference.split("(")[0].removeprefix("def ")
        wrong = f"```python\ndef {name}(*args):\n    return None\n```"
        assert not verify(task, [wrong]).ok, task.id
    assert json.loads((EXAMPLE / "tasks.jsonl").read_text().splitlines()[0])["verifier"]["command"][0] == "{python}"
