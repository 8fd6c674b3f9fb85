"""The runtime as the improvement engine's agentic proposer (Meta-Harness; Darwin Gödel Machine).

:class:`RuntimeProposerAgent` implements the engine's ``AgentRuntime``
(:mod:`ratchet.evolve.proposers.agentic`): it runs an :class:`~ratchet.runtime.agent.Agent` with
the run's accounted model in the proposer's copy of the parent candidate. The agent has the
runtime's tools (read, grep, edit, bash in the sandbox…) plus the engine's five workspace tools the
proposer's prompt names (``list_files``, ``read_file``, ``search``, ``read_trace``,
``write_file``). The permission policy comes from the manifest, never from the prompt: the
manifest's editable files are the only writable paths, its protected ones are never written, and
the traces directory is readable beside the working directory.

Self-reference: ``options.harness`` may name a harness workspace *inside the candidate* (say
``agent/``); the agent then runs with the parent's own copy of it, so a run whose editable
surfaces include it improves the agent that does the improving. Only the harness's data surfaces
(prompt, settings, context and permission policies, tool descriptions, skills' text) are taken
from a candidate; its Python files (tools, hooks, skill code) are not run in the engine's process,
the shipped ones stand in for them.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ratchet.contracts import RatchetError
from ratchet.evolve.manifest import MANIFEST_NAME
from ratchet.evolve.proposers.agentic import AgentOutcome, AgentTask
from ratchet.runtime.agent import Agent
from ratchet.runtime.config import ContextConfig, TaskFilesConfig
from ratchet.runtime.errors import ToolError
from ratchet.runtime.tools.registry import ToolContext, tool_from_function
from ratchet.runtime.workspace import HarnessWorkspace

#: The task message's ending: the runtime finishes with ``submit``, whose summary carries the claim.
FINISH = ("\n\nWhen you are done, call submit; put the claim, in the format above, in its summary "
          "(the TARGET / ROOT CAUSE / FLIPS lines).")

#: The line after the files the harness's ``task_files`` opening shows, in place of the harness's
#: own: that one is written for a coding task ("Find the wrong line in the code above and reply
#: with the edit that fixes it."), and as the last line of the proposer's first message the 0.5B
#: answered it with the worked example's first reply and no tool call.
PROPOSER_CLOSING = ("Reply with one tool call. Start with read_trace on one of the failing tasks named above; "
                    "then change an editable file with edit or write_file, and submit your claim.")


def _engine(ctx: ToolContext) -> Any:
    return ctx.extra["workspace_tools"]


def _relay(call: Any) -> Any:
    """The engine's tools raise their own RatchetError; the model gets it as a tool error."""
    try:
        return call()
    except RatchetError as exc:
        raise ToolError(f"{exc}" + (f" ({exc.hint})" if getattr(exc, "hint", None) else "")) from None


def list_files(ctx: ToolContext) -> str:
    """Every file of the harness being improved (relative paths)."""
    return "\n".join(_relay(lambda: _engine(ctx).list_files()))


def read_file(ctx: ToolContext, path: str) -> str:
    """The whole text of one file of the harness being improved.

    Args:
        path: relative path, as list_files shows it.
    """
    return _relay(lambda: _engine(ctx).read_file(path))


def search(ctx: ToolContext, pattern: str) -> str:
    """Lines of the harness's files and of the task traces matching a regular expression.

    Args:
        pattern: a Python regular expression.
    """
    return "\n".join(_relay(lambda: _engine(ctx).search(pattern))) or "no match"


def read_trace(ctx: ToolContext, task_id: str) -> str:
    """The raw trace of one task: its score, its failures and what the harness did.

    Args:
        task_id: the task's id, as the list of failing tasks names it.
    """
    return _relay(lambda: _engine(ctx).read_trace(task_id))


def write_file(ctx: ToolContext, path: str, text: str) -> str:
    """Replace (or create) one editable file of the harness with ``text``.

    Args:
        path: relative path of an editable file.
        text: the file's whole new content.
    """
    _relay(lambda: _engine(ctx).write_file(path, text))
    return f"wrote {path} ({len(text)} characters)"


ENGINE_TOOLS = (list_files, read_file, search, read_trace, write_file)


