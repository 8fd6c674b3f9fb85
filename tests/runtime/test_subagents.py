"""Sub-agents are real processes running at once; a parent killed and started again recovers them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import Agent, AgentConfig, PermissionPolicy
from ratchet.store import read_json, read_jsonl

from .conftest import call, wait_for, tool_reply

CHILD = [tool_reply("bash", command="sleep 2; echo slept"), tool_reply("submit", summary="child done")]


def _bash_window(agent_dir: Path) -> tuple[float, float]:
    rec = next(r for r in read_jsonl(agent_dir / "trace.jsonl") if r["type"] == "tool_call" and r["name"] == "bash")
    return rec["at"] - rec["duration_s"], rec["at"]


PARENT = textwrap.dedent('''
    import json, sys
    from ratchet.models.scripted import ScriptedModel
    from ratchet.runtime import Agent
    workdir, run_dir, child = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    def reply(tool, **args):
        return "```tool\\n" + json.dumps({"name": tool, "arguments": args}) + "\\n```"
    model = ScriptedModel([reply("spawn_agent", task="first job", name="a"),
                           reply("spawn_agent", task="second job", name="b"),
                           reply("bash", command="sleep 120")])
    Agent(model, workdir, run_dir, model_spec="scripted:", model_options={"responses": child}).run("delegate")
''')


def _start_parent(workdir: Path, run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", PARENT, str(workdir), str(run_dir), json.dumps(CHILD)], env=env,
                            start_new_session=True)


@pytest.mark.slow
def test_sub_agents_run_concurrently_and_a_restarted_parent_recovers_them(workdir, tmp_path):
    run_dir = tmp_path / "parent"
    parent = _start_parent(workdir, run_dir)
    agents = run_dir / "agents"
    wait_for(lambda: all((agents / n / "process.json").exists() for n in "ab"))
    wait_for(lambda: (run_dir / "state.json").exists() and read_json(run_dir / "state.json")["steps"] >= 3)
    os.killpg(parent.pid, signal.SIGKILL)  # the parent dies mid-run, while both children work
    parent.wait()
    # A new parent on the same run directory finds them through their files alone.
    again = Agent(ScriptedModel([]), workdir, run_dir, model_spec="scripted:", model_options={"responses": CHILD})
    listed = {s["id"]: s["status"] for s in again.supervisor.list()}
    assert set(listed) == {"a", "b"} and set(listed.values()) <= {"running", "submitted"}
    states = json.loads(call(again, "wait_agent", ids=["a", "b"], timeout_s=90))
    assert [(s["id"], s["status"], s["submission"]) for s in states] == [("a", "submitted", "child done"),
                                                                        ("b", "submitted", "child done")]
    (a0, a1), (b0, b1) = _bash_window(agents / "a"), _bash_window(agents / "b")
    assert a0 < b1 and b0 < a1, "the two sub-agents' commands overlapped in time"
    assert read_json(agents / "a" / "process.json")["pid"] != read_json(agents / "b" / "process.json")["pid"]
    again.close()


@pytest.mark.slow
def test_a_sub_agent_killed_mid_run_is_lost_then_resumed_from_its_saved_state(workdir, tmp_path):
    parent = Agent(ScriptedModel([]), workdir, tmp_path / "p", model_spec="scripted:",
                   model_options={"responses": [tool_reply("bash", command="sleep 4"), tool_reply("submit", summary="ok")]})
    call(parent, "spawn_agent", task="long job", name="w")
    child = tmp_path / "p" / "agents" / "w"
    # Kill it while its first command runs (the model call is traced before the tool runs).
    wait_for(lambda: (child / "trace.jsonl").exists() and read_jsonl(child / "trace.jsonl"))
    os.killpg(read_json(child / "process.json")["pid"], signal.SIGKILL)
    wait_for(lambda: parent.supervisor.status("w")["status"] == "lost")
    saved = len(read_json(child / "state.json")["messages"])
    # A parent that resumes recovers every lost sub-agent.
    restarted = Agent(ScriptedModel([tool_reply("wait_agent", ids=["w"], timeout_s=60), tool_reply("submit", summary="p")]),
                      workdir, tmp_path / "p", model_spec="scripted:",
                      model_options={"responses": [tool_reply("bash", command="sleep 4"), tool_reply("submit", summary="ok")]})
    restarted.messages = []
    result = restarted.resume("continue")
    assert result.exit_status == "submitted"
    status = restarted.supervisor.status("w")
    assert status["status"] == "submitted" and status["submission"] == "ok"
    messages = read_json(child / "state.json")["messages"]
    assert len(messages) > saved and messages[:saved] == read_json(child / "state.json")["messages"][:saved]


@pytest.mark.slow
def test_interrupt_resume_close_and_limits(workdir, tmp_path):
    script = [tool_reply("bash", command="sleep 2"), tool_reply("ls"), tool_reply("glob", pattern="*"),
              tool_reply("read", path="notes.txt"), tool_reply("submit", summary="fin")]
    parent = Agent(ScriptedModel([]), workdir, tmp_path / "p", model_spec="scripted:",
                   model_options={"responses": script},
                   permissions=PermissionPolicy(max_subagents=1, max_subagent_depth=1))
    assert "started sub-agent agent-1" == call(parent, "spawn_agent", task="job")
    assert "permission denied by max_subagents" in call(parent, "spawn_agent", task="another")
    trace = tmp_path / "p" / "agents" / "agent-1" / "trace.jsonl"
    wait_for(lambda: trace.exists() and read_jsonl(trace))  # it is in its first command
    call(parent, "interrupt_agent", id="agent-1")
    (state,) = json.loads(call(parent, "wait_agent", ids=["agent-1"], timeout_s=60))
    assert state["status"] == "interrupted" and state["steps"] == 1
    assert "still running" not in call(parent, "resume_agent", id="agent-1", message="carry on please")
    (state,) = json.loads(call(parent, "wait_agent", ids=["agent-1"], timeout_s=60))
    assert state["status"] == "submitted"
    child_messages = read_json(tmp_path / "p" / "agents" / "agent-1" / "state.json")["messages"]
    assert any(m["content"] == "carry on please" for m in child_messages)
    call(parent, "close_agent", id="agent-1")
    assert json.loads(call(parent, "list_agents"))[0]["status"] == "closed"
    assert "no sub-agent 'nobody'" in call(parent, "close_agent", id="nobody")
    nested = Agent(ScriptedModel([]), workdir, tmp_path / "deep", depth=1, model_spec="scripted:")
    assert "permission denied by max_subagent_depth" in call(nested, "spawn_agent", task="x")
    no_spec = Agent(ScriptedModel([]), workdir, tmp_path / "nospec")
    assert "need a model spec" in call(no_spec, "spawn_agent", task="x")
    for a in (parent, nested, no_spec):
        a.close()


@pytest.mark.slow
def test_sub_agents_model_calls_count_in_the_parents_index_and_tokens(workdir, tmp_path):
    child_script = [tool_reply("ls"), tool_reply("submit", summary="child done")]
    parent_script = [tool_reply("spawn_agent", task="look around", name="kid"),
                     tool_reply("wait_agent", ids=["kid"], timeout_s=60), tool_reply("submit", summary="p")]
    seen: list = []
    parent = Agent(ScriptedModel(parent_script), workdir, tmp_path / "p", model_spec="scripted:",
                   model_options={"responses": child_script}, on_model_call=seen.append)
    result = parent.run("delegate")
    assert result.exit_status == "submitted"
    child_calls = [r for r in read_jsonl(tmp_path / "p" / "agents" / "kid" / "trace.jsonl") if r["type"] == "model_call"]
    child_tokens = sum(r["prompt_tokens"] + r["completion_tokens"] for r in child_calls)
    assert len(child_calls) == 2 and child_tokens > 0
    # The index saw the parent's 3 calls and the child's 2, each under its agent's name.
    assert sorted(c.purpose for c in seen) == ["agent:kid"] * 2 + ["agent:main"] * 3
    own = sum(r["prompt_tokens"] + r["completion_tokens"] for r in read_jsonl(result.trace_path) if r["type"] == "model_call")
    assert result.subagent_tokens == child_tokens
    assert result.prompt_tokens + result.completion_tokens == own + child_tokens
    # A parent started again on the same run directory counts nothing twice.
    again = Agent(ScriptedModel([tool_reply("submit", summary="again")]), workdir, tmp_path / "p",
                  model_spec="scripted:", on_model_call=seen.append)
    again.resume("once more")
    assert [c.purpose for c in seen].count("agent:kid") == 2
    assert again.subagent_tokens["prompt"] + again.subagent_tokens["completion"] == child_tokens


def test_sub_agents_tokens_go_against_the_parents_token_limit(workdir, tmp_path):
    parent = Agent(ScriptedModel([tool_reply("ls")] * 5), workdir, tmp_path / "p",
                   config=AgentConfig(token_limit=10_000))
    # A finished sub-agent's trace, as its worker leaves it: 20,000 tokens in one call.
    kid = tmp_path / "p" / "agents" / "kid"
    kid.mkdir(parents=True)
    (kid / "spec.json").write_text(json.dumps({"task": "t"}))
    (kid / "trace.jsonl").write_text(json.dumps({"type": "model_call", "agent": "kid", "at": 1.0, "model": "m",
                                                 "prompt_tokens": 19_000, "completion_tokens": 1_000,
                                                 "latency_s": 0.5}) + "\n")
    result = parent.run("go")
    assert result.exit_status == "limits_exceeded" and result.steps == 0
    assert "token limit 10000 reached (20000 used)" in result.submission
