"""Shared helpers: an agent over a scripted model in a temporary repository."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.models.scripted import ScriptedModel
from ratchet.runtime import Agent, PermissionPolicy
from ratchet.runtime.protocols import ToolCall


def tool_reply(tool: str, **arguments) -> str:
    """A reply in the text protocol calling one tool."""
    return f"Next step.\n```tool\n{json.dumps({'name': tool, 'arguments': arguments})}\n```"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "repo"
    d.mkdir()
    (d / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (d / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    return d


@pytest.fixture
def make_agent(tmp_path: Path, workdir: Path):
    made: list[Agent] = []

    def make(responses=(), policy: PermissionPolicy | None = None, **kwargs) -> Agent:
        model = kwargs.pop("model", None) or ScriptedModel(list(responses))
        run_dir = kwargs.pop("run_dir", tmp_path / f"run{len(made)}")
        agent = Agent(model, workdir, run_dir, permissions=policy, **kwargs)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def call(agent: Agent, tool: str, **arguments) -> str:
    """Run one tool call through the agent's hooks, policy and trace, as the loop does."""
    return agent.call_tool(ToolCall(tool, arguments))
