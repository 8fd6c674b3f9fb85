"""The runtime's middleware with a scripted model: the unknown-tool hint and the repeat guard."""

from __future__ import annotations

import re

import pytest

from ratchet.config import ConfigError
from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import AgentConfig, HarnessWorkspace, PermissionPolicy
from ratchet.runtime.config import RepeatGuardConfig, SubmitOnPassConfig, UnknownToolHintConfig
from ratchet.store import read_jsonl

from .conftest import call, tool_reply

FAILING = "echo ran >> count.txt; exit 3"


def results(agent) -> list[str]:
    """The tool results the model read, in order."""
    return [m["content"] for m in agent.messages if m["role"] == "user"][1:]


def test_a_function_called_as_a_tool_is_pointed_at_its_file_and_at_bash(make_agent, workdir):
    agent = make_agent([tool_reply("add", a=2, b=3)], config=HarnessWorkspace().settings(("step_limit=1",)))
    agent.run("add() subtracts; make it add")
    text = results(agent)[0]
    assert text.startswith("[add result]\nerror: there is no tool named `add`.")
    assert "`add` is defined in your code (calc.py, line 1)" in text and "use `bash`" in text
    offered = [t.name for t in agent.offered_tools()]
    assert text.rstrip().endswith(f"Tools: {', '.join(offered)}.")
    assert "spawn_agent" not in text  # not offered by the shipped settings: not listed
    # The command the hint shows runs the model's call as code.
    command = re.search(r'command: (python -c ".*")', text).group(1)
    assert command == 'python -c "from calc import add; print(add(a=2, b=3))"'
    assert call(agent, "bash", command=command).startswith("-1\n")  # the bug the task is about, shown


def test_a_misspelt_tool_gets_the_closest_name_and_an_unknown_one_gets_bash(make_agent):
    agent = make_agent()
    assert "Did you mean `read`?" in call(agent, "raed", path="calc.py")
    other = call(agent, "run_python", code="print(1)")
    assert "no tool named `run_python`" in other and "To run a command or code use `bash`" in other
    assert "defined in your code" not in other


def test_the_hint_never_names_a_file_the_policy_hides(make_agent):
    agent = make_agent(policy=PermissionPolicy(readable=["notes.txt"]))
    text = call(agent, "add", a=1, b=2)
    assert "no tool named `add`" in text and "calc.py" not in text and "defined in your code" not in text


def test_an_identical_failed_call_is_refused_then_stops_the_run(make_agent, workdir):
    agent = make_agent([tool_reply("bash", command=FAILING)] * 3 + [tool_reply("submit", summary="never")])
    result = agent.run("run it")
    assert result.exit_status == "repeated_failure" and result.steps == 3
    assert "`bash` with the same arguments was called 3 times" in result.submission
    assert "exit code 3" in result.submission
    assert (workdir / "count.txt").read_text() == "ran\n"  # run once, refused after
    first, second = results(agent)
    assert first.endswith("[exit code 3]")
    assert "already failed at step 1 and was not run again: exit code 3" in second
    assert "the run stops if this call is repeated 1 more time(s)" in second
    tools = [r for r in read_jsonl(agent.tracer.path) if r["type"] == "tool_call"]
    assert [r["ok"] for r in tools] == [True, False, False]  # the stop is traced too
    assert "repeated_failure" in agent.memory.read(agent.memory.entries("logs")[0]).splitlines()[-1]


def test_the_unknown_tool_loop_of_a_small_model_ends_early(make_agent):
    """What the 0.5B did under the text protocol: the task's function called as a tool, again and again."""
    agent = make_agent(model=ScriptedModel([tool_reply("add", a=2, b=3)], cycle=True),
                       config=AgentConfig(step_limit=8))
    result = agent.run("add() subtracts; make it add")
    assert result.exit_status == "repeated_failure" and result.steps == 3
    assert "there is no tool named `add`" in result.submission


def test_a_change_to_the_files_lets_the_same_call_run_again(make_agent, workdir):
    script = [tool_reply("bash", command=FAILING), tool_reply("write", path="fix.txt", content="x"),
              tool_reply("bash", command=FAILING), tool_reply("read", path="fix.txt"),
              tool_reply("bash", command=FAILING), tool_reply("submit", summary="done")]
    result = make_agent(script).run("run it")
    assert result.exit_status == "submitted"
    assert (workdir / "count.txt").read_text() == "ran\nran\n"  # a write resets; a read does not


