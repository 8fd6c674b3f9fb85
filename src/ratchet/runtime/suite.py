"""The coding task suite: small repositories with a failing test, judged by running the tests.

A suite is a directory of tasks (``src/ratchet/envs/data/coding-basics/`` ships with Ratchet);
each task holds ``task.yaml`` (id, one-line statement, test files, test command), ``repo/`` (what
the agent gets) and ``solution.patch`` (a reference fix, never copied to the agent and hidden
from its commands). The grader copies the agent's tree, puts the original test files back (an agent cannot
pass by editing tests), and runs the test command in the sandbox: the exit code is the verdict,
never the agent's claim.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ratchet.contracts import Failure, LLMCall, Model, RatchetError, TaskResult
from ratchet.runtime.agent import Agent
from ratchet.runtime.shell import Shell
from ratchet.runtime.workspace import HarnessWorkspace
from ratchet.store import append_jsonl, read_jsonl

SUITES_DIR = Path(__file__).resolve().parents[1] / "envs" / "data"


@dataclass(frozen=True)
class CodingTask:
    id: str
    statement: str
    dir: Path
    tests: tuple[str, ...]
    test_command: str

    @property
    def repo(self) -> Path:
        return self.dir / "repo"

    @property
    def solution(self) -> Path:
        return self.dir / "solution.patch"


def load_suite(name_or_path: str | Path) -> list[CodingTask]:
    """The tasks of a suite by name (``coding-basics``) or directory, sorted by id."""
    root = Path(name_or_path)
    if not root.is_dir():
        root = SUITES_DIR / str(name_or_path)
    if not root.is_dir():
        known = sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir() and any(p.glob("*/task.yaml")))
        raise RatchetError(f"no coding suite {str(name_or_path)!r}", hint=f"use one of {', '.join(known)} or a directory")
    root = root.resolve()  # absolute: verify applies the patch from a scratch copy's directory
    tasks = [_task(spec) for spec in sorted(root.glob("*/task.yaml"))]
    if not tasks:
        raise RatchetError(f"{root} holds no */task.yaml", hint="each task is a folder with task.yaml, repo/, solution.patch")
    seen: dict[str, Path] = {}
    for t in tasks:
        if t.id in seen:
            raise RatchetError(f"task id {t.id!r} is used by {seen[t.id]} and {t.dir}", hint="give every task its own id")
        seen[t.id] = t.dir
    return sorted(tasks, key=lambda t: t.id)


def load_suites(names: str | Path | list[str]) -> list[CodingTask]:
    """The tasks of one suite, or of several judged as one (sorted by id; an id in two is refused)."""
    if isinstance(names, (str, Path)):
        return load_suite(names)
    tasks: dict[str, CodingTask] = {}
    for name in names:
        for task in load_suite(name):
            if task.id in tasks:
                raise RatchetError(f"task id {task.id!r} is in {tasks[task.id].dir.parent} and {task.dir.parent}",
                                   hint="join suites whose task ids differ")
            tasks[task.id] = task
    return sorted(tasks.values(), key=lambda t: t.id)


_TASK_HINT = ("task.yaml holds id, statement (one line), tests (the test files, relative to repo/) and optionally "
              "test_command; see docs/runtime.md, 'Adding a task or a suite'")


def _task(spec: Path) -> CodingTask:
    """One task from its ``task.yaml``, checked: a task someone adds fails here naming the file and
    what is wrong, not later as a KeyError or a missing file in the middle of a run."""
    try:
        data = yaml.safe_load(spec.read_text())
    except yaml.YAMLError as exc:
        raise RatchetError(f"{spec} is not valid YAML: {exc}", hint=_TASK_HINT) from None
    data = data if isinstance(data, dict) else {}
    wrong = [key for key in ("id", "statement") if not isinstance(data.get(key), str) or not data[key].strip()]
    tests = data.get("tests")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        wrong.append("tests")
    if wrong:
        raise RatchetError(f"{spec}: {', '.join(wrong)} missing or not of the right kind", hint=_TASK_HINT)
    repo = spec.parent / "repo"
    missing = [t for t in tests if not (repo / t).is_file()]
    if not repo.is_dir() or missing:
        raise RatchetError(f"{spec}: " + ("no repo/ beside it" if not repo.is_dir() else
                           f"test file(s) {', '.join(missing)} not in {repo}"), hint=_TASK_HINT)
    return CodingTask(data["id"], data["statement"], spec.parent, tuple(tests),
                      str(data.get("test_command") or "python -m pytest -q"))


def prepare(task: CodingTask, workdir: Path) -> Path:
    """Copy the task's repository to ``workdir`` and commit it, so git_diff shows the agent's change."""
    if workdir.exists():
        shutil.rmtree(workdir)
    shutil.copytree(task.repo, workdir)
    git = ["git", "-c", "user.name=ratchet", "-c", "user.email=ratchet@local", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=workdir, check=True)
    subprocess.run([*git, "add", "-A"], cwd=workdir, check=True)
    subprocess.run([*git, "commit", "-qm", "task start"], cwd=workdir, check=True)
    return workdir


def grade(task: CodingTask, workdir: Path, *, timeout_s: float = 120.0) -> TaskResult:
    """Run the task's tests on a copy of ``workdir`` with the original test files restored."""
    with tempfile.TemporaryDirectory(prefix="ratchet-grade-") as tmp:
        tree = Path(tmp) / "tree"
        shutil.copytree(workdir, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache"))
        for rel in task.tests:
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(task.repo / rel, tree / rel)
        shell = Shell(tree, network=False, hidden=[task.dir.parent])
        try:
            started = time.perf_counter()
            result = shell.run(task.test_command, timeout_s, 32 * 1024)
        finally:
            shell.close()
    passed = result["returncode"] == 0
    failures = () if passed else (Failure("test_failed", result["output"][-1500:], task.id,
                                          {"returncode": result["returncode"], "timed_out": result["timed_out"]}),)
    return TaskResult(task.id, 0, 1.0 if passed else 0.0, result["output"][-4000:], failures,
                      {"grade_s": time.perf_counter() - started})


def verify(task: CodingTask) -> tuple[TaskResult, TaskResult]:
    """(before, after): the pristine repository's grade and the grade with the reference fix."""
    if not task.solution.is_file():
        raise RatchetError(f"task {task.id} has no solution.patch in {task.dir}",
                           hint="write the reference fix as a unified diff (git diff > solution.patch)")
    with tempfile.TemporaryDirectory(prefix="ratchet-verify-") as tmp:
        before = grade(task, task.repo)
        fixed = Path(tmp) / "fixed"
        shutil.copytree(task.repo, fixed)
        applied = subprocess.run(["git", "apply", str(task.solution)], cwd=fixed, capture_output=True, text=True)
        if applied.returncode != 0:
            raise RatchetError(f"task {task.id}: its solution.patch does not apply to repo/: {applied.stderr.strip()}",
                               hint="make the patch from the repository as shipped (paths a/FILE, b/FILE)")
        return before, grade(task, fixed)


def run_suite(tasks: list[CodingTask], model: Model, run_dir: Path, *, workspace: HarnessWorkspace,
              model_spec: str | None = None, overrides: tuple[str, ...] = (),
              progress: Callable[[str], None] | None = None,
              on_model_call: Callable[[LLMCall], None] | None = None) -> dict[str, Any]:
    """Run the agent on every task not yet in ``run_dir/results.jsonl`` (so a killed run resumes),
    grade each one, and return the summary (solve rate over all tasks of the run)."""
    results_path = run_dir / "results.jsonl"
    done = {r["task_id"]: r for r in (read_jsonl(results_path) if results_path.exists() else [])}
    config = workspace.settings(overrides)
    policy = workspace.permissions()
    policy.hidden_paths = [*policy.hidden_paths, str(tasks[0].dir.parent)] if tasks else policy.hidden_paths
    for n, task in enumerate(tasks, 1):
        if task.id in done:
            continue
        workdir = prepare(task, run_dir / "work" / task.id)
        agent = Agent(model, workdir, run_dir / "tasks" / task.id, workspace=workspace, config=config,
                      permissions=policy, agent_id=task.id, model_spec=model_spec, on_model_call=on_model_call)
        started = time.perf_counter()
        try:
            outcome = agent.run(f"{task.statement}\nThe repository is your working directory; its tests run with "
                                f"`{task.test_command}`.")
            status, steps, tokens = outcome.exit_status, outcome.steps, outcome.prompt_tokens + outcome.completion_tokens
        except RatchetError as exc:  # a model backend failing is a failed task, recorded, not a crash
            status, steps = f"error: {exc}"[:300], agent.steps
            tokens = agent.tokens_used()
        agent_s = time.perf_counter() - started
        verdict = grade(task, workdir)
        record = {"task_id": task.id, "solved": verdict.score == 1.0, "exit_status": status, "steps": steps,
                  "attempts": agent.attempt, "tokens": tokens, "agent_s": round(agent_s, 3),
                  "test_tail": verdict.trace[-600:]}
        append_jsonl(results_path, record)
        done[task.id] = record
        if progress is not None:
            solved = sum(1 for r in done.values() if r["solved"])
            progress(f"[{len(done)}/{len(tasks)}] {task.id}: {'solved' if record['solved'] else 'failed'} "
                     f"({status}, {steps} steps{f', {agent.attempt} attempts' if agent.attempt > 1 else ''}, "
                     f"{tokens} tokens, {agent_s:.1f} s) — solved so far {solved}")
    rows = [done[t.id] for t in tasks if t.id in done]
    solved = sum(1 for r in rows if r["solved"])
    return {"tasks": len(tasks), "done": len(rows), "solved": solved,
            "solve_rate": solved / len(tasks) if tasks else 0.0,
            "tokens": sum(r["tokens"] for r in rows), "agent_s": round(sum(r["agent_s"] for r in rows), 3),
            "per_task": {r["task_id"]: r["solved"] for r in rows}}
