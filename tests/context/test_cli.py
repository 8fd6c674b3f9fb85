import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.contracts import RatchetError, TaskResult
from ratchet.store import RunStore

runner = CliRunner()


@pytest.fixture
def store(tmp_path):
    runs = RunStore(tmp_path / "runs")
    source = runs.create_run("evolve", {})
    results = [TaskResult(f"T/{k}", 0, float(k % 2), trace=f"trace {k}") for k in range(3)]
    source.write_json("evolve/results/abc/heldin.json", [r.__dict__ | {"failures": []} for r in results])
    return runs, source


def test_learn_show_history_end_to_end_with_the_scripted_model(store, tmp_path):
    runs, source = store
    playbook = tmp_path / "ws" / "playbook.md"
    playbook.parent.mkdir()
    result = runner.invoke(app, ["context", "learn", "--from", source.id[:15], "--playbook", str(playbook),
                                 "--model", "scripted:", "--store", str(runs.root), "--set", "dedup=false"])
    assert result.exit_code == 0, result.output
    assert "learned from 3 trajectories" in result.output
    # The echoing model answers with its prompt: no valid reflection (each one counted), so no
    # lesson reaches the curator and nothing is applied.
    text = " ".join(result.output.split())
    assert "0 operations applied" in text and "0 malformed curator operations" in text
    assert "3 malformed reflections" in text
    context_run = [r for r in runs.list_runs(kind="context")][0]
    assert context_run["status"] == "done"
    listing = runner.invoke(app, ["context", "history", context_run["id"], "--store", str(runs.root)])
    assert listing.exit_code == 0, listing.output
    assert [line.split()[0] for line in listing.output.splitlines()] == ["v1", "v2", "v3"]
    diff = runner.invoke(app, ["context", "history", context_run["id"], "--store", str(runs.root), "--diff", "1", "3"])
    assert diff.exit_code == 0 and "version=1" in diff.output and "version=3" in diff.output
    shown = runner.invoke(app, ["context", "show", str(playbook)])
    assert shown.exit_code == 0 and shown.output.startswith("# Playbook")


def test_learn_from_an_unknown_run_names_it(store, tmp_path):
    runs, _ = store
    result = runner.invoke(app, ["context", "learn", "--from", "nope", "--playbook", str(tmp_path / "p.md"),
                                 "--model", "scripted:", "--store", str(runs.root)])
    assert isinstance(result.exception, RatchetError) and "no run 'nope'" in str(result.exception)


def test_a_bad_setting_names_the_key(store, tmp_path):
    runs, source = store
    result = runner.invoke(app, ["context", "learn", "--from", source.id, "--playbook", str(tmp_path / "p.md"),
                                 "--model", "scripted:", "--store", str(runs.root), "--set", "budget_tokens=-1"])
    assert isinstance(result.exception, RatchetError) and "budget_tokens" in str(result.exception)


def test_show_a_missing_playbook_says_how_to_make_one(tmp_path):
    result = runner.invoke(app, ["context", "show", str(tmp_path / "none.md")])
    assert isinstance(result.exception, RatchetError) and "ratchet context learn" in str(result.exception)


def test_show_with_a_task_prints_only_what_fits(tmp_path):
    path = tmp_path / "p.md"
    path.write_text("# Playbook\n## s\n" + "".join(f"- [ctx-{k:05d}] (+0/-0) lesson number {k} is here\n"
                                                      for k in range(1, 11)))
    # No least relevance: this is about the budget ("anything" is near none of the lessons).
    result = runner.invoke(app, ["context", "show", str(path), "--task", "anything", "--budget", "25",
                                 "--set", "encoder=all-minilm-l6-v2", "--set", "min_relevance=null"])
    assert result.exit_code == 0, result.output
    assert result.output.count("- [ctx-") == 2 and "of 10 items" in result.output