def test_different_arguments_are_a_different_call(make_agent, workdir):
    script = [tool_reply("read", path="missing.py"), tool_reply("read", path="missing.py", offset=2),
              tool_reply("read", path="nope.py"), tool_reply("submit", summary="done")]
    agent = make_agent(script)
    assert agent.run("look").exit_status == "submitted"
    assert all("already failed" not in text for text in results(agent))


def test_middleware_is_configured_in_the_settings_and_can_be_turned_off(make_agent, tmp_path):
    off = make_agent(model=ScriptedModel([tool_reply("add", a=2, b=3)], cycle=True),
                     config=AgentConfig(step_limit=4, middleware=[]))
    result = off.run("x")
    assert result.exit_status == "limits_exceeded" and result.steps == 4
    assert all("no tool named 'add'" in text for text in results(off))  # the toolbox's own error
    ws = HarnessWorkspace.init(tmp_path / "ws")
    (ws.path / "settings.yaml").write_text("middleware:\n  - {kind: repeat_guard, stop_after: 1}\n")
    config = ws.settings()
    assert config.middleware == [RepeatGuardConfig(stop_after=1)]
    strict = make_agent(model=ScriptedModel([tool_reply("add", a=2, b=3)], cycle=True), workspace=ws)
    assert strict.run("x").steps == 2
    assert ws.settings(("middleware=[{kind: unknown_tool_hint, run_tool: shell}]",)).middleware == [
        UnknownToolHintConfig(run_tool="shell")]
    (ws.path / "settings.yaml").write_text("middleware:\n  - {kind: repeat_gaurd}\n")
    with pytest.raises(ConfigError, match="middleware"):
        ws.settings()


def test_an_unchanged_successful_read_is_refused_until_something_changes(make_agent, workdir):
    script = [tool_reply("read", path="calc.py"), tool_reply("read", path="calc.py"),
              tool_reply("edit", path="calc.py", old="a - b", new="a + b"), tool_reply("read", path="calc.py"),
              tool_reply("submit", summary="done")]
    agent = make_agent(script)
    assert agent.run("fix add").exit_status == "submitted"
    first, second, _, third = results(agent)
    assert "return a - b" in first
    assert "already ran at step 1 and nothing changed since, so it was not run again" in second
    assert "its result is above (it began: 1\tdef add(a, b):)" in second
    assert "return a + b" in third  # the edit reset the guard: the read ran again


def test_a_read_repeated_forever_stops_the_run(make_agent):
    agent = make_agent(model=ScriptedModel([tool_reply("ls")], cycle=True), config=AgentConfig(step_limit=8))
    result = agent.run("look around")
    assert result.exit_status == "repeated_failure" and result.steps == 3
    assert "`ls` with the same arguments was called 3 times and gave the same result each time" in result.submission


def test_the_guard_remembers_across_a_resume(make_agent, tmp_path, workdir):
    run_dir = tmp_path / "resumed"
    first = make_agent([tool_reply("bash", command=FAILING), tool_reply("read", path="notes.txt")],
                       run_dir=run_dir, config=AgentConfig(step_limit=2))
    assert first.run("run it").exit_status == "limits_exceeded"
    # A new process picks the run up: the same failing command and the same read are still refused.
    again = make_agent([tool_reply("bash", command=FAILING), tool_reply("read", path="notes.txt"),
                        tool_reply("submit", summary="s")], run_dir=run_dir, config=AgentConfig(step_limit=6))
    assert again.resume("go on").exit_status == "submitted"
    later = results(again)[-2:]
    assert "already failed at step 1" in later[0] and "already ran at step 2" in later[1]
    assert (workdir / "count.txt").read_text() == "ran\n"


TESTS = "python -m pytest -q -p no:cacheprovider"
FIX = tool_reply("edit", path="calc.py", old="return a - b", new="return a + b")


