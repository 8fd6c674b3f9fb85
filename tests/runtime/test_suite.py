"""The coding suite: every grader verified, grading by tests only, the runner's solve rate and resume."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.contracts import RatchetError
from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import HarnessWorkspace
from ratchet.runtime.suite import grade, load_suite, load_suites, prepare, run_suite, verify
from ratchet.store import RunStore, read_jsonl

from .conftest import tool_reply

# The shipped suites, checked as one: coding-basics and coding-fixes (the bigger one the engine's
# coding-agent run splits, so a few-task gain is measurable).
TASKS = load_suites(["coding-basics", "coding-fixes"])


def test_the_suites_have_well_formed_tasks():
    assert len(load_suite("coding-basics")) >= 12 and len(load_suite("coding-fixes")) >= 30
    assert len(TASKS) == len(load_suite("coding-basics")) + len(load_suite("coding-fixes"))
    for t in TASKS:
        assert t.statement and "\n" not in t.statement.strip(), t.id
        assert all((t.repo / rel).is_file() for rel in t.tests), t.id
        assert t.solution.is_file() and not list(t.repo.rglob("*.patch")), t.id
        # The reference fix never touches a test file.
        fixed = set(re.findall(r"^\+\+\+ b/(\S+)", t.solution.read_text(), re.M))
        assert fixed and not fixed & set(t.tests), t.id


@pytest.mark.slow
def test_every_grader_fails_before_the_fix_and_passes_with_it():
    with ThreadPoolExecutor(2) as pool:
        verdicts = dict(zip([t.id for t in TASKS], pool.map(verify, TASKS)))
    for task_id, (before, after) in verdicts.items():
        assert before.score == 0.0 and after.score == 1.0, task_id
        # It fails because an assertion fails, not because the repository is broken.
        assert "failed" in before.trace and "passed" in before.trace, task_id
        assert "Error while collecting" not in before.trace and "ModuleNotFoundError" not in before.trace, task_id
        assert before.failures[0].kind == "test_failed"


@pytest.mark.slow
def test_editing_the_tests_does_not_pass_the_grader(tmp_path):
    task = next(t for t in TASKS if t.id == "median-even")
    work = prepare(task, tmp_path / "work")
    (work / "tests" / "test_stats.py").write_text("def test_nothing():\n    assert True\n")
    assert grade(task, work).score == 0.0
    assert (work / "tests" / "test_stats.py").read_text().startswith("def test_nothing")  # the copy was graded


def _fixing_script(task) -> list[str]:
    """Replies that apply the reference fix, run the tests, and submit (the fix is read here, by
    the test, never by the agent)."""
    return [tool_reply("apply_patch", patch=task.solution.read_text()), tool_reply("bash", command=task.test_command),
            tool_reply("submit", summary="fixed")]


@pytest.mark.slow
def test_run_suite_grades_by_tests_reports_the_solve_rate_and_resumes(tmp_path):
    chosen = [t for t in TASKS if t.id in ("fahrenheit", "flatten-deep")]
    fix_first = _fixing_script(chosen[0])
    claim_only = [tool_reply("submit", summary="I fixed it, trust me")]  # a claim without a change
    model = ScriptedModel(fix_first + claim_only)
    lines: list[str] = []
    summary = run_suite(chosen, model, tmp_path / "run", workspace=HarnessWorkspace(), progress=lines.append)
    assert summary["per_task"] == {"fahrenheit": True, "flatten-deep": False}
    assert summary["solve_rate"] == 0.5 and summary["tokens"] > 0
    assert lines[0].startswith("[1/2] fahrenheit: solved (submitted") and "[2/2] flatten-deep: failed" in lines[1]
    rows = read_jsonl(tmp_path / "run" / "results.jsonl")
    assert [r["exit_status"] for r in rows] == ["submitted", "submitted"]
    assert (tmp_path / "run" / "tasks" / "fahrenheit" / "trace.jsonl").exists()
    # Resumed: finished tasks are not run again (the model has no replies left and is not called).
    again = run_suite(chosen, ScriptedModel([]), tmp_path / "run", workspace=HarnessWorkspace(), progress=lines.append)
    assert again == summary and len(lines) == 2


@pytest.mark.slow
def test_cli_agent_run_prints_progress_lines_and_resumes(tmp_path):
    runner = CliRunner()
    args = ["agent", "run", "--model", "scripted:", "--task", "fahrenheit", "--root", str(tmp_path), "--set",
            "step_limit=2"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "[1/1] fahrenheit: failed (limits_exceeded, 2 steps" in out.output
    assert "solved 0/1 (solve rate 0.000)" in out.output
    run_id = out.output.split("run ")[1].split(":")[0]
    summary = json.loads((tmp_path / run_id / "summary.json").read_text())
    assert summary["solved"] == 0 and summary["tasks"] == 1
    calls = read_jsonl(tmp_path / run_id / "llm_calls.jsonl")  # model calls reach the run index too
    assert len(calls) == 2 and calls[0]["purpose"] == "agent:fahrenheit" and calls[0]["prompt_tokens"] > 0
    resumed = runner.invoke(app, args + ["--resume", run_id])  # the same command line again
    assert resumed.exit_code == 0 and "[1/1]" not in resumed.output and "solved 0/1" in resumed.output
    # --resume alone takes the run's own tasks, settings and model: still its one task, not the suite.
    alone = runner.invoke(app, ["agent", "run", "--resume", run_id, "--root", str(tmp_path)])
    assert alone.exit_code == 0, alone.output
    assert f"run {run_id}: 1 tasks, model scripted:" in alone.output and "solved 0/1" in alone.output
    for flags in (["--task", "flatten-deep"], ["--set", "step_limit=5"], ["--model", "local:smollm2-135m"]):
        changed = runner.invoke(app, ["agent", "run", "--resume", run_id, "--root", str(tmp_path), *flags])
        assert changed.exit_code != 0 and "would change them" in str(changed.exception), flags
    assert len(read_jsonl(tmp_path / run_id / "results.jsonl")) == 1
    bad = runner.invoke(app, ["agent", "run", "--model", "scripted:", "--task", "nope", "--root", str(tmp_path)])
    assert bad.exit_code != 0 and "unknown task id(s) nope" in str(bad.exception or bad.output)


@pytest.mark.slow
def test_the_reference_fix_is_out_of_the_agents_view(tmp_path):
    task = next(t for t in TASKS if t.id == "median-even")
    model = ScriptedModel([tool_reply("bash", command=f"cat {task.solution}; echo end"),
                           tool_reply("read", path=str(task.solution)), tool_reply("submit", summary="peeked")])
    summary = run_suite([task], model, tmp_path / "run", workspace=HarnessWorkspace())
    results = [r for r in read_jsonl(tmp_path / "run" / "tasks" / task.id / "trace.jsonl") if r["type"] == "tool_call"]
    assert "+++ b/stats.py" in task.solution.read_text()  # control: the file has it
    assert "end" in results[0]["result"] and "+++ b/" not in results[0]["result"]
    assert "permission denied by readable" in results[1]["result"]
    assert summary["solved"] == 0


@pytest.mark.slow
def test_the_shipped_workspace_shows_the_task_files_and_takes_an_edit_copied_from_them(tmp_path):
    """What the shipped opening is for: the model sees the code with line numbers and answers with
    an edit whose ``old`` is copied from that view, numbers and all; the grader passes it."""
    from ratchet.runtime import Agent

    task = next(t for t in TASKS if t.id == "fahrenheit")
    work = prepare(task, tmp_path / "work")
    replies = [tool_reply("edit", path="units/temperature.py", old="     6\t    return f * 5 / 9",
                          new="     6\t    return (f - 32) * 5 / 9"),
               tool_reply("bash", command=task.test_command), tool_reply("submit", summary="subtract 32 first")]
    agent = Agent(ScriptedModel(replies), work, tmp_path / "run")
    assert agent.run(task.statement).exit_status == "submitted"
    first = agent.messages[1]["content"]
    assert "Files in the repository:\ntests/test_temperature.py\nunits/__init__.py\nunits/temperature.py" in first
    assert "==> units/temperature.py <==\n     1\tdef celsius_to_fahrenheit(c):" in first
    assert "==> tests/test_temperature.py <==" in first
    assert grade(task, work).score == 1.0


def test_cli_agent_run_refuses_bad_flags_before_making_a_run(tmp_path):
    runner = CliRunner()
    root = ["--root", str(tmp_path)]
    cases = {"cannot be negative": ["--model", "scripted:", "--limit", "-1"],
             "bad model spec 'bogus:x'": ["--model", "bogus:x", "--task", "fahrenheit"],
             "--model is required": ["--task", "fahrenheit"]}
    for message, flags in cases.items():
        out = runner.invoke(app, ["agent", "run", *flags, *root])
        assert out.exit_code != 0 and message in str(out.exception), (message, out.output, out.exception)
    assert not any(tmp_path.glob("*/run.json"))  # no run was made for a command that could not start
    other = RunStore(tmp_path).create_run("evolve", {})
    out = runner.invoke(app, ["agent", "run", "--resume", other.id, *root])
    assert out.exit_code != 0 and f"run {other.id} is not a run of `ratchet agent run` (its kind is evolve)" in str(out.exception)
    assert not (other.dir / "results.jsonl").exists()


def _user_task(root, name="adder", **fields):
    """A task as docs/runtime.md says to add one: task.yaml, repo/ with a failing test, solution.patch."""
    task = root / name
    (task / "repo" / "tests").mkdir(parents=True)
    (task / "repo" / "adder.py").write_text("def add(a, b):\n    return a - b\n")
    (task / "repo" / "tests" / "test_adder.py").write_text("from adder import add\n\n\ndef test_add():\n"
                                                           "    assert add(2, 3) == 5\n")
    data = {"id": name, "statement": "add() in adder.py subtracts; make it add.", "tests": ["tests/test_adder.py"],
            "test_command": "python -m pytest -q -p no:cacheprovider", **fields}
    (task / "task.yaml").write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    (task / "solution.patch").write_text("--- a/adder.py\n+++ b/adder.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
                                         "-    return a - b\n+    return a + b\n")
    return task


def test_a_suite_added_as_the_docs_say_loads_and_verifies(tmp_path, monkeypatch):
    _user_task(tmp_path / "mine")
    [task] = load_suite(tmp_path / "mine")
    before, after = verify(task)
    assert (before.score, after.score) == (0.0, 1.0)
    out = CliRunner().invoke(app, ["agent", "verify", "--suite", str(tmp_path / "mine")])
    assert out.exit_code == 0 and "adder" in out.output, out.output
    # a relative suite path too (the patch is applied from a scratch copy's directory)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(app, ["agent", "verify", "--suite", "mine"])
    assert out.exit_code == 0 and "adder" in out.output, out.output


@pytest.mark.parametrize("fields, message", [
    ({"tests": None}, "tests missing or not of the right kind"),
    ({"statement": ""}, "statement missing or not of the right kind"),
    ({"tests": ["tests/test_nope.py"]}, "test file(s) tests/test_nope.py not in"),
])
def test_a_broken_task_yaml_is_named_with_what_is_wrong(tmp_path, fields, message):
    _user_task(tmp_path / "mine", **fields)
    with pytest.raises(RatchetError, match=re.escape(message)) as info:
        load_suite(tmp_path / "mine")
    assert "task.yaml" in str(info.value) and "Adding a task" in info.value.hint


def test_duplicate_ids_and_a_patch_that_does_not_apply_are_named(tmp_path):
    _user_task(tmp_path / "dup", "a", id="same")
    _user_task(tmp_path / "dup", "b", id="same")
    with pytest.raises(RatchetError, match="task id 'same' is used by"):
        load_suite(tmp_path / "dup")
    _user_task(tmp_path / "mine")
    _user_task(tmp_path / "other", "c", id="same")
    assert [t.id for t in load_suites([str(tmp_path / "other"), str(tmp_path / "mine")])] == ["adder", "same"]
    with pytest.raises(RatchetError, match="task id 'same' is in ") as info:
        load_suites([str(tmp_path / "other"), str(tmp_path / "mine"), str(tmp_path / "other")])
    assert "ids differ" in info.value.hint
    task_dir = _user_task(tmp_path / "bad", "adder")
    (task_dir / "solution.patch").write_text("--- a/adder.py\n+++ b/adder.py\n@@ -1,1 +1,1 @@\n-nothing like it\n+x\n")
    [task] = load_suite(tmp_path / "bad")
    with pytest.raises(RatchetError, match="its solution.patch does not apply"):
        verify(task)
    (task_dir / "solution.patch").unlink()
    with pytest.raises(RatchetError, match="has no solution.patch"):
        verify(task)
