"""The coding suite as the improvement engine's evaluator: a candidate is a harness workspace.

``suite: {name: "ratchet.runtime.engine_suite:CodingAgentSuite", options: {...}}`` in an
``ratchet evolve`` config. Each task of the coding suite is run by the runtime's agent with the
candidate's harness (its system prompt, settings, context policy, tool descriptions and skills),
the run's accounted model and the suite's fixed limits, in a fresh copy of the task's repository;
the suite's grader (original tests, in the sandbox) decides the score, never the agent.

What runs where: the agent loop runs in the engine's process with the candidate's *data* only
(the candidate's Python files, tools and hooks, are not loaded; the shipped ones stand in), and
every command it runs goes to the sandbox. The permission policy is the suite's (the shipped one,
with the suite's data hidden), not the candidate's: a candidate cannot widen what the agent may
touch. ``step_limit`` and ``max_tokens`` are the suite's too (``options.overrides`` win over the
candidate's settings), so a candidate cannot buy its score with a bigger budget.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ratchet.contracts import BudgetExceeded, Candidate, Failure, RatchetError, Task, TaskResult
from ratchet.store.fingerprint import fingerprint
from ratchet.runtime import suite as coding
from ratchet.runtime.agent import Agent
from ratchet.runtime.config import CodingSuiteOptions
from ratchet.runtime.workspace import DEFAULT_WORKSPACE, HarnessWorkspace

VERSION = 1

def harness_from(candidate: Candidate, dest: Path) -> HarnessWorkspace:
    """The candidate's data surfaces written to ``dest`` as a harness workspace (missing files,
    and every Python file, fall back to the shipped default)."""
    dest.mkdir(parents=True, exist_ok=True)
    for relpath, text in candidate.files.items():
        parts = Path(relpath).parts
        if relpath.endswith(".py") or Path(relpath).name == "permissions.yaml" or parts[0] == "tools" or ".." in parts:
            continue
        (dest / relpath).parent.mkdir(parents=True, exist_ok=True)
        (dest / relpath).write_text(text)
    return HarnessWorkspace(dest)


class CodingAgentSuite:
    """coding-basics (or another coding suite) judged by running a harness workspace's agent on it."""

    name = "coding-agent"

    def __init__(self, options: CodingSuiteOptions, ctx: Any = None) -> None:
        self.options, self.ctx = options, ctx
        tasks = coding.load_suites(options.suite)
        if options.tasks:
            unknown = sorted(set(options.tasks) - {t.id for t in tasks})
            if unknown:
                raise RatchetError(f"coding suite: unknown task ids {unknown}", hint="`ratchet agent verify` lists them")
            tasks = [t for t in tasks if t.id in options.tasks]
        self.by_id = {t.id: t for t in tasks}
        HarnessWorkspace().settings(tuple(options.overrides))  # a bad override fails here, naming the key

    def sampled(self, temperature: float) -> "CodingAgentSuite":
        """This suite with its agents sampling at ``temperature`` (the report's best-of-N attempts:
        the shipped harness decodes greedily, so an attempt at another seed would be the same run).
        The override is part of the options, so the fingerprint, and the cache, keep them apart."""
        overrides = [o for o in self.options.overrides if not o.startswith("temperature=")]
        options = self.options.model_copy(update={"overrides": [*overrides, f"temperature={temperature:g}"]})
        return type(self)(options, self.ctx)

    def tasks(self) -> list[Task]:
        return [Task(t.id, {"statement": t.statement}) for t in self.by_id.values()]

    def fingerprint(self) -> str:
        # A candidate runs with the default workspace's files wherever it has none (its code, its
        # permissions, any data file it leaves out), so they are part of what a cached score measured.
        fallback = sorted(p for p in DEFAULT_WORKSPACE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        files = [Path(__file__), Path(coding.__file__), *fallback]
        for task in self.by_id.values():
            files += [task.dir / "task.yaml", *sorted(p for p in task.repo.rglob("*") if p.is_file())]
        return fingerprint({"suite": self.name, "version": VERSION, **self.options.model_dump()}, files)

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        model = getattr(self.ctx, "model", None)
        if model is None:
            raise RatchetError("the coding-agent suite needs a model", hint="set model: in the run config")
        results = []
        with tempfile.TemporaryDirectory(prefix="ratchet-coding-eval-") as tmp:
            harness = harness_from(candidate, Path(tmp) / "harness")
            try:  # a candidate whose settings the runtime refuses solves nothing; the run goes on
                config = harness.settings(tuple(self.options.overrides))
                harness.context_config()
            except RatchetError as exc:
                reason = str(exc).replace(str(harness.path) + "/", "")
                return [TaskResult(task.id, seed, 0.0, f"task {task.id}: the harness does not load: {reason}",
                                   (Failure("invalid_harness", reason, task.id),)) for task in tasks]
            if config.temperature > 0 or config.restart is not None:
                # the evaluation seed picks the samples: the run's, or its restarts' (seed + attempt - 1);
                # a greedy run needs none
                config = config.model_copy(update={"seed": seed})
            policy = HarnessWorkspace().permissions()
            for task in tasks:
                spec = self.by_id.get(task.id)
                if spec is None:
                    raise RatchetError(f"coding suite: task {task.id!r} is not in this suite")
                policy.hidden_paths = [str(spec.dir.parent)]
                results.append(self._run(spec, harness, config, policy, model, Path(tmp) / task.id, seed))
        return results

    def _run(self, task: coding.CodingTask, harness: HarnessWorkspace, config: Any, policy: Any, model: Any,
             scratch: Path, seed: int) -> TaskResult:
        workdir = coding.prepare(task, scratch / "repo")
        agent = Agent(model, workdir, scratch / "agent", workspace=harness, config=config, permissions=policy,
                      agent_id=task.id)
        try:
            outcome = agent.run(f"{task.statement}\nThe repository is your working directory; its tests run "
                                f"with `{task.test_command}`.")
            status = outcome.exit_status
        except BudgetExceeded:
            raise  # the run's budget is spent: the engine stops, as with any other suite
        except RatchetError as exc:  # a backend failure is a failed task with its reason, never a crash
            status = f"error: {exc}"[:300]
        verdict = coding.grade(task, workdir)
        attempts = f" and {agent.attempt} attempts" if agent.attempt > 1 else ""
        trace = (f"task {task.id}: {task.statement}\nagent: {status} after {agent.steps} steps{attempts}\n"
                 + "\n".join(agent.log[-30:]) + f"\n[tests] {verdict.trace[-1500:]}")
        failures = () if verdict.score == 1.0 else (
            Failure("test_failed", f"{task.id}: tests fail after the agent ({status})", task.id),)
        shutil.rmtree(scratch, ignore_errors=True)
        return TaskResult(task.id, seed, verdict.score, trace, failures,
                          {"steps": float(agent.steps), "tokens": float(agent.tokens_used()),
                           "attempts": float(agent.attempt)})
