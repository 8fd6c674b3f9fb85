"""The loop end to end with a scripted model: traces per call, replay, limits, workspace surfaces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.contracts import RatchetError
from ratchet.models.openai_compat import OpenAIModel
from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import Agent, AgentConfig, HarnessWorkspace, replay_model, solve
from ratchet.store import read_json, read_jsonl

from .conftest import call, tool_reply

FIX = [
    tool_reply("read", path="calc.py"),
    tool_reply("edit", path="calc.py", old="a - b", new="a + b"),
    tool_reply("bash", command="python -c 'import calc; assert calc.add(2, 3) == 5; print(\"ok\")'"),
    tool_reply("submit", summary="add now adds"),
]


def test_run_fixes_the_file_and_traces_every_call(make_agent, workdir):
    agent = make_agent(FIX)
    result = agent.run("add() subtracts; make it add")
    assert result.exit_status == "submitted" and result.submission == "add now adds" and result.steps == 4
    assert "a + b" in (workdir / "calc.py").read_text()
    trace = read_jsonl(agent.tracer.path)
    models = [r for r in trace if r["type"] == "model_call"]
    tools = [r for r in trace if r["type"] == "tool_call"]
    assert [r["step"] for r in models] == [1, 2, 3, 4]
    assert [r["name"] for r in tools] == ["read", "edit", "bash", "submit"]
    assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 and r["latency_s"] >= 0 for r in models)
    assert all(r["duration_s"] >= 0 for r in tools)
    assert all(r["format_version"] == 1 for r in read_jsonl(agent.tracer.path, keep_version=True))
    assert tools[2]["ok"] and "ok" in tools[2]["result"]
    assert sum(r["prompt_tokens"] for r in models) == result.prompt_tokens
    state = read_json(agent.run_dir / "state.json")
    assert state["status"] == "submitted" and len(state["messages"]) == 2 + 4 * 2 - 1
    assert agent.memory.entries("summaries") and agent.memory.entries("trajectories")
    log = agent.memory.read(agent.memory.entries("logs")[0]).splitlines()
    assert len(log) == 4 and log[1].startswith('step 2 edit {"path": "calc.py"') and log[1].endswith("ok: edited calc.py")


def test_a_trace_replays_to_the_same_calls_and_files(make_agent, workdir, tmp_path):
    pristine = tmp_path / "pristine"
    shutil.copytree(workdir, pristine)
    first = make_agent(FIX)
    first.run("fix add")
    again = tmp_path / "again"
    shutil.copytree(pristine, again)
    second = Agent(replay_model(first.tracer.path), again, tmp_path / "replayed")
    result = second.run("fix add")
    calls = lambda a: [(r["name"], r["arguments"]) for r in read_jsonl(a.tracer.path) if r["type"] == "tool_call"]
    assert result.exit_status == "submitted" and calls(second) == calls(first)
    assert (again / "calc.py").read_text() == (workdir / "calc.py").read_text()
    # The same from the command line.
    third = tmp_path / "third"
    shutil.copytree(pristine, third)
    out = CliRunner().invoke(app, ["agent", "replay", str(first.tracer.path), "--statement", "fix add", "-C", str(third),
                                   "--run-dir", str(tmp_path / "cli-replay")])
    assert out.exit_code == 0 and "submitted after 4 steps" in out.output, out.output
    assert (third / "calc.py").read_text() == (workdir / "calc.py").read_text()


def test_format_errors_go_back_to_the_model_then_stop_the_run(make_agent):
    agent = make_agent(["hmm", "still thinking", tool_reply("ls"), "no", "no", "no"],
                       config=AgentConfig(format_error_limit=3))
    result = agent.run("look around")
    assert result.exit_status == "limits_exceeded" and "3 replies in a row" in result.submission
    assert "No tool call found" in agent.messages[3]["content"]  # the model was told the format
    assert "README.md" not in agent.messages[3]["content"]  # no path to copy that the repository may not have
    # the text is a setting (a workspace surface): a run may evolve the example call it shows
    own = make_agent(["hmm", tool_reply("submit", summary="s")],
                     config=AgentConfig(format_error="Reply with one ```tool block; read first."))
    assert own.run("look around").exit_status == "submitted"
    assert own.messages[3]["content"] == "Reply with one ```tool block; read first."


def test_step_and_token_limits(make_agent):
    loop = ScriptedModel([tool_reply("ls")], cycle=True)
    assert make_agent(model=loop, config=AgentConfig(step_limit=3)).run("x").steps == 3
    capped = make_agent(model=loop, config=AgentConfig(token_limit=1500)).run("x")
    assert capped.exit_status == "limits_exceeded" and "token limit" in capped.submission


def test_web_tools_are_off_by_default_and_denied_with_the_rule(make_agent):
    agent = make_agent([tool_reply("web_fetch", url="http://127.0.0.1:1/"), tool_reply("submit", summary="s")])
    assert "web_fetch" not in agent.system_message()
    agent.run("fetch")
    assert "permission denied by denied_tools['web_fetch']" in agent.messages[3]["content"]
    assert read_jsonl(agent.run_dir / "denials.jsonl")[0]["rule"] == "denied_tools['web_fetch']"


def test_every_part_comes_from_the_workspace_files(tmp_path, workdir):
    ws = HarnessWorkspace.init(tmp_path / "ws")
    (ws.path / "system_prompt.md").write_text("CUSTOM PROMPT in {workdir}\n{tool_instructions}")
    (ws.path / "settings.yaml").write_text("step_limit: 4\ntools: ['read', 'shout', 'submit', 'ls']\n")
    (ws.path / "tools.yaml").write_text("descriptions:\n  read: READ DESCRIPTION FROM THE WORKSPACE\n")
    (ws.path / "tools" / "shout.py").write_text(
        'TOOLS = ("shout",)\n\n\ndef shout(ctx, text: str) -> str:\n    """Upper-case text.\n\n    Args:\n'
        '        text: what to shout.\n    """\n    return text.upper()\n')
    (ws.path / "hooks.py").write_text(
        "from ratchet.runtime.errors import ToolError\n\n"
        "def before_tool(agent, call):\n    if call.name == 'ls':\n        raise ToolError('ls is switched off by a hook')\n"
        "    return call\n\n"
        "def after_tool(agent, call, result):\n    return result + ' [seen by hook]'\n")
    model = ScriptedModel([tool_reply("shout", text="hi"), tool_reply("ls"), tool_reply("bash", command="ls")],
                          cycle=True)
    agent = Agent(model, workdir, tmp_path / "run", workspace=ws)
    result = agent.run("go")
    system = agent.messages[0]["content"]
    assert system.startswith("CUSTOM PROMPT in .\n") and "READ DESCRIPTION FROM THE WORKSPACE" in system
    assert "- shout(text: string): Upper-case text." in system and "- bash(" not in system
    assert result.steps == 4 and result.exit_status == "limits_exceeded"
    contents = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
    assert contents[0] == "[shout result]\nHI [seen by hook]"
    assert contents[1] == "[ls result]\nerror: ls is switched off by a hook [seen by hook]"


