"""Driving a candidate's workflow: a step function in the sandbox, serviced from outside it.

A harness whose workflow needs the model (generate -> run the visible examples -> repair) must not
get the model, the network or the grader. So the workflow is a pure step function the evaluator
drives::

    def step(state: dict) -> dict:
        # state = {"task": {...what the suite shows...}, "files": {path: text of the candidate's
        #          non-Python files, e.g. prompts/system.md}, "events": [...], "seed": int}
        return {"call_model": [{"role": "system", "content": ...}, ...], "max_tokens": 400}
        #   or {"run_tests": "program text"}      or {"answer": "final answer"}

``step`` runs in a sandbox worker (no network, read-only filesystem, time limit), beside the
modules of ``workflow.libraries`` (by default the operator library ``flowops``, see
docs/workflows.md): the worker cannot import the project, so they travel as files. The driver
services each request outside it: ``call_model`` through the run's accounted model (every call
counts against the budget; the reply comes back as an event), ``run_tests`` in a second, separate
sandbox (the program's output or error comes back as an event). The events are appended to
``state["events"]`` and ``step`` is called again, until it answers or a limit is reached. The
workflow is stateless between calls: everything it needs is in ``state``.

Events: ``{"kind": "model", "messages": [...], "reply": str, "tokens": int}`` (prompt + reply tokens) and
``{"kind": "tests", "code": str, "passed": bool, "timed_out": bool, "output": str}``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ratchet.contracts import Candidate, Completion, Failure, Message, Model, RatchetError
from ratchet.evolve.suites.config import WorkflowOptions
from ratchet.sandbox import HarnessError, Sandbox, SandboxConfig
from ratchet.sandbox.programs import program_sandbox, run_program

_ACTIONS = ("call_model", "run_tests", "answer")


def library_paths(options: WorkflowOptions) -> list[Path]:
    """The source file of each module of ``options.libraries``; a RatchetError naming a module that
    cannot be found or is not a single ``.py`` file (a package cannot travel as one file)."""
    paths = []
    for name in options.libraries:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        if origin is None or origin.suffix != ".py" or origin.name == "__init__.py" or not origin.is_file():
            raise RatchetError(f"workflow.libraries: {name!r} is not a module of one .py file that can be found",
                               hint="name a module by its import path, e.g. ratchet.workflows.flowops")
        paths.append(origin)
    return paths


def library_files(options: WorkflowOptions) -> dict[str, str]:
    """``{"flowops.py": source, ...}``: the libraries as the sandbox files a workflow imports."""
    return {path.name: path.read_text() for path in library_paths(options)}


def checker_sandbox(timeout_s: float, memory_mb: int) -> Sandbox:
    """A sandbox that runs whole programs (tests, graders' checks): :func:`ratchet.sandbox.programs.program_sandbox`."""
    return program_sandbox(timeout_s, memory_mb)


@dataclass
class WorkflowRun:
    """One task's run of the workflow: its answer (None when it gave none) and what happened."""

    answer: str | None
    events: list[dict[str, Any]] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    steps: int = 0

    @property
    def model_calls(self) -> int:
        return sum(e["kind"] == "model" for e in self.events)

    @property
    def tokens(self) -> int:
        """Prompt and reply tokens of the task's model calls: its cost beside ``model_calls``."""
        return sum(e.get("tokens", 0) for e in self.events if e["kind"] == "model")

    @property
    def test_runs(self) -> int:
        return sum(e["kind"] == "tests" for e in self.events)

    def trace(self, limit: int = 1200) -> str:
        """What happened, as text a reflective proposer reads."""
        lines = []
        for event in self.events:
            if event["kind"] == "model":
                lines.append(f"[model call] reply:\n{_clip(event['reply'], limit)}")
            else:
                status = "timed out" if event["timed_out"] else "passed" if event["passed"] else "failed"
                lines.append(f"[run_tests] {status}:\n{_clip(event['output'], limit)}")
        lines += [f"[{f.kind}] {f.message}" for f in self.failures]
        if self.answer is not None:
            lines.append(f"[answer]\n{_clip(self.answer, limit)}")
        return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2:]


