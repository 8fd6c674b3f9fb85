"""The agent harness runtime: a small agent loop whose every part is a file of a harness workspace.

Tools (files, shell in the sandbox, git, sub-agents, cron, MCP, skills, web), file-system memory
with a context policy, a declarative permission policy, and per-call traces. See docs/runtime.md.

The engine's agentic proposer uses :func:`solve` (or :class:`Agent`): a working directory, a
task statement and a model in; edited files and an :class:`AgentResult` with the trace path out.
"""

from ratchet.runtime.agent import Agent, AgentResult, solve
from ratchet.runtime.config import AgentConfig, ContextConfig, McpServer, PermissionPolicy
from ratchet.runtime.errors import FormatError, LimitsExceeded, PermissionDenied, RepeatedFailure, Submitted, ToolError
from ratchet.runtime.trace import OTelExporter, Tracer, read_trace, replay_model
from ratchet.runtime.workspace import DEFAULT_WORKSPACE, HarnessWorkspace

__all__ = [
    "DEFAULT_WORKSPACE",
    "Agent",
    "AgentConfig",
    "AgentResult",
    "ContextConfig",
    "FormatError",
    "HarnessWorkspace",
    "LimitsExceeded",
    "McpServer",
    "OTelExporter",
    "PermissionDenied",
    "PermissionPolicy",
    "RepeatedFailure",
    "Submitted",
    "ToolError",
    "Tracer",
    "read_trace",
    "replay_model",
    "solve",
]