def test_solve_is_the_proposer_entry_point(workdir, tmp_path):
    result = solve(workdir, "fix add", ScriptedModel(FIX), run_dir=tmp_path / "trace-here")
    assert result.exit_status == "submitted" and "a + b" in (workdir / "calc.py").read_text()
    assert result.trace_path == str(tmp_path / "trace-here" / "trace.jsonl")


def test_solve_refuses_a_missing_workdir_and_gives_each_run_its_own_trace(workdir, tmp_path):
    with pytest.raises(RatchetError, match="is not a directory"):  # not made and worked in
        solve(tmp_path / "typo", "fix add", ScriptedModel(FIX))
    assert not (tmp_path / "typo").exists()
    first = solve(workdir, "fix add", ScriptedModel(FIX))
    (workdir / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    second = solve(workdir, "fix add", ScriptedModel(FIX))
    assert first.trace_path == str(tmp_path / "agent-run" / "trace.jsonl")
    assert second.trace_path == str(tmp_path / "agent-run-2" / "trace.jsonl")
    calls = [r for r in read_jsonl(Path(first.trace_path)) if r["type"] == "model_call"]
    assert len(calls) == first.steps  # the second run's calls are in its own trace only
    with pytest.raises(RatchetError, match="no trace at"):
        replay_model(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(RatchetError, match="records no model calls"):
        replay_model(tmp_path / "empty.jsonl")


def _openai_server(local_http, script: list[dict]) -> str:
    """An OpenAI-compatible endpoint answering each request with the next scripted tool call."""

    def page(method: str, path: str, body: bytes) -> tuple[str, bytes]:
        request, call = json.loads(body), script.pop(0)
        message = {"role": "assistant", "content": None,
                   "tool_calls": [{"id": f"call_{len(local_http.requests)}", "type": "function",
                                   "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}
        return "application/json", json.dumps({
            "id": "x", "object": "chat.completion", "created": 0, "model": request["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}).encode()

    return local_http(page)


def test_native_tool_calls_over_an_openai_compatible_server(local_http, make_agent, workdir):
    url = _openai_server(local_http, [{"name": "edit", "arguments": {"path": "calc.py", "old": "a - b", "new": "a + b"}},
                                      {"name": "submit", "arguments": {"summary": "done natively"}}])
    model = OpenAIModel("tiny", base_url=f"{url}/v1", require_api_key=False)
    agent = make_agent(model=model, config=AgentConfig(protocol="native"))
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "done natively"
    assert "a + b" in (workdir / "calc.py").read_text()
    first, second = (json.loads(body) for _, _, body in local_http.requests)
    assert {t["function"]["name"] for t in first["tools"]} >= {"read", "edit", "bash", "submit"}
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "edited calc.py"}
    assert result.prompt_tokens == 22 and result.completion_tokens == 14


def test_native_protocol_needs_a_backend_with_a_tool_api(make_agent):
    agent = make_agent([tool_reply("ls")], config=AgentConfig(protocol="native"))
    with pytest.raises(Exception, match="no native tool-call API"):
        agent.run("x")


def test_a_failed_call_stops_the_rest_of_its_reply(make_agent, workdir):
    """The 1.5B's reply: an edit whose old text is not in the file, the tests, and submit, in one
    reply. The edit fails, so the tests and submit are not run; the model reads why."""
    reply = "\n".join([tool_reply("edit", path="calc.py", old="return a * b", new="return a + b"),
                       tool_reply("bash", command="touch ran.txt"), tool_reply("submit", summary="tests pass")])
    agent = make_agent([reply, tool_reply("edit", path="calc.py", old="a - b", new="a + b"),
                        tool_reply("submit", summary="fixed")])
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "fixed" and result.steps == 3
    assert not (workdir / "ran.txt").exists()
    first = [m["content"] for m in agent.messages[3:6]]
    assert first[0].startswith("[edit result]\nerror:")
    assert first[1].startswith("[bash result]\nnot run: `edit` failed earlier in this reply")
    assert first[2].startswith("[submit result]\nnot run:") and "(`bash`, `submit`)" in first[2]
    tools = [r for r in read_jsonl(agent.tracer.path) if r["type"] == "tool_call"]
    assert [(r["step"], r["name"], r["ok"]) for r in tools] == [
        (1, "edit", False), (1, "bash", False), (1, "submit", False), (2, "edit", True), (3, "submit", True)]


def test_a_refused_repeat_or_a_failing_command_does_not_stop_the_reply(make_agent, workdir):
    """A refusal ran nothing and a non-zero exit is a result (the 0.5B runs the failing tests
    before its edit): the calls after them still run."""
    first = "\n".join([tool_reply("read", path="calc.py"), tool_reply("bash", command="exit 1")])
    again = "\n".join([tool_reply("read", path="calc.py"), tool_reply("bash", command="exit 1"),
                       tool_reply("edit", path="calc.py", old="a - b", new="a + b")])
    agent = make_agent([first, again, tool_reply("submit", summary="fixed")])
    assert agent.run("fix add").exit_status == "submitted"
    assert "a + b" in (workdir / "calc.py").read_text()
    assert "nothing changed since" in agent.messages[6]["content"]


def test_submit_after_a_failing_command_in_the_same_reply_is_held_back(make_agent, workdir):
    """What the 0.5B wrote on palindrome-punct: a change, the tests (they fail), and submit
    ("the tests pass") in one reply. The tests ran; the submit is not run; the model goes on."""
    reply = "\n".join([tool_reply("write", path="x.txt", content="x"), tool_reply("bash", command="exit 1"),
                       tool_reply("submit", summary="the tests pass")])
    agent = make_agent([reply, tool_reply("edit", path="calc.py", old="a - b", new="a + b"),
                        tool_reply("submit", summary="fixed")])
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "fixed" and result.steps == 3
    assert (workdir / "x.txt").exists()
    held = agent.messages[5]["content"]
    assert held.startswith("[submit result]\nnot run: `bash` exited non-zero earlier in this reply")


@pytest.mark.parametrize("first, why", [
    # chunks-partial with the 1.5B: the tests, already failed and unchanged, refused; then submit
    ("bash", "`bash` was refused (not run: it failed on these files before) earlier in this reply"),
    ("web_fetch", "`web_fetch` failed earlier in this reply"),  # denied by the policy
    ("chunks", "`chunks` failed earlier in this reply"),  # no such tool
])
def test_submit_after_a_refused_call_in_the_same_reply_is_held_back(make_agent, workdir, first, why):
    """A refused call gave no result, so a `submit` written after it in the same reply is a claim
    about a result that never came: it is not run, the model reads why and goes on."""
    calls = {"bash": ("bash", {"command": "exit 1"}), "web_fetch": ("web_fetch", {"url": "http://127.0.0.1:9/"}),
             "chunks": ("chunks", {"lst": [1, 2], "n": 2})}
    name, arguments = calls[first]
    opening = tool_reply("bash", command="exit 1")
    reply = "\n".join([tool_reply(name, **arguments), tool_reply("submit", summary="the tests pass")])
    agent = make_agent([opening, reply, tool_reply("edit", path="calc.py", old="a - b", new="a + b"),
                        tool_reply("submit", summary="fixed")])
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "fixed" and result.steps == 4
    held = [m["content"] for m in agent.messages if m["content"].startswith("[submit result]\nnot run:")]
    assert len(held) == 1 and held[0].startswith(f"[submit result]\nnot run: {why}")
    tools = [r for r in read_jsonl(agent.tracer.path) if r["type"] == "tool_call"]
    assert [(r["step"], r["name"], r["ok"]) for r in tools][1:3] == [(2, name, False), (2, "submit", False)]


def test_submit_after_a_refused_repeat_of_passing_tests_runs(make_agent, workdir):
    """The tests passed on these files; sent again with `submit`, the repeat is refused (nothing
    changed), and the submit rests on the result that stands: it runs."""
    fix = "\n".join([tool_reply("edit", path="calc.py", old="a - b", new="a + b"), tool_reply("bash", command="true")])
    again = "\n".join([tool_reply("bash", command="true"), tool_reply("submit", summary="the tests pass")])
    agent = make_agent([fix, again])
    result = agent.run("fix add")
    assert result.exit_status == "submitted" and result.submission == "the tests pass" and result.steps == 2
    assert any("nothing changed since" in m["content"] for m in agent.messages)


def test_the_prompt_and_the_results_show_a_stable_working_directory(tmp_path):
    """Two runs of one task in two unique scratch directories send the model the same tokens (greedy
    runs repeat), while the tools still work on the real directory."""
    replies = [tool_reply("read", path="calc.py"),
               tool_reply("bash", command="pwd; python -c 'import calc; print(calc.__file__)'; cat nope.py"),
               tool_reply("read", path="/etc/hostname"), tool_reply("submit", summary="done")]
    seen = []
    for name in ("run-a8f3", "run-71c0"):
        repo = tmp_path / name / "repo"
        repo.mkdir(parents=True)
        (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        model = ScriptedModel(list(replies))
        agent = Agent(model, repo, tmp_path / name / "agent")
        assert agent.run("add() subtracts").exit_status == "submitted"
        seen.append([m["messages"] for m in model.calls])
        text = json.dumps(seen[-1])
        assert name not in text and str(tmp_path) not in text
        results = [m["content"] for m in agent.messages if m["role"] == "user"][1:]
        assert "return a - b" in results[0]  # read resolves against the real directory
        assert "calc.py\n" in results[1] and "\n.\n" in results[1]  # the module's path and pwd, as shown
        assert "outside the working directory" in results[2]
        assert "return a - b" in call(agent, "read", path=str(repo / "calc.py"))  # the real path still works
        agent.close()
    assert seen[0] == seen[1]


def test_file_blocks_turn_a_whole_corrected_file_into_a_write(make_agent, workdir):
    (workdir / "tests").mkdir()
    (workdir / "tests" / "test_calc.py").write_text("from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    fixed = "def add(a, b):\n    return a + b\n"
    reply = f"The bug: it subtracts.\n```python\n{fixed}```"
    off = make_agent([reply, tool_reply("submit", summary="s")])
    off.run("add() in calc.py subtracts")
    assert "return a - b" in (workdir / "calc.py").read_text() and "No tool call found" in off.messages[3]["content"]
    on = make_agent([reply, tool_reply("submit", summary="s")], config=AgentConfig(file_blocks=True))
    assert on.run("add() in calc.py subtracts").exit_status == "submitted"
    assert (workdir / "calc.py").read_text() == fixed
    assert on.messages[3]["content"].startswith("[write result]\nwrote ")
    # the test file is never a target: the same block written as the test's code stays a format error
    again = make_agent(["```python\nfrom calc import add\n\ndef test_add():\n    assert True\n```", tool_reply("submit", summary="s")],
                       config=AgentConfig(file_blocks=True))
    again.run("t")
    assert "assert add(2, 3) == 5" in (workdir / "tests" / "test_calc.py").read_text()