class WorkflowDriver:
    """Runs one candidate's ``step`` workflow on tasks; close it (or use ``with``) when done."""

    def __init__(self, candidate: Candidate, options: WorkflowOptions, model: Model | None) -> None:
        self.options = options
        self.model = model
        self.files = {p: t for p, t in candidate.files.items() if not p.endswith(".py")}
        self.load_error: str | None = None
        self.sandbox: Sandbox | None = None
        try:
            # the libraries first: a candidate's own file of the same name replaces one
            self.sandbox = Sandbox({**library_files(options), **candidate.files}, entry=options.entry,
                                   config=SandboxConfig(call_timeout_s=options.step_timeout_s,
                                                        memory_mb=options.memory_mb))
        except HarnessError as exc:
            self.load_error = exc.feedback()
        self.tests = checker_sandbox(options.test_timeout_s, options.memory_mb)

    def __enter__(self) -> WorkflowDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        self.tests.close()

    def run(self, task: dict[str, Any], seed: int) -> WorkflowRun:
        """Drive the workflow on one task until it answers; never raises for a bad workflow."""
        opts = self.options
        outcome = WorkflowRun(answer=None)
        if self.sandbox is None:
            outcome.failures.append(Failure("workflow_error", self.load_error or "the workflow did not load"))
            return outcome
        state: dict[str, Any] = {"task": task, "files": self.files, "events": outcome.events, "seed": seed}
        for index in range(opts.max_steps):
            outcome.steps = index + 1
            try:
                action = self.sandbox.call("step", state, seed=seed + index)
            except HarnessError as exc:
                outcome.failures.append(Failure("workflow_error", exc.feedback()[-2000:]))
                return outcome
            kind, error = _action_kind(action)
            if kind is None:
                outcome.failures.append(Failure("workflow_error", error))
                return outcome
            value = action[kind]
            if kind == "answer":
                outcome.answer = value
                return outcome
            if kind == "call_model":
                if outcome.model_calls >= opts.max_model_calls:
                    outcome.failures.append(Failure("workflow_limit", f"asked for more than {opts.max_model_calls} model calls"))
                    return outcome
                messages, error = _messages(value)
                if messages is None:
                    outcome.failures.append(Failure("workflow_error", error))
                    return outcome
                done = self._complete(messages, action.get("max_tokens"), seed * 1000 + index)
                outcome.events.append({"kind": "model", "messages": messages, "reply": done.text,
                                       "tokens": done.usage.total_tokens})
            else:
                if outcome.test_runs >= opts.max_test_runs:
                    outcome.failures.append(Failure("workflow_limit", f"asked for more than {opts.max_test_runs} test runs"))
                    return outcome
                result = run_program(self.tests, value, opts.test_timeout_s)
                outcome.events.append({"kind": "tests", "code": value, "passed": result.passed,
                                       "timed_out": result.timed_out, "output": result.output})
        outcome.failures.append(Failure("workflow_limit", f"no answer after {opts.max_steps} steps"))
        return outcome

    def _complete(self, messages: list[Message], wanted: Any, seed: int) -> Completion:
        if self.model is None:
            raise RatchetError("the workflow asked for a model call and the run has no model",
                               hint="give the run a model (model: local:qwen2.5-coder-0.5b)")
        cap = self.options.max_tokens
        max_tokens = min(int(wanted), cap) if isinstance(wanted, int) and wanted > 0 else cap
        return self.model.complete(messages, temperature=self.options.temperature,
                                   max_tokens=max_tokens, seed=seed)


def _action_kind(action: Any) -> tuple[str | None, str]:
    if not isinstance(action, dict):
        return None, f"step() must return a dict, it returned {type(action).__name__}"
    kinds = [k for k in _ACTIONS if k in action]
    if len(kinds) != 1:
        return None, f"step() must return exactly one of {', '.join(_ACTIONS)}; it returned keys {sorted(action)}"
    kind = kinds[0]
    if kind != "call_model" and not isinstance(action[kind], str):
        return None, f"step()'s {kind} must be a string"
    return kind, ""


def _messages(value: Any) -> tuple[list[Message] | None, str]:
    ok = isinstance(value, list) and value and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value)
    if not ok:
        return None, "call_model must be a non-empty list of {role, content} messages with string values"
    return [{"role": m["role"], "content": m["content"]} for m in value], ""
