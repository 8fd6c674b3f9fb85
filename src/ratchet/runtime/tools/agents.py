"""Sub-agent tools: spawn, resume, wait for, list, close and interrupt worker agents."""

from __future__ import annotations

import json

from ratchet.runtime.tools.registry import ToolContext

TOOLS = ("spawn_agent", "resume_agent", "wait_agent", "list_agents", "close_agent", "interrupt_agent")


def spawn_agent(ctx: ToolContext, task: str, name: str = "") -> str:
    """Start a sub-agent on a task in its own process; it runs while you go on.

    Args:
        task: what the sub-agent should do, self-contained.
        name: an id for it (default agent-N).
    """
    sup = ctx.agent.supervisor
    ctx.guard.check_subagent(sup.running(), ctx.agent.depth)
    return f"started sub-agent {sup.spawn(task, name)}"


def resume_agent(ctx: ToolContext, id: str, message: str = "") -> str:
    """Continue a sub-agent that stopped (interrupted, finished or lost), optionally with a message.

    Args:
        id: the sub-agent's id.
        message: a new instruction for it.
    """
    sup = ctx.agent.supervisor
    ctx.guard.check_subagent(sup.running(), ctx.agent.depth)
    return f"resumed sub-agent {sup.resume(id, message)}"


def wait_agent(ctx: ToolContext, ids: list[str], timeout_s: float = 60) -> str:
    """Wait until the given sub-agents are no longer running (or the timeout passes).

    Args:
        ids: sub-agent ids.
        timeout_s: most seconds to wait.
    """
    return json.dumps(ctx.agent.supervisor.wait(ids, timeout_s), indent=1)


def list_agents(ctx: ToolContext) -> str:
    """List sub-agents with their status (running, submitted, interrupted, lost, closed…)."""
    return json.dumps(ctx.agent.supervisor.list(), indent=1) if ctx.agent.supervisor.ids() else "no sub-agents"


def close_agent(ctx: ToolContext, id: str) -> str:
    """Stop a sub-agent for good (its files stay).

    Args:
        id: the sub-agent's id.
    """
    ctx.agent.supervisor.close(id)
    return f"closed {id}"


def interrupt_agent(ctx: ToolContext, id: str) -> str:
    """Ask a sub-agent to stop before its next step; resume_agent continues it later.

    Args:
        id: the sub-agent's id.
    """
    ctx.agent.supervisor.interrupt(id)
    return f"asked {id} to stop"