class RuntimeProposerAgent:
    """``factory(options, ctx)`` of the agentic proposer's runtime: one runtime agent per proposal.

    ``options`` are the proposer's :class:`~ratchet.evolve.proposers.config.AgenticOptions`
    (``max_tool_calls`` is the agent's step limit; ``temperature`` and ``max_tokens`` its
    sampling; ``harness`` its workspace); ``ctx`` is the engine's context (its accounted model is
    the agent's model; each proposal's trace goes to ``<run>/proposer-agent/``)."""

    def __init__(self, options: Any, ctx: Any) -> None:
        self.options, self.ctx = options, ctx
        self.runs = 0

    def run(self, task: AgentTask) -> AgentOutcome:
        if task.model is None:
            raise RatchetError("the agentic proposer's runtime needs a model and the run has none",
                               hint="give the run a model (model: local:qwen2.5-coder-0.5b)")
        self.runs += 1
        with tempfile.TemporaryDirectory(prefix="ratchet-proposer-") as tmp:
            workspace = self._harness(task.workdir, Path(tmp) / "harness")
            agent = Agent(task.model, task.workdir, self._run_dir(Path(tmp)), workspace=workspace,
                          config=self._settings(workspace), context=self._context(workspace),
                          permissions=self._policy(workspace, task), agent_id="proposer")
            for fn in ENGINE_TOOLS:
                agent.toolbox.add(tool_from_function(fn), pin=True)
            agent.ctx.extra["workspace_tools"] = task.tools
            result = agent.run(task.instructions + FINISH)
            last = next((str(m.get("content") or "") for m in reversed(agent.messages) if m.get("role") == "assistant"), "")
            final = "\n\n".join(t for t in (result.submission, last) if t)
            return AgentOutcome(final, [dict(m) for m in agent.messages]
                                + [{"role": "exit", "content": result.exit_status, "trace": result.trace_path}])

    # -- the agent's parts ---------------------------------------------------------------------

    def _harness(self, candidate_dir: Path, scratch: Path) -> HarnessWorkspace:
        """The harness workspace the agent runs with (see the module docstring)."""
        name = getattr(self.options, "harness", None)
        if not name:
            return HarnessWorkspace()
        own = Path(candidate_dir) / name
        if not Path(name).is_absolute() and own.is_dir():
            # The candidate's own harness: its data surfaces only; the shipped code stands in.
            shutil.copytree(own, scratch, ignore=shutil.ignore_patterns("*.py", "tools", "__pycache__"))
            return HarnessWorkspace(scratch)
        for place in (Path(name), Path(self.ctx.workspace) / name):
            if place.is_dir():
                return HarnessWorkspace(place)
        raise RatchetError(f"agentic proposer: no harness workspace {name!r} in the candidate or at {place}",
                           hint="options.harness is a directory made by `ratchet agent init`, in the candidate or absolute")

    def _settings(self, workspace: HarnessWorkspace) -> Any:
        config = workspace.settings()
        return config.model_copy(update={"step_limit": self.options.max_tool_calls,
                                         "temperature": self.options.temperature,
                                         "max_tokens": self.options.max_tokens})

    def _context(self, workspace: HarnessWorkspace) -> ContextConfig:
        """The harness's context policy, with :data:`PROPOSER_CLOSING` after the files it shows."""
        config = workspace.context_config()
        opening = [o.model_copy(update={"closing": PROPOSER_CLOSING}) if isinstance(o, TaskFilesConfig) else o
                   for o in config.opening]
        return config.model_copy(update={"opening": opening})

    def _policy(self, workspace: HarnessWorkspace, task: AgentTask) -> Any:
        manifest = task.tools.manifest
        traces = str(Path(task.traces_dir).resolve())
        return workspace.permissions().model_copy(update={
            "readable": ["*", traces, f"{traces}/*"],
            "writable": list(manifest.editable),
            "protected": [*manifest.protected, MANIFEST_NAME, ".git"],
        })

    def _run_dir(self, tmp: Path) -> Path:
        """Where the agent's trace, state and memory go: the engine run's directory when there is one."""
        run_dir = getattr(self.ctx.run, "dir", None)
        base = Path(run_dir) / "proposer-agent" if run_dir is not None else tmp / "agent-run"
        return base / f"{time.strftime('%Y%m%dT%H%M%S')}-{self.runs:04d}"
