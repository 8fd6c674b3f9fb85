"""The settings' ``restart`` strategy: a fresh attempt on the files as found when one ends unsolved."""

from __future__ import annotations

import os
import shutil

import pytest

from ratchet.config import ConfigError
from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import Agent, AgentConfig, HarnessWorkspace
from ratchet.runtime.attempts import tree_diff
from ratchet.runtime.config import FreshAttemptConfig, ReflectAttemptConfig
from ratchet.store import read_json, read_jsonl

from .conftest import tool_reply

TESTS = "python -m pytest -q -p no:cacheprovider"
FIX = tool_reply("edit", path="calc.py", old="return a - b", new="return a + b")
WRONG = tool_reply("edit", path="calc.py", old="return a - b", new="return a * b")


@pytest.fixture
def tested(workdir):
    (workdir / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return workdir


def restarting(step_limit: int = 8, **strategy) -> AgentConfig:
    return AgentConfig(step_limit=step_limit, restart=FreshAttemptConfig(check=TESTS, **strategy))


def test_a_failed_attempt_starts_over_on_the_files_as_found_from_the_first_messages_sampled(make_agent, tested):
    model = ScriptedModel([tool_reply("bash", command="mkdir -p tmp && echo x > tmp/scratch.txt"), WRONG,
                           tool_reply("submit", summary="done"),  # attempt 1: claims done, the tests fail
                           FIX, tool_reply("bash", command=TESTS)])  # attempt 2: fixed; the passing tests end it
    agent = make_agent(model=model, config=restarting(temperature=0.5))
    result = agent.run("fix add")
    assert (result.exit_status, result.attempts, result.steps) == ("submitted", 2, 5)
    assert (tested / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert not (tested / "tmp").exists()  # what attempt 1 wrote, in the sandbox too, was undone before attempt 2
    first, second = model.calls[0], model.calls[3]
    assert second["messages"] == first["messages"]  # nothing of attempt 1 is shown to attempt 2
    assert first["params"]["temperature"] == 0.0 and first["params"].get("seed") is None
    assert (second["params"]["temperature"], second["params"]["seed"]) == (0.5, 1)
    ended, last = [r for r in read_jsonl(agent.tracer.path) if r["type"] == "attempt"]
    assert (ended["attempt"], ended["exit_status"], ended["passed"], ended["returncode"]) == (1, "submitted", False, 1)
    assert (last["attempt"], last["passed"]) == (2, True)  # attempts were left: the check ran, and passed
    assert "1 failed" in ended["output"]
    failures, summaries = agent.memory.entries("failures"), agent.memory.entries("summaries")
    assert len(failures) == 1 and len(summaries) == 1 and "attempt2" in summaries[0]  # each attempt is kept
    first_log, second_log = (agent.memory.read(f"logs/{agent.run_dir.name}-main{end}.log") for end in ("", "-attempt2"))
    assert "attempt 1 ended at step 3 (submitted)" in first_log and "scratch" not in second_log
    assert not (agent.run_dir / "start-tree").exists()  # the copy goes when the run ends


def test_what_ends_the_run_without_another_attempt(make_agent, tested, tmp_path):
    # the check passes: the model's own submit stands
    fixed = make_agent([FIX, tool_reply("submit", summary="fixed")], config=restarting())
    assert (fixed.run("fix add").attempts, fixed.exit_status) == (1, "submitted")
    (tested / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    # fewer steps left than min_steps: 3 of 4 spent
    late = make_agent([WRONG, tool_reply("ls"), tool_reply("submit", summary="done")],
                      config=restarting(step_limit=4, min_steps=2))
    assert (late.run("fix add").attempts, late.exit_status) == (1, "submitted")
    (tested / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    # the attempts are spent: the last one's ending is the run's
    spent = make_agent([WRONG, tool_reply("submit", summary="one"), WRONG, tool_reply("submit", summary="two")],
                       config=restarting(attempts=2))
    result = spent.run("fix add")
    assert (result.attempts, result.exit_status, result.submission, result.steps) == (2, "submitted", "two", 4)
    # no strategy: the run ends where the attempt did, as it always has
    (tested / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    plain = make_agent([WRONG, tool_reply("submit", summary="done")], config=AgentConfig(step_limit=8))
    assert plain.run("fix add").attempts == 1
    assert not [r for r in read_jsonl(plain.tracer.path) if r["type"] == "attempt"]


def test_the_step_limit_is_shared_by_the_attempts(make_agent, tested):
    """A restart buys no steps: attempt 2 stops at the run's limit."""
    model = ScriptedModel([WRONG, tool_reply("submit", summary="done")] + [tool_reply("ls")] * 6)
    agent = make_agent(model=model, config=restarting(step_limit=4, attempts=5))
    result = agent.run("fix add")
    assert (result.exit_status, result.steps, result.attempts) == ("limits_exceeded", 4, 2)
    assert len(model.calls) == 4


def test_a_resumed_run_is_in_the_attempt_it_was_in(make_agent, tested, tmp_path):
    agent = make_agent([WRONG, tool_reply("submit", summary="done"), tool_reply("ls")],
                       config=restarting(step_limit=3, min_steps=1, temperature=0.9))
    assert agent.run("fix add").attempts == 2
    state = read_json(agent.run_dir / "state.json")
    assert state["attempt"] == 2 and state["start"] == agent.start and len(state["start"]) == 2
    model = ScriptedModel([tool_reply("ls")])
    again = Agent(model, tested, agent.run_dir, config=restarting(step_limit=4, min_steps=1, temperature=0.9))
    try:
        again.resume("go on")
    finally:
        again.close()
    assert again.attempt == 2 and (model.calls[0]["params"]["temperature"], model.calls[0]["params"]["seed"]) == (0.9, 1)


def test_the_strategy_loads_from_settings_yaml_and_a_wrong_one_is_refused(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "settings.yaml").write_text("restart: {kind: fresh, attempts: 2, check: make test}\n")
    restart = HarnessWorkspace(ws).settings().restart
    assert (restart.attempts, restart.check, restart.min_steps) == (2, "make test", 2)
    (ws / "settings.yaml").write_text("restart: {attempts: 2}\n")  # fresh is the kind a bare strategy is
    assert HarnessWorkspace(ws).settings().restart.kind == "fresh"
    (ws / "settings.yaml").write_text("restart: {kind: reflect, max_diff_chars: 500}\n")
    restart = HarnessWorkspace(ws).settings().restart
    assert isinstance(restart, ReflectAttemptConfig) and (restart.temperature, restart.max_diff_chars) == (0.0, 500)
    for wrong, named in (("{kind: retry}", "'fresh', 'reflect'"), ("{kind: reflect, note: 'see {trace}'}", "trace"),
                         ("{kind: fresh, temperature: 0}", "temperature")):
        (ws / "settings.yaml").write_text(f"restart: {wrong}\n")
        with pytest.raises(ConfigError, match=named):
            HarnessWorkspace(ws).settings()


def test_a_reflecting_attempt_is_shown_the_ended_attempts_change_and_check_output(make_agent, tested):
    """kind: reflect: the files are put back as with fresh, and the new attempt's first prompt ends
    with the diff the ended attempt left and the check's output; greedy by default, since that
    prompt is not the first attempt's."""
    model = ScriptedModel([WRONG, tool_reply("submit", summary="done"), FIX, tool_reply("bash", command=TESTS)])
    agent = make_agent(model=model, config=AgentConfig(step_limit=8, restart=ReflectAttemptConfig(check=TESTS)))
    result = agent.run("fix add")
    assert (result.exit_status, result.attempts) == ("submitted", 2)
    first, second = model.calls[0]["messages"], model.calls[2]["messages"]
    assert second[0] == first[0] and len(second) == len(first) == 2
    note = second[1]["content"].removeprefix(first[1]["content"])
    assert note != second[1]["content"] and f"did not pass `{TESTS}`" in note
    assert "--- a/calc.py\n+++ b/calc.py\n" in note and "-    return a - b\n+    return a * b" in note
    assert "1 failed" in note and "assert 6 == 5" in note  # the check's output: what the wrong change gave
    assert (model.calls[2]["params"]["temperature"], model.calls[2]["params"]["seed"]) == (0.0, 1)
    assert agent.start[1]["content"] == first[1]["content"]  # a later restart's note replaces this one
    assert any("with the ended attempt's diff and check output" in line for line in agent.log)


def test_a_reflecting_attempt_after_one_that_changed_nothing_is_told_so(make_agent, tested):
    model = ScriptedModel([tool_reply("submit", summary="done"), tool_reply("submit", summary="still")])
    agent = make_agent(model=model, config=AgentConfig(step_limit=8, restart=ReflectAttemptConfig(
        check=TESTS, attempts=2, max_output_chars=200)))
    agent.run("fix add")
    note = model.calls[1]["messages"][1]["content"]
    assert "(it changed no file)" in note and "[...]" in note and "1 failed" in note  # the output's tail


def test_the_diff_of_an_attempt_names_added_removed_and_binary_files_and_skips_what_is_not_the_tree(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        (root / "pkg").mkdir(parents=True)
        (root / "same.py").write_text("x = 1\n")
        (root / ".git").mkdir()
        (root / ".git" / "HEAD").write_text(f"{root.name}\n")
    (before / "pkg" / "gone.py").write_text("old\n")
    (after / "pkg" / "new.py").write_text("new\n")
    (before / "blob.bin").write_bytes(b"\xff\x00")
    (after / "blob.bin").write_bytes(b"\xff\x01")
    (after / "agent-run").mkdir()
    (after / "agent-run" / "trace.jsonl").write_text("{}\n")
    diff = tree_diff(before, after, lambda directory, names: {"agent-run"} & set(names))
    assert "--- a/pkg/gone.py\n+++ /dev/null\n" in diff and "--- /dev/null\n+++ b/pkg/new.py\n" in diff
    assert "Binary file blob.bin changed\n" in diff
    assert "same.py" not in diff and "HEAD" not in diff and "trace.jsonl" not in diff
    assert tree_diff(before, before) == ""
    (after / "huge.txt").write_text("x\n" * 600_000)
    assert "Large file huge.txt changed (1200000 bytes)\n" in tree_diff(before, after)
    shutil.copy2(after / "pkg" / "new.py", before / "pkg" / "new.py")  # the times as a copy keeps them
    (after / "pkg" / "new.py").write_text("NEW\n")  # same size, written later: read and compared
    os.utime(after / "pkg" / "new.py", ns=(1, (before / "pkg" / "new.py").stat().st_mtime_ns + 10**9))
    assert "-new\n+NEW\n" in tree_diff(before, after)


def test_a_candidate_with_the_strategy_restarts_inside_the_coding_suite(tmp_path):
    """The engine's coding suite with a candidate whose settings.yaml declares `restart`: the
    task's tests (run by the check in the sandbox) fail after attempt 1, so attempt 2 runs,
    sampled; the suite's own grader still decides, and its trace shows both attempts."""
    from ratchet.contracts import Candidate
    from ratchet.runtime.config import CodingSuiteOptions
    from ratchet.runtime.engine_suite import CodingAgentSuite

    class Ctx:
        model = ScriptedModel([tool_reply("submit", summary="done")], cycle=True)

    suite = CodingAgentSuite(CodingSuiteOptions(tasks=["fahrenheit"]), Ctx())
    settings = (f"restart: {{kind: fresh, attempts: 2, temperature: 0.6, check: '{TESTS}'}}\n")
    candidate = Candidate.from_files("coding-agent", {"settings.yaml": settings})
    [result] = suite.evaluate(candidate, suite.tasks(), 3)
    assert result.score == 0.0 and (result.metrics["steps"], result.metrics["attempts"]) == (2.0, 2.0)
    first, second = (c["params"] for c in Ctx.model.calls)
    # the first attempt is greedy; the evaluation seed picks the restart's sample (seed 3 + 1)
    assert first["temperature"] == 0.0 and (second["temperature"], second["seed"]) == (0.6, 4)
    assert "agent: submitted after 2 steps and 2 attempts" in result.trace
    assert "attempt 1 ended at step 1 (submitted)" in result.trace and "attempt 2:" in result.trace


@pytest.mark.slow
def test_a_restart_closes_the_sub_agents_the_ended_attempt_left_running(tested, tmp_path):
    child = [tool_reply("bash", command="sleep 60")]
    model = ScriptedModel([tool_reply("spawn_agent", task="slow job", name="slow"), tool_reply("submit", summary="x"),
                           FIX, tool_reply("bash", command=TESTS)])
    agent = Agent(model, tested, tmp_path / "run", config=restarting(), model_spec="scripted:",
                  model_options={"responses": child})
    try:
        assert agent.run("fix add").attempts == 2
        assert agent.supervisor.status("slow")["status"] == "closed"
    finally:
        agent.close()


def test_the_suite_runner_records_the_attempts(tmp_path):
    from ratchet.runtime.suite import load_suite, run_suite

    task = next(t for t in load_suite("coding-basics") if t.id == "fahrenheit")
    fix = [tool_reply("apply_patch", patch=task.solution.read_text()), tool_reply("bash", command=task.test_command)]
    model = ScriptedModel([tool_reply("submit", summary="trust me")] + fix)
    lines: list[str] = []
    summary = run_suite([task], model, tmp_path / "run", workspace=HarnessWorkspace(), progress=lines.append,
                        overrides=("restart.attempts=2", f"restart.check={task.test_command}"))
    assert summary["solved"] == 1 and read_jsonl(tmp_path / "run" / "results.jsonl")[0]["attempts"] == 2
    assert lines[0].startswith("[1/1] fahrenheit: solved (submitted, 3 steps, 2 attempts")
