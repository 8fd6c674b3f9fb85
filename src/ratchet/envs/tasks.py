"""Task suites: non-game domains behind the same ``Environment`` contract.

A suite is a JSONL file, one task per line::

    {"id": "add", "prompt": "Write add(a, b)…",                  # or "turns": ["…", "…"]
     "verifier": {"command": ["{python}", "-c", "from solution import add; assert add(2, 3) == 5"]},
     "metadata": {...}, "timeout_s": 20}

    "verifier": {"callable": "package.module:function"}  # function(answer: str, task: dict) -> verdict

Each episode is one task (``reset(seed)`` picks task ``seed % len(suite)``). Multi-turn tasks show
their turns one by one; the verifier judges after the last turn. Verifiers always run out of
process with a time limit, in a fresh temporary directory holding ``answer.txt`` (the final answer),
``answers.json`` (every turn's answer) and ``solution.py`` (the code extracted from the final
answer). Command placeholders: ``{python}``, ``{workdir}``, ``{answer_file}``, ``{solution_file}``.
A command passes when it exits 0; a callable returns a bool, a float in [0, 1] or ``(ok, reason)``.

``legal`` in a task means "the answer could be read" (for code tasks: it contained code); a wrong
answer is legal with reward 0, and the verifier's output is the ``illegal_reason``-free feedback in
``info["verdict"]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ratchet.contracts import Observation, RatchetError, StepResult
from ratchet.envs.answers import extract_code
from ratchet.envs.config import EnvConfig
from ratchet.sandbox.programs import run_once

#: Wall-clock limit of the candidate code under ``python_tests``.
PYTHON_TESTS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Task:
    """One task of a suite."""

    id: str
    turns: tuple[str, ...]
    verifier: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 20.0


@dataclass(frozen=True)
class Verdict:
    """What a verifier said about an answer."""

    ok: bool
    score: float
    output: str


def load_suite(path: str | Path) -> list[Task]:
    """Read and check a JSONL suite; errors name the line."""
    tasks: list[Task] = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            turns = raw.get("turns") or [raw["prompt"]]
            verifier = raw["verifier"]
            if not ({"command", "callable"} & set(verifier)):
                raise KeyError("verifier.command or verifier.callable")
            tasks.append(
                Task(
                    id=str(raw["id"]),
                    turns=tuple(str(t) for t in turns),
                    verifier=verifier,
                    metadata=raw.get("metadata", {}),
                    timeout_s=float(raw.get("timeout_s", 20.0)),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise RatchetError(
                f"{path}:{number}: bad task line ({exc})",
                hint='each line: {"id", "prompt" or "turns", "verifier": {"command": [...]} or {"callable": "mod:fn"}}',
            ) from None
    return tasks


def _suite_dir() -> Path:
    return Path(str(resources.files("ratchet.envs").joinpath("data/tasks")))


def suite_env_ids() -> list[str]:
    """``tasks/<name>`` for every shipped suite."""
    return sorted(f"tasks/{p.stem}" for p in _suite_dir().glob("*.jsonl"))


def verify(task: Task, answers: list[str]) -> Verdict:
    """Run the task's verifier out of process on the answers; never raises for a bad answer."""
    final = answers[-1] if answers else ""
    with tempfile.TemporaryDirectory(prefix="ratchet-task-") as tmp:
        work = Path(tmp)
        (work / "answer.txt").write_text(final)
        (work / "answers.json").write_text(json.dumps(answers))
        (work / "solution.py").write_text(extract_code(final) or "")
        (work / "task.json").write_text(
            json.dumps({"id": task.id, "turns": task.turns, "metadata": task.metadata})
        )
        values = {
            "python": sys.executable,
            "workdir": str(work),
            "answer_file": str(work / "answer.txt"),
            "solution_file": str(work / "solution.py"),
        }
        if "command" in task.verifier:
            command = [str(part).format(**values) for part in task.verifier["command"]]
        else:
            module, _, func = task.verifier["callable"].partition(":")
            command = [sys.executable, "-m", "ratchet.envs.tasks", module, func, str(work)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(work), *sys.path[1:]])}
        try:
            proc = subprocess.run(
                command, cwd=work, capture_output=True, text=True, timeout=task.timeout_s, env=env
            )
        except subprocess.TimeoutExpired:
            return Verdict(False, 0.0, f"verifier timed out after {task.timeout_s}s")
        output = (proc.stdout + proc.stderr).strip()[-2000:]
        if "callable" in task.verifier and proc.returncode == 0:
            last = json.loads(proc.stdout.strip().splitlines()[-1])
            return Verdict(bool(last["ok"]), float(last["score"]), str(last.get("reason", "")))
        return Verdict(proc.returncode == 0, 1.0 if proc.returncode == 0 else 0.0, output)


