"""The built-in tool set, and how an agent's toolbox is assembled from it and its workspace."""

from __future__ import annotations

from typing import Any

from ratchet.runtime.mcp_client import McpConnection
from ratchet.runtime.tools import agents, cron, files, memory, shell, skills, web
from ratchet.runtime.tools.registry import Tool, ToolBox, ToolContext, tool_from_function, tools_of_module

BUILTIN_MODULES = (files, shell, memory, agents, cron, skills, web)

__all__ = ["BUILTIN_MODULES", "Tool", "ToolBox", "ToolContext", "build_toolbox", "tool_from_function"]


def build_toolbox(agent: Any) -> ToolBox:
    """Built-in tools, then the workspace's ``tools/*.py`` (replacing built-ins of the same name),
    then the MCP servers' tools; descriptions from the workspace's ``tools.yaml`` win."""
    box = ToolBox(t for m in BUILTIN_MODULES for t in tools_of_module(m))
    for module in agent.workspace.tool_modules():
        for tool in tools_of_module(module):
            box.add(tool)
    agent.mcp = [McpConnection(server) for server in agent.config.mcp_servers]
    for connection in agent.mcp:
        for tool in connection.agent_tools():
            box.add(tool)
    for name, text in agent.workspace.descriptions().items():
        if name in box.tools:
            box.tools[name].description = text
    return box