@pytest.fixture
def tested(workdir):
    """The workdir with a test of add() that fails until the fix."""
    (workdir / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    return workdir


def test_tests_that_pass_after_an_edit_end_the_run_as_submitted(make_agent, tested):
    agent = make_agent([tool_reply("bash", command=TESTS), FIX, tool_reply("bash", command=TESTS)])
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.steps == 3  # no fourth model call was asked for
    assert result.submission == f"the tests pass after the change at step 2: `{TESTS}` exited 0 (1 passed)"
    failing, _, passing = results(agent)
    assert "1 failed" in failing and failing.endswith("[exit code 1]")
    assert "1 passed" in passing and passing.endswith("[exit code 0]")  # the passing run stays in the conversation
    tools = [r for r in read_jsonl(agent.tracer.path) if r["type"] == "tool_call"]
    assert [(r["name"], r["ok"]) for r in tools] == [("bash", True), ("edit", True), ("bash", True)]
    assert "1 passed" in tools[-1]["result"]
    assert "-> submitted: the tests pass" in agent.memory.read(agent.memory.entries("logs")[0]).splitlines()[-1]
    assert agent.memory.entries("summaries")  # a submitted run is a summary, not a failure


def test_what_does_not_end_the_run(make_agent, tested):
    """Passing tests before any change, a command that only prints "passed", a test command with
    a shell operator, and tests that still fail after an edit: none is a submission."""
    script = [tool_reply("bash", command="echo '1 passed'"), tool_reply("bash", command=f"{TESTS} -k nothing_here"),
              tool_reply("edit", path="calc.py", old="return a - b", new="return a * b"),
              tool_reply("bash", command=TESTS), tool_reply("bash", command=f"{TESTS}; true"),
              tool_reply("submit", summary="gave up")]
    agent = make_agent(script, config=AgentConfig(step_limit=8))
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "gave up" and result.steps == 6
    assert results(agent)[1].endswith("[exit code 5]")  # no test ran: pytest's own "nothing collected"
    assert "1 failed" in results(agent)[3]
    (tested / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    later = make_agent([tool_reply("bash", command=TESTS), tool_reply("submit", summary="already fine")])
    assert later.run("check").submission == "already fine"  # passing before any change ends nothing


def test_with_then_tell_the_model_is_told_and_decides(make_agent, tested):
    config = AgentConfig(middleware=[SubmitOnPassConfig(then="tell")])
    agent = make_agent([FIX, tool_reply("bash", command=TESTS), tool_reply("submit", summary="fixed add")], config=config)
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "fixed add" and result.steps == 3
    assert results(agent)[1].endswith("[exit code 0]\n" + SubmitOnPassConfig().tell_text)


def test_the_change_is_remembered_across_a_resume(make_agent, tmp_path, tested):
    run_dir = tmp_path / "resumed"
    assert make_agent([FIX], run_dir=run_dir, config=AgentConfig(step_limit=1)).run("fix add").exit_status \
        == "limits_exceeded"
    again = make_agent([tool_reply("bash", command=TESTS)], run_dir=run_dir, config=AgentConfig(step_limit=4))
    result = again.resume("go on")
    assert result.exit_status == "submitted" and "after the change at step 1" in result.submission


def test_a_passing_test_command_repeated_unchanged_is_refused_and_forgets_nothing(make_agent, tested):
    """A test run changes no file: repeated with nothing changed it would print the same, and a
    failed edit before it stays failed (a successful `bash` used to forget it)."""
    bad = tool_reply("edit", path="calc.py", old="return a / b", new="return a + b")
    script = [FIX, tool_reply("bash", command=TESTS), tool_reply("bash", command=TESTS), bad,
              tool_reply("bash", command=TESTS), bad, tool_reply("write", path="notes.txt", content="x"),
              tool_reply("bash", command=TESTS), tool_reply("submit", summary="done")]
    agent = make_agent(script, config=AgentConfig(step_limit=10, middleware=[RepeatGuardConfig(stop_after=3)]))
    assert agent.run("fix add").exit_status == "submitted"
    out = results(agent)
    assert out[1].endswith("[exit code 0]")
    assert "already ran at step 2 and nothing changed since, so it was not run again" in out[2]
    assert "its result is above (exit code 0, output ending: 1 passed" in out[2]
    assert "old text not found" in out[3]
    assert "already ran at step 2" in out[4]  # the failed edit changed nothing
    assert "already failed at step 4" in out[5]  # the test run in between did not forget it
    assert out[7].endswith("[exit code 0]")  # a write changed the files: the tests ran again


def test_a_repeated_bash_ls_is_caught_like_a_repeated_ls(make_agent):
    """What the proposer agent did in the coding-agent evolve run: `bash ls` eleven times with
    nothing changed. Every call is judged the same way (same call, same files: same result), so the
    command tool gets no pass because it could change files: this one changed none."""
    agent = make_agent(model=ScriptedModel([tool_reply("bash", command="ls")], cycle=True),
                       config=AgentConfig(step_limit=12))
    result = agent.run("look around")
    assert result.exit_status == "repeated_failure" and result.steps == 3
    assert "`bash` with the same arguments was called 3 times and gave the same result each time" in result.submission
    first, second = results(agent)[:2]
    assert "calc.py" in first and first.endswith("[exit code 0]")
    assert "already ran at step 1 and nothing changed since" in second


def test_a_command_that_changed_the_files_is_refused_while_they_are_as_it_left_them(make_agent, tested, workdir):
    """Run again on the tree it left, a changing call would act on its own result (append once
    more); once something else changed the files it runs again. A command that changes nothing
    is refused the same way, with its result pointed at."""
    (workdir / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    agent = make_agent(config=AgentConfig(middleware=[RepeatGuardConfig(stop_after=5)]))
    for command in ("echo hi >> log.txt", f"{TESTS} && echo hi >> log.txt"):
        assert "[exit code 0]" in call(agent, "bash", command=command)
        again = call(agent, "bash", command=command)
        assert "changed the files" in again and "it would act a second time on its own result" in again
    assert (workdir / "log.txt").read_text() == "hi\n" * 2
    call(agent, "write", path="notes.txt", content="other")
    assert "[exit code 0]" in call(agent, "bash", command="echo hi >> log.txt")
    assert (workdir / "log.txt").read_text() == "hi\n" * 3
    for command in ("cat test_calc.py | grep add", "git status --short 2>/dev/null; ls"):
        assert "[exit code 0]" in call(agent, "bash", command=command)
        assert "already ran" in call(agent, "bash", command=command)


def test_an_edit_whose_new_text_holds_its_old_text_is_applied_once(make_agent, workdir):
    """duration-hours with the 1.5B: old `x * 60`, new `x * 60 * 60`; the same edit sent at every
    step used to apply each time (one more `* 60`) until the step limit. The second and third
    are refused, the third stops the run; the file holds the edit once."""
    (workdir / "duration.py").write_text("def hours(x):\n    return x * 60\n")
    grow = tool_reply("edit", path="duration.py", old="x * 60", new="x * 60 * 60")
    agent = make_agent([grow, tool_reply("bash", command="exit 1"), grow, grow, tool_reply("submit", summary="s")],
                       config=AgentConfig(step_limit=8))
    result = agent.run("hours() gives minutes")
    assert (workdir / "duration.py").read_text() == "def hours(x):\n    return x * 60 * 60\n"
    assert result.exit_status == "repeated_failure" and result.steps == 4
    edited, _, refused = results(agent)
    assert edited == "[edit result]\nedited duration.py"
    assert refused.startswith("[edit result]\nerror: `edit` with the same arguments already ran at step 1 and "
                              "changed the files (edited duration.py); they are as it left them")
    assert "it would act a second time on its own result" in refused
    assert "`edit` with the same arguments was called 3 times" in result.submission


def test_the_same_edit_runs_again_once_the_file_was_changed_back(make_agent, workdir):
    """The rule is the tree, not the call: after the file is put back, the edit applies again."""
    fix = tool_reply("edit", path="calc.py", old="a - b", new="a + b")
    script = [fix, tool_reply("write", path="calc.py", content="def add(a, b):\n    return a - b\n"), fix,
              tool_reply("submit", summary="s")]
    agent = make_agent(script)
    assert agent.run("fix add").exit_status == "submitted"
    assert results(agent)[2] == "[edit result]\nedited calc.py"
    assert "a + b" in (workdir / "calc.py").read_text()


def test_calls_whose_result_changes_with_time_are_never_refused(make_agent):
    """A sub-agent's progress or a job's runs change without any file changing: `volatile` tools run again."""
    agent = make_agent(config=AgentConfig(middleware=[RepeatGuardConfig(volatile=["ls"])]))
    assert "calc.py" in call(agent, "ls") and "calc.py" in call(agent, "ls") and "calc.py" in call(agent, "ls")


def test_a_skill_loaded_lets_a_failed_call_run_again(make_agent):
    """``resets_on``: a call that changes the tools, not the files (load_skill), forgets the failures."""
    agent = make_agent(config=AgentConfig(middleware=[RepeatGuardConfig(resets_on=["ls"])]))
    assert "no tool named" in call(agent, "nope")
    assert "already failed" in call(agent, "nope")
    call(agent, "ls")
    assert "already failed" not in call(agent, "nope")
