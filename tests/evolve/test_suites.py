"""Suites grading hand-written candidates (all candidate code in the sandbox), the workflow driver,
and the humaneval-coder workspace driven end to end with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ratchet.contracts import Candidate, Evaluator
from ratchet.evolve.context import EngineContext
from ratchet.evolve.manifest import load_manifest
from ratchet.evolve.suites.config import (
    HumanEvalOptions,
    JsonlOptions,
    TextArenaOptions,
    WorkflowOptions,
)
from ratchet.evolve.canary import CanaryFailed, check_canaries
from ratchet.evolve.suites import humaneval as humaneval_module
from ratchet.evolve.suites.humaneval import HumanEvalSuite, grading_program
from ratchet.evolve.suites.jsonl import JsonlSuite
from ratchet.evolve.suites.textarena import TextArenaSuite
from ratchet.evolve.suites.workflow import WorkflowDriver
from ratchet.models.request import estimate_tokens, prompt_text
from ratchet.models.scripted import ScriptedModel
from ratchet.sandbox.programs import ProgramResult

WORKSPACE = Path(__file__).resolve().parents[2] / "examples" / "humaneval-coder"


def answering(answer: str) -> Candidate:
    """A candidate whose workflow answers ``answer`` at once (no model)."""
    return Candidate.from_files("t", {"workflow.py": "def step(state):\n    return {'answer': state['files']['a.txt']}\n",
                                      "a.txt": answer})


def workspace_candidate() -> Candidate:
    manifest = load_manifest(WORKSPACE)
    files = {str(p.relative_to(WORKSPACE)): p.read_text() for p in WORKSPACE.rglob("*")
             if p.is_file() and manifest.is_editable(str(p.relative_to(WORKSPACE)))}
    return Candidate.from_files(manifest.name, files)


def ctx_with(model: ScriptedModel | None, workspace: Path = WORKSPACE) -> EngineContext:
    return EngineContext(load_manifest(WORKSPACE), workspace, model=model)


@pytest.fixture(scope="module")
def humaneval() -> HumanEvalSuite:
    return HumanEvalSuite(HumanEvalOptions(limit=5, grade_timeout_s=2.0), None)


# ------------------------------------------------------------------------------------ humaneval


def test_humaneval_reads_the_package_problems_and_fingerprints_its_settings(humaneval) -> None:
    assert isinstance(humaneval, Evaluator)
    full = HumanEvalSuite(HumanEvalOptions(), None)
    assert len(full.tasks()) == 164
    tasks = humaneval.tasks()
    assert [t.id for t in tasks] == [f"HumanEval/{i}" for i in range(5)]
    assert "test" not in tasks[0].input and "def has_close_elements" in tasks[0].input["prompt"]
    assert humaneval.fingerprint() == HumanEvalSuite(HumanEvalOptions(limit=5, grade_timeout_s=2.0)).fingerprint()
    assert humaneval.fingerprint() != HumanEvalSuite(HumanEvalOptions(limit=5, grade_timeout_s=3.0)).fingerprint()
    picked = HumanEvalSuite(HumanEvalOptions(ids=["HumanEval/7"]))
    assert [t.id for t in picked.tasks()] == ["HumanEval/7"]


def test_humaneval_canonical_passes_wrong_fails_infinite_loop_times_out(humaneval) -> None:
    problem = humaneval.problems["HumanEval/0"]
    [task] = [t for t in humaneval.tasks() if t.id == "HumanEval/0"]
    canonical = humaneval.evaluate(answering(problem["canonical_solution"]), [task], 0)[0]
    assert canonical.score == 1.0 and not canonical.failures
    full_function = problem["prompt"] + problem["canonical_solution"]
    fenced = humaneval.evaluate(answering(f"Here:\n```python\n{full_function}```"), [task], 0)[0]
    assert fenced.score == 1.0
    wrong = humaneval.evaluate(answering("    return False\n"), [task], 0)[0]
    assert wrong.score == 0.0 and wrong.failures[-1].kind == "test_failed"
    assert "AssertionError" in wrong.trace
    loop = humaneval.evaluate(answering("    while True:\n        pass\n"), [task], 0)[0]
    assert loop.score == 0.0 and loop.failures[-1].kind == "timeout"


def test_humaneval_answer_cannot_fake_a_pass_by_exiting(humaneval) -> None:
    # run in this process, os._exit(0) would end the test run; in the sandbox it is a failed answer
    [task] = [t for t in humaneval.tasks() if t.id == "HumanEval/0"]
    for answer in ("    import os\n    os._exit(0)\n", "import sys\nsys.exit(0)\n", "raise SystemExit(0)\n"):
        result = humaneval.evaluate(answering(answer), [task], 0)[0]
        assert result.score == 0.0, answer


def test_humaneval_every_canonical_solution_passes_its_tests() -> None:
    suite = HumanEvalSuite(HumanEvalOptions(limit=12))
    candidates = {pid: answering(p["canonical_solution"]) for pid, p in suite.problems.items()}
    for task in suite.tasks():
        assert suite.evaluate(candidates[task.id], [task], 0)[0].score == 1.0, task.id


def test_humaneval_canaries_pass_a_working_grader_and_catch_one_that_passes_everything(humaneval, monkeypatch) -> None:
    assert check_canaries(humaneval, "humaneval-coder", required=True) == 3
    passes_all = lambda sandbox, program, timeout_s: ProgramResult(True, "")  # noqa: E731
    monkeypatch.setattr(humaneval_module, "run_program", passes_all)
    with pytest.raises(CanaryFailed, match="wrong-answer"):
        check_canaries(humaneval, "humaneval-coder")


def test_humaneval_canaries_catch_a_grader_that_fails_everything(humaneval, monkeypatch) -> None:
    fails_all = lambda sandbox, program, timeout_s: ProgramResult(False, "AssertionError")  # noqa: E731
    monkeypatch.setattr(humaneval_module, "run_program", fails_all)
    with pytest.raises(CanaryFailed, match="canonical-solution"):
        check_canaries(humaneval, "humaneval-coder")


def test_grading_program_keeps_the_prompts_imports() -> None:
    problem = {"prompt": "from typing import List\n\n\ndef f(x: List[int]) -> int:\n    \"\"\"doc\"\"\"\n",
               "entry_point": "f", "test": "def check(c):\n    assert c([1]) == 1\n"}
    program = grading_program(problem, "def f(x: List[int]) -> int:\n    return x[0]\n")
    assert program.startswith("from typing import List") and program.count("def f(") == 1
    assert program.rstrip().endswith("check(f)")


# ------------------------------------------------------------------------------------ the coding workflow


WRONG = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
RIGHT = ("```python\ndef has_close_elements(numbers, threshold):\n"
         "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j)\n```")


def test_humaneval_coder_workflow_generates_runs_examples_and_repairs() -> None:
    model = ScriptedModel([WRONG, RIGHT])
    suite = HumanEvalSuite(HumanEvalOptions(limit=1, grade_timeout_s=2.0), ctx_with(model))
    [result] = suite.evaluate(workspace_candidate(), suite.tasks(), 0)
    assert result.score == 1.0
    assert result.metrics == {"model_calls": 2.0, "tokens": result.metrics["tokens"], "test_runs": 2.0, "steps": 5.0}
    expected = sum(estimate_tokens(prompt_text(c["messages"])) + estimate_tokens(r) for c, r in zip(model.calls, [WRONG, RIGHT]))
    assert result.metrics["tokens"] == expected > 0  # the cost of each task beside its score
    first, repair = model.calls[0]["messages"], model.calls[1]["messages"]
    assert first[0]["content"] == (WORKSPACE / "prompts" / "system.md").read_text()
    assert "def has_close_elements" in first[1]["content"] and "check(" not in first[1]["content"]
    # the repair sees its own reply and which docstring example failed
    assert repair[2] == {"role": "assistant", "content": WRONG}
    assert "has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3) returned False, expected True" in repair[3]["content"]
    assert "[run_tests] failed" in result.trace and "[run_tests] passed" in result.trace


def test_humaneval_coder_right_first_time_uses_one_call_and_a_wrong_repair_fails() -> None:
    model = ScriptedModel([RIGHT])
    suite = HumanEvalSuite(HumanEvalOptions(limit=1), ctx_with(model))
    [result] = suite.evaluate(workspace_candidate(), suite.tasks(), 0)
    assert result.score == 1.0 and result.metrics["model_calls"] == 1.0 and len(model.calls) == 1
    model = ScriptedModel([WRONG, "I am not sure."])
    suite = HumanEvalSuite(HumanEvalOptions(limit=1), ctx_with(model))
    [result] = suite.evaluate(workspace_candidate(), suite.tasks(), 0)
    assert result.score == 0.0 and result.metrics["model_calls"] == 2.0
    assert result.failures[-1].kind == "test_failed"  # answered its last code, which fails the tests


def test_humaneval_coder_candidates_differ_only_in_editable_files() -> None:
    candidate = workspace_candidate()
    assert set(candidate.files) == {"workflow.py", "prompts/system.md", "proposer/reflective.md"}  # its proposer template evolves too
    assert load_manifest(WORKSPACE).is_protected("evolve.yaml")


# ------------------------------------------------------------------------------------ the driver


@pytest.mark.parametrize("source, kind, text", [
    ("def step(state):\n    return 3\n", "workflow_error", "must return a dict"),
    ("def step(state):\n    return {'answer': 'a', 'run_tests': 'b'}\n", "workflow_error", "exactly one of"),
    ("def step(state):\n    raise ValueError('broken')\n", "workflow_error", "ValueError: broken"),
    ("def step(state):\n    while True:\n        pass\n", "workflow_error", "Timeout"),
    ("def step(state):\n    return {'call_model': 'hi'}\n", "workflow_error", "list of {role, content}"),
    ("def step(state):\n    return {'run_tests': 'x = 1'}\n", "workflow_limit", "more than 2 test runs"),
    ("def step(state):\n    return {'call_model': [{'role': 'user', 'content': 'hi'}]}\n", "workflow_limit",
     "more than 1 model calls"),
    ("def step(:\n", "workflow_error", "SyntaxError"),
    ("import socket\ndef step(state):\n    return {'answer': ''}\n", "workflow_error", "socket"),
])
def test_driver_turns_a_bad_workflow_into_a_failure(source, kind, text) -> None:
    options = WorkflowOptions(max_model_calls=1, max_test_runs=2, step_timeout_s=1.0)
    with WorkflowDriver(Candidate.from_files("t", {"workflow.py": source}), options, ScriptedModel(["ok"] * 3)) as driver:
        run = driver.run({"prompt": "p"}, seed=0)
    assert run.answer is None and run.failures[-1].kind == kind and text in run.failures[-1].message


def test_driver_services_model_calls_and_test_runs_outside_the_sandbox() -> None:
    source = (
        "def step(state):\n"
        "    events = state['events']\n"
        "    if not events:\n"
        "        return {'call_model': [{'role': 'user', 'content': state['task']['prompt']}], 'max_tokens': 99999}\n"
        "    if len(events) == 1:\n"
        "        return {'run_tests': 'print(6 * 7)'}\n"
        "    if len(events) == 2:\n"
        "        return {'run_tests': 'while True: pass'}\n"
        "    return {'answer': events[0]['reply'] + '|' + events[1]['output'].strip() + '|' + str(events[2]['timed_out'])}\n"
    )
    model = ScriptedModel(["hello"])
    options = WorkflowOptions(test_timeout_s=1.0, max_tokens=64)
    with WorkflowDriver(Candidate.from_files("t", {"workflow.py": source}), options, model) as driver:
        run = driver.run({"prompt": "say hello"}, seed=3)
    assert run.answer == "hello|42|True"
    assert model.calls[0]["params"]["max_tokens"] == 64  # capped by the suite, not the workflow
    assert model.calls[0]["messages"] == [{"role": "user", "content": "say hello"}]


# ------------------------------------------------------------------------------------ jsonl


def write_suite(path: Path) -> Path:
    rows = [
        {"id": "add", "prompt": "Write add(a, b).", "verifier": {"callable": "ratchet.envs.tasks:python_tests"},
         "metadata": {"kind": "code", "tests": "assert add(2, 3) == 5"}},
        {"id": "echo", "prompt": "Say yes.", "metadata": {"kind": "text"},
         "verifier": {"command": ["{python}", "-c", "import sys; sys.exit(open('answer.txt').read().strip() != 'yes')"]}},
        {"id": "two", "turns": ["First word?", "Second word?"], "metadata": {"kind": "text"},
         "verifier": {"command": ["{python}", "-c",
                                  "import json, sys; sys.exit(json.load(open('answers.json')) != ['a', 'b'])"]}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


ANSWERS = (
    "ANSWERS = {'add': '```python\\ndef add(a, b):\\n    return a + b\\n```', 'echo': 'yes'}\n"
    "def step(state):\n"
    "    task = state['task']\n"
    "    if task['task_id'] == 'two':\n"
    "        return {'answer': 'ab'[task['turn']]}\n"
    "    return {'answer': ANSWERS[task['task_id']]}\n"
)
WRONG_ANSWERS = "def step(state):\n    return {'answer': '```python\\ndef add(a, b):\\n    return a - b\\n```'}\n"


def test_jsonl_suite_grades_correct_and_incorrect_candidates(tmp_path) -> None:
    write_suite(tmp_path / "suite.jsonl")
    suite = JsonlSuite(JsonlOptions(path="suite.jsonl"), EngineContext(load_manifest(WORKSPACE), tmp_path))
    assert isinstance(suite, Evaluator)
    tasks = suite.tasks()
    assert [t.id for t in tasks] == ["add", "echo", "two"] and tasks[2].input["turns"] == 2
    good = suite.evaluate(Candidate.from_files("t", {"workflow.py": ANSWERS}), tasks, 0)
    assert [r.score for r in good] == [1.0, 1.0, 1.0]
    bad = suite.evaluate(Candidate.from_files("t", {"workflow.py": WRONG_ANSWERS}), tasks, 0)
    assert [r.score for r in bad] == [0.0, 0.0, 0.0]
    assert bad[0].failures[0].kind == "wrong_answer" and "[verifier] failed" in bad[0].trace
    before = suite.fingerprint()
    (tmp_path / "suite.jsonl").write_text((tmp_path / "suite.jsonl").read_text().replace("== 5", "== 6"))
    assert JsonlSuite(JsonlOptions(path="suite.jsonl"), EngineContext(load_manifest(WORKSPACE), tmp_path)).fingerprint() != before


#: Answers turn 0 of the two-turn task, then fails on turn 1; answers "add" in prose, with no code.
NO_ANSWER = (
    "def step(state):\n"
    "    task = state['task']\n"
    "    if task['task_id'] == 'two' and task['turn'] == 1:\n"
    "        return {'nothing': 1}\n"
    "    return {'answer': 'a' if task['task_id'] == 'two' else 'add returns a plus b'}\n"
)


def test_jsonl_suite_steps_turns_through_the_runner_and_names_what_failed(tmp_path) -> None:
    write_suite(tmp_path / "suite.jsonl")
    suite = JsonlSuite(JsonlOptions(path="suite.jsonl"), EngineContext(load_manifest(WORKSPACE), tmp_path))
    add, _, two = suite.evaluate(Candidate.from_files("t", {"workflow.py": NO_ANSWER}), suite.tasks(), 0)
    assert add.score == 0.0 and add.failures[0].kind == "no_code" and "no code found" in add.failures[0].message
    # The two-turn task ends at the turn without an answer: the workflow's own failure, then which turn.
    assert two.score == 0.0 and [f.kind for f in two.failures] == ["workflow_error", "no_answer"]
    assert two.failures[-1].message == "the workflow gave no answer to turn 1" and two.failures[-1].task_id == "two"
    assert "[verifier]" not in two.trace


def test_jsonl_suite_by_shipped_name_and_bad_path(tmp_path) -> None:
    suite = JsonlSuite(JsonlOptions(path="python-basics", limit=2), EngineContext(load_manifest(WORKSPACE), tmp_path))
    assert len(suite.tasks()) == 2
    with pytest.raises(Exception, match="task suite not found"):
        JsonlSuite(JsonlOptions(path="nope"), EngineContext(load_manifest(WORKSPACE), tmp_path))


# ------------------------------------------------------------------------------------ textarena


HANOI = (
    "MOVES = ['[A C]', '[A B]', '[C B]', '[A C]', '[B A]', '[B C]', '[A C]']\n"
    "def step(state):\n"
    "    return {'answer': MOVES[state['task']['turn'] % len(MOVES)]}\n"
)


def test_textarena_suite_plays_through_the_runner() -> None:
    suite = TextArenaSuite(TextArenaOptions(games=["TowerOfHanoi-v0"], episodes=2), None)
    assert isinstance(suite, Evaluator)
    tasks = suite.tasks()
    assert [t.id for t in tasks] == ["TowerOfHanoi-v0#0", "TowerOfHanoi-v0#1"]
    good = suite.evaluate(Candidate.from_files("t", {"workflow.py": HANOI}), tasks, 0)
    assert [r.score for r in good] == [1.0, 1.0] and good[0].metrics["moves"] == 7.0
    bad = suite.evaluate(Candidate.from_files("t", {"workflow.py": "def step(state):\n    return {'answer': '[A B]'}\n"}),
                         tasks[:1], 0)
    assert bad[0].score == 0.0 and {f.kind for f in bad[0].failures} >= {"illegal_action", "lost"}
    assert "ILLEGAL" in bad[0].trace
    assert suite.fingerprint() != TextArenaSuite(TextArenaOptions(games=["TowerOfHanoi-v0"], episodes=3)).fingerprint()


def test_textarena_workflow_may_ask_the_model_for_its_move() -> None:
    source = ("def step(state):\n"
              "    if not state['events']:\n"
              "        return {'call_model': [{'role': 'user', 'content': state['task']['observation']}]}\n"
              "    return {'answer': state['events'][-1]['reply']}\n")
    model = ScriptedModel(["[A C]", "[A B]", "[C B]", "[A C]", "[B A]", "[B C]", "[A C]"])
    suite = TextArenaSuite(TextArenaOptions(games=["TowerOfHanoi-v0"], episodes=1), ctx_with(model))
    [result] = suite.evaluate(Candidate.from_files("t", {"workflow.py": source}), suite.tasks(), 0)
    assert result.score == 1.0 and result.metrics["model_calls"] == 7.0
    assert "Tower of Hanoi" in model.calls[0]["messages"][0]["content"]