class TaskEnvironment:
    """A task suite as a one-player ``Environment``: one episode = one task."""

    num_players = 1

    def __init__(self, env_id: str, tasks: list[Task], config: EnvConfig | None = None) -> None:
        if not tasks:
            raise RatchetError(f"{env_id}: the suite has no tasks")
        self.env_id = env_id
        self.tasks = tasks
        self.config = config or EnvConfig()
        self._task = tasks[0]
        self._answers: list[str] = []
        self._done = True

    def reset(self, seed: int) -> Observation:
        self._task = self.tasks[seed % len(self.tasks)]
        self._answers = []
        self._done = False
        return self.observe()

    def observe(self) -> Observation:
        turn = self._task.turns[len(self._answers)] if not self._done else ""
        return Observation(0, turn)

    def game_description(self) -> str:
        return f"Task suite {self.env_id}: answer each prompt; code goes in a ```python block."

    def step(self, action: str) -> StepResult:
        if self._done:
            raise RatchetError(f"{self.env_id}: step() after the episode ended", hint="call reset(seed) first")
        self._answers.append(action)
        info: dict[str, Any] = {"task_id": self._task.id, "turn": len(self._answers) - 1}
        if len(self._answers) < len(self._task.turns):
            return StepResult(observation=self.observe(), done=False, info=info)
        self._done = True
        code_task = self._task.metadata.get("kind", "code") == "code"
        if code_task and extract_code(action) is None:
            return StepResult(
                observation=None,
                done=True,
                legal=False,
                illegal_reason="no code found: put the solution in a ```python code block",
                ended_by_illegal=True,
                rewards={0: 0.0},
                info=info,
            )
        verdict = verify(self._task, self._answers)
        info["verdict"] = {"ok": verdict.ok, "output": verdict.output}
        return StepResult(observation=None, done=True, rewards={0: verdict.score}, info=info)

    def close(self) -> None:
        self._done = True


def make_task_env(env_id: str, config: EnvConfig | None = None) -> TaskEnvironment:
    """``tasks/<name>`` (a shipped suite) or ``tasks:<path to a .jsonl file>`` (any file, absolute or relative)."""
    if env_id.startswith("tasks:"):
        path = Path(env_id[len("tasks:"):])
        if path.suffix != ".jsonl":
            raise RatchetError(f"task suite {env_id!r}: {path} is not a .jsonl file",
                               hint="use tasks:/path/to/suite.jsonl, or tasks/NAME for a shipped suite")
    elif env_id.startswith("tasks/"):
        name = env_id[len("tasks/"):]
        path = Path(name) if name.endswith(".jsonl") else _suite_dir() / f"{name}.jsonl"
    else:
        raise RatchetError(f"not a task suite id: {env_id!r}",
                           hint="use tasks/NAME (a shipped suite) or tasks:/path/to/suite.jsonl")
    if not path.exists():
        raise RatchetError(f"task suite not found: {path}", hint=f"shipped suites: {', '.join(suite_env_ids())}")
    return TaskEnvironment(env_id, load_suite(path), config)


def _run_callable(module: str, func: str, workdir: str) -> None:
    """Child side of a callable verifier: prints one JSON verdict line."""
    import importlib

    work = Path(workdir)
    answer = (work / "answer.txt").read_text()
    task = json.loads((work / "task.json").read_text())
    result = getattr(importlib.import_module(module), func)(answer, task)
    if isinstance(result, tuple):
        ok, reason = bool(result[0]), str(result[1])
        score = 1.0 if ok else 0.0
    elif isinstance(result, bool):
        ok, reason, score = result, "", 1.0 if result else 0.0
    else:
        score = float(result)
        ok, reason = score >= 1.0, ""
    print(json.dumps({"ok": ok, "score": score, "reason": reason}))


def python_tests(answer: str, task: dict[str, Any]) -> tuple[bool, str]:
    """Callable verifier for code tasks: run ``metadata.tests`` (asserts) against the answer's code.

    Already runs in a verifier subprocess; the candidate code runs in a sandbox worker from there
    (no network, read-only filesystem, time and memory limits), so a crash, an ``exit()`` or a
    stray write in it can neither fake a pass nor touch the machine.
    """
    code = extract_code(answer)
    if code is None:
        return False, "no code block in the answer"
    program = code + "\n\n" + task["metadata"]["tests"] + "\nprint('ALL TESTS PASSED')\n"
    result = run_once(program, PYTHON_TESTS_TIMEOUT_S)
    if result.timed_out:
        return False, f"the code ran longer than {PYTHON_TESTS_TIMEOUT_S:g} s"
    ok = result.passed and result.output.strip().endswith("ALL TESTS PASSED")
    lines = result.output.strip().splitlines()
    return ok, ("passed" if ok else (lines[-1] if lines else "failed"))[:300]


if __name__ == "__main__":
    _run_callable(*sys.argv[1:4])
