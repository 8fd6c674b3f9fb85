"""The agentic proposer (Meta-Harness): a tool-using agent reads the raw traces and edits files.

This module defines the contract a tool-using runtime implements (:class:`AgentRuntime`), the
tools it is given (:class:`WorkspaceTools`: they refuse to write anything the manifest does not
declare editable) and the proposer that turns the agent's edits and final message into a
:class:`~ratchet.contracts.Proposal`. The runtime is ``options.runtime`` if set, else
``ctx.extra["agent_runtime"]``, else Ratchet's own agent runtime (:data:`DEFAULT_RUNTIME`).
"""

from __future__ import annotations

import importlib
import re
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ratchet.contracts import Candidate, Claim, Proposal, RatchetError, Skip
from ratchet.evolve.components import build, resolve
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import Manifest
from ratchet.evolve.proposers.base import ModelProposer
from ratchet.evolve.proposers.config import AgenticOptions


#: The shipped runtime, loaded by import path (the engine does not import the runtime's package).
DEFAULT_RUNTIME = "ratchet.runtime.proposer:RuntimeProposerAgent"


class ToolError(RatchetError):
    """A tool call the agent made was refused (the runtime shows the message to the agent)."""


class WorkspaceTools:
    """The tools an agent gets: read anything in its copy of the workspace and the traces, write
    only the manifest's editable files. Every call counts against ``max_calls``."""

    names = ("list_files", "read_file", "search", "read_trace", "write_file")

    def __init__(self, root: Path, traces: Path, manifest: Manifest, max_calls: int) -> None:
        self.root, self.traces, self.manifest, self.max_calls = root, traces, manifest, max_calls
        self.calls = 0

    def _count(self) -> None:
        self.calls += 1
        if self.calls > self.max_calls:
            raise ToolError(f"tool budget spent ({self.max_calls} calls)", hint="finish with your claim")

    def _path(self, relpath: str, base: Path) -> Path:
        path = (base / relpath).resolve()
        if base.resolve() not in path.parents and path != base.resolve():
            raise ToolError(f"{relpath!r} is outside the workspace")
        return path

    def list_files(self) -> list[str]:
        """Every file of the workspace copy, relative paths."""
        self._count()
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())

    def read_file(self, path: str) -> str:
        """The text of one workspace file."""
        self._count()
        target = self._path(path, self.root)
        if not target.is_file():
            raise ToolError(f"no file {path!r}", hint="list_files() shows what exists")
        return target.read_text()

    def search(self, pattern: str) -> list[str]:
        """``path:line: text`` for every line of the workspace and traces matching a regex."""
        self._count()
        regex = re.compile(pattern)
        hits = []
        for base in (self.root, self.traces):
            for path in sorted(p for p in base.rglob("*") if p.is_file()):
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if regex.search(line):
                        hits.append(f"{path.relative_to(base.parent)}:{number}: {line[:200]}")
        return hits[:200]

    def read_trace(self, task_id: str) -> str:
        """The raw trace of one task."""
        self._count()
        target = self.traces / trace_name(task_id)
        if not target.is_file():
            raise ToolError(f"no trace for task {task_id!r}")
        return target.read_text()

    def write_file(self, path: str, text: str) -> None:
        """Replace (or create) an editable file; protected or undeclared files are refused."""
        self._count()
        if not self.manifest.is_editable(path):
            raise ToolError(f"{path!r} is not an editable surface of this harness",
                            hint=f"editable: {', '.join(self.manifest.editable)}")
        target = self._path(path, self.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def trace_name(task_id: str) -> str:
    return re.sub(r"[^\w.-]", "_", task_id) + ".txt"


@dataclass(frozen=True)
class AgentTask:
    """What the runtime is asked to do: follow ``instructions`` using ``tools`` in ``workdir``."""

    instructions: str
    workdir: Path
    traces_dir: Path
    tools: WorkspaceTools
    model: Any = None


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent finished: its last message (which holds the claim) and what it did."""

    final_message: str
    transcript: list[dict[str, Any]] = field(default_factory=list)


class AgentRuntime(Protocol):
    """A tool-using agent loop (the harness runtime): runs ``task`` to the end, editing files only
    through ``task.tools``, calling ``task.model`` (the run's accounted model) for its turns."""

    def run(self, task: AgentTask) -> AgentOutcome: ...


class AgenticProposer(ModelProposer):
    """Proposals made by a tool-using agent over the workspace and the raw traces."""

    name = "agentic"
    default_template = "agentic.md"
    options: AgenticOptions

    def __init__(self, options: AgenticOptions, ctx: EngineContext) -> None:
        super().__init__(options, ctx)
        self.runtime: AgentRuntime = self._runtime(options, ctx)
        self.fallback: Any = self._fallback(options, ctx)

    @staticmethod
    def _fallback(options: AgenticOptions, ctx: EngineContext) -> Any:
        if options.fallback is None:
            return None
        if issubclass(resolve("proposer", options.fallback.name), AgenticProposer):
            raise RatchetError(f"agentic proposer: fallback {options.fallback.name!r} is an agentic proposer itself",
                               hint="fall back to a proposer that asks once, e.g. {name: reflective}")
        return build("proposer", options.fallback, ctx)

    @staticmethod
    def _runtime(options: AgenticOptions, ctx: EngineContext) -> AgentRuntime:
        runtime = ctx.extra.get("agent_runtime")
        if runtime is not None and not options.runtime:
            return runtime
        path = options.runtime or DEFAULT_RUNTIME
        module, _, attr = path.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)(options, ctx)
        except (ImportError, AttributeError) as exc:
            raise RatchetError(f"agentic proposer: cannot load runtime {path!r}: {exc}",
                               hint="runtime takes module:factory, factory(options, ctx) -> AgentRuntime") from None

    def propose(self, parent: Candidate, archive: Any, rng: Any) -> Proposal | Skip:
        results = self.results(archive, parent.id)
        with tempfile.TemporaryDirectory(prefix="ratchet-agentic-") as tmp:
            workdir, traces = Path(tmp) / "workspace", Path(tmp) / "traces"
            traces.mkdir()
            for relpath, text in parent.files.items():
                (workdir / relpath).parent.mkdir(parents=True, exist_ok=True)
                (workdir / relpath).write_text(text)
            for result in results:
                failures = "\n".join(f"{f.kind}: {f.message}" for f in result.failures)
                (traces / trace_name(result.task_id)).write_text(
                    f"task {result.task_id} seed {result.seed} score {result.score}\n{failures}\n\n{result.trace}")
            template, source = self.template(parent)
            failing = sorted({r.task_id for r in results if r.score < 1.0})
            instructions = self.render(template, editable=", ".join(self.ctx.manifest.editable),
                                       traces_dir="traces/", failing=", ".join(failing) or "(none)",
                                       rejected=self.rejected_text(archive))[0]["content"]
            tools = WorkspaceTools(workdir, traces, self.ctx.manifest, self.options.max_tool_calls)
            outcome = self.runtime.run(AgentTask(instructions, workdir, traces, tools, self.ctx.model))
            after = {str(p.relative_to(workdir)): p.read_text() for p in workdir.rglob("*") if p.is_file()}
        changed = {p: t for p, t in after.items() if parent.files.get(p) != t and self.ctx.manifest.is_editable(p)}
        if not changed:
            return self._fall_back(parent, archive, rng, "the agent changed no editable file", outcome.final_message)
        claim, stated = self.claim(outcome.final_message, [r.task_id for r in results])
        return self.proposal(changed, claim, (parent.id,), template=source, claim_stated=stated,
                             reply=outcome.final_message, tool_calls=tools.calls,
                             transcript=outcome.transcript[-50:])

    def _fall_back(self, parent: Candidate, archive: Any, rng: Any, why: str, reply: str) -> Proposal | Skip:
        """The fallback proposer's proposal, named after both (``agentic/reflective``: the claim
        scores keep them apart), or a skip that keeps both reasons."""
        if self.fallback is None:
            return self.skip(parent, why, reply=reply)
        proposal = self.fallback.propose(parent, archive, rng)
        name = self.fallback.name
        if isinstance(proposal, Skip):
            claim = Claim(target=proposal.claim) if proposal.claim else None
            return self.skip(parent, f"{why}; whole-file fallback ({name}): {proposal.reason}", claim=claim,
                             attempts=list(proposal.attempts), reply=reply)
        return replace(proposal, proposer=f"{self.name}/{name}",
                       meta={**proposal.meta, "fallback": name, "agent_reason": why, "agent_reply": reply[:2000]})
