"""An MCP round trip against a small local server started over stdio."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ratchet.runtime import AgentConfig, McpServer

from .conftest import call, tool_reply

pytest.importorskip("mcp")

SERVER = McpServer(name="tiny", command=sys.executable, args=[str(Path(__file__).with_name("mcp_server.py"))])


@pytest.mark.slow
def test_mcp_tools_are_listed_called_and_traced(make_agent):
    agent = make_agent([tool_reply("mcp__tiny__add", a=2, b=40), tool_reply("submit", summary="s")],
                       config=AgentConfig(mcp_servers=[SERVER]))
    tool = agent.toolbox.get("mcp__tiny__add")
    assert tool.description == "Add two integers." and tool.parameters["required"] == ["a", "b"]
    assert "- mcp__tiny__shout(text: string): Upper-case a text." in agent.system_message()
    assert call(agent, "mcp__tiny__shout", text="hi") == "HI"
    assert call(agent, "mcp__tiny__fail", reason="boom").startswith("error: MCP tool tiny/fail reported an error")
    assert "missing argument(s) b" in call(agent, "mcp__tiny__add", a=1)
    result = agent.run("add")
    assert result.exit_status == "submitted"
    assert agent.messages[3]["content"] == "[mcp__tiny__add result]\n42"
    assert agent.mcp == []  # the connection was closed with the run


def test_a_server_that_does_not_start_is_a_clear_error(make_agent):
    broken = McpServer(name="broken", command=sys.executable, args=["-c", "import sys; sys.exit(3)"])
    with pytest.raises(Exception, match="MCP server 'broken'.*did not start"):
        make_agent(config=AgentConfig(mcp_servers=[broken]))
