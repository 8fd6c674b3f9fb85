"""The held-in gate before an offline playbook is used in a trial: kept, refused, resumed."""

import json
from pathlib import Path

import pytest

import bench.context_playbook as bench
from ratchet.context.config import ContextConfig
from ratchet.context.trial import LESSONS_HEADER, PlaybookTrial
from ratchet.context.trial_suites import ConfigSplits, LeadingSplits, TrialSuite
from ratchet.contracts import Task, TaskResult
from ratchet.evolve.config import SplitsConfig
from ratchet.evolve.gate import PairedGate
from ratchet.models.scripted import ScriptedModel
from ratchet.store import RunStore

from .fakes import BagOfWords

ROOT = Path(__file__).resolve().parents[2]
HUMANEVAL = TrialSuite("humaneval", ROOT / "examples" / "humaneval-coder", "evolve.yaml", "prompts/system.md",
                       LeadingSplits(heldin_count=40))


class LessonSuite:
    """Every task is about lists; a lesson in the prompt solves it (``helps``) or breaks it."""

    def __init__(self, helps: bool, n: int = 10) -> None:
        self.helps, self.n = helps, n
        self.evaluated: list[str] = []

    def tasks(self):
        return [Task(f"t{k}", {"prompt": f"problem about lists {k}"}) for k in range(self.n)]

    def evaluate(self, candidate, tasks, seed):
        (task,) = tasks
        self.evaluated.append(task.id)
        lessons = LESSONS_HEADER in candidate.files["prompts/system.md"]
        return [TaskResult(task.id, seed, float(lessons == self.helps), trace=f"attempt on {task.id}",
                           metrics={"model_calls": 1.0})]


def _learner():
    def respond(messages):
        if "Change it only by operations" in messages[-1]["content"]:
            return json.dumps({"operations": [{"op": "ADD", "section": "s", "text": "remember lists"}]})
        return json.dumps({"tags": [], "lesson": "remember lists"})

    return ScriptedModel(respond)


def _trial(tmp_path, suite, run=None):
    run = run or RunStore(tmp_path / "runs").create_run("context-trial", {})
    files = {"prompts/system.md": "You are careful.", "workflow.py": "..."}
    return PlaybookTrial(suite, files, "prompts/system.md", run, _learner(), ContextConfig(), embedder=BagOfWords(),
                         gate=HUMANEVAL.gate())


def test_the_gate_keeps_a_playbook_that_helps_on_held_in_and_the_test_uses_it(tmp_path):
    suite = LessonSuite(helps=True)
    tasks = suite.tasks()
    trial = _trial(tmp_path, suite)
    trial.offline(tasks[:2], tasks[2:4], heldin=tasks[4:])
    verdict = trial.verdict("offline")
    assert verdict["kept"] and verdict["test_uses"] == "the learned playbook" and verdict["items"] == 1
    # the engine's paired gate of the workspace: alpha 0.05 spent, so the first test is at 0.025;
    # 6 of 6 held-in tasks flipped is p = 1/64 exactly
    assert verdict["numbers"]["alpha"] == 0.025 and verdict["numbers"]["p_value"] == pytest.approx(1 / 64)
    assert verdict["numbers"]["heldin_parent"] == 0.0 and verdict["numbers"]["heldin_child"] == 1.0
    assert verdict["heldin"] == [t.id for t in tasks[4:]]
    assert [r["score"] for r in trial.phase("test-offline")] == [1.0, 1.0]
    assert all(r["items"] for r in trial.phase("test-offline"))


def test_the_gate_refuses_a_playbook_that_hurts_and_the_test_runs_without_it(tmp_path):
    suite = LessonSuite(helps=False)
    tasks = suite.tasks()
    trial = _trial(tmp_path, suite)
    trial.offline(tasks[:2], tasks[2:4], heldin=tasks[4:])
    verdict = trial.verdict("offline")
    assert not verdict["kept"] and verdict["test_uses"] == "the empty playbook"
    assert verdict["numbers"]["heldin_gain"] == -1.0 and "does not clear the noise band" in verdict["reason"]
    assert [r["items"] for r in trial.phase("heldin-offline")] == [["ctx-00001"]] * 6  # the playbook was shown
    assert [(r["score"], r["items"]) for r in trial.phase("test-offline")] == [(1.0, []), (1.0, [])]


def test_too_few_held_in_tasks_cannot_pass_and_none_leave_the_gate_without_evidence(tmp_path):
    suite = LessonSuite(helps=True)
    tasks = suite.tasks()
    trial = _trial(tmp_path, suite)
    trial.offline(tasks[:2], tasks[2:4], heldin=tasks[4:9])  # 5 of 5 flipped: p = 1/32, above 0.025
    assert not trial.verdict("offline")["kept"] and "not significant" in trial.verdict("offline")["reason"]
    other = _trial(tmp_path / "b", LessonSuite(helps=True))
    other.offline(tasks[:2], tasks[2:4], heldin=[])
    assert other.verdict("offline")["reason"] == "no paired held-in results"
    assert all(r["items"] == [] for r in other.phase("test-offline"))


def test_a_trial_killed_in_the_gate_phase_resumes_without_evaluating_a_task_twice(tmp_path):
    suite = LessonSuite(helps=True)
    tasks = suite.tasks()
    trial = _trial(tmp_path, suite)

    class Killed(Exception):
        pass

    real = suite.evaluate

    def dies_on_the_third_held_in_with_the_playbook(candidate, ts, seed):
        if ts[0].id == "t6" and LESSONS_HEADER in candidate.files["prompts/system.md"]:
            raise Killed
        return real(candidate, ts, seed)

    suite.evaluate = dies_on_the_third_held_in_with_the_playbook
    with pytest.raises(Killed):
        trial.offline(tasks[:2], tasks[2:4], heldin=tasks[4:])
    assert trial.verdict("offline") is None and len(trial.phase("heldin-offline")) == 2
    suite.evaluate = real
    before = list(suite.evaluated)
    resumed = _trial(tmp_path, suite, run=trial.run)
    resumed.offline(tasks[:2], tasks[2:4], heldin=tasks[4:])
    assert suite.evaluated[len(before):] == ["t6", "t7", "t8", "t9", "t2", "t3"]  # only what was missing
    assert resumed.verdict("offline")["kept"]
    again = list(suite.evaluated)
    resumed.offline(tasks[:2], tasks[2:4], heldin=tasks[4:])  # a finished phase: the stored verdict, nothing run
    assert suite.evaluated == again


def test_a_trial_without_a_gate_uses_the_playbook_unchecked(tmp_path):
    suite = LessonSuite(helps=False)
    tasks = suite.tasks()
    trial = _trial(tmp_path, suite)
    trial.gate = None
    trial.offline(tasks[:2], tasks[2:4], heldin=tasks[4:])
    assert trial.verdict("offline") is None and not trial.phase("heldin-empty")
    assert [r["score"] for r in trial.phase("test-offline")] == [0.0, 0.0]


def test_humaneval_held_in_problems_follow_the_test_ones_and_overlap_neither():
    tasks = [Task(f"HumanEval/{k}", {"prompt": str(k)}) for k in range(164)]
    held = HUMANEVAL.heldin(tasks)
    assert [t.id for t in held] == [f"HumanEval/{k}" for k in range(80, 120)]
    assert LeadingSplits(heldin_count=40).limit(None, None) == 120
    assert isinstance(HUMANEVAL.gate()(), PairedGate)
    # A config whose tasks are all train or test has none to give the gate.
    assert ConfigSplits(SplitsConfig()).heldin(tasks, None, None) == []
    overlapping = TrialSuite("x", HUMANEVAL.workspace, "evolve.yaml", "p", LeadingSplits(heldin_count=3))

    class Bad(LeadingSplits):
        def heldin(self, tasks, train, test):
            return tasks[:1]

    with pytest.raises(Exception, match="overlap"):
        TrialSuite("x", HUMANEVAL.workspace, "evolve.yaml", "p", Bad()).heldin(tasks)
    assert [t.id for t in overlapping.heldin(tasks, 2, 2)] == ["HumanEval/4", "HumanEval/5", "HumanEval/6"]


def test_a_bench_run_made_before_the_gate_resumes_without_it_and_with_its_old_context():
    args = bench.parse(["--store", "x"])
    assert args.gate is True and args.heldin == 40
    stored = {"suite": "humaneval", "model": "m", "offset": 0, "train": 40, "test": 40}
    bench.settle(args, stored)
    assert args.gate is False
    args = bench.parse(["--store", "x", "--no-gate"])
    bench.settle(args, {**stored, "gate": True, "heldin": 20})
    assert (args.gate, args.heldin) == (True, 20)
    old = ContextConfig.stored({"budget_tokens": 400, "record_weight": 0.3})
    assert old.min_relevance is None and old.tags == "reflector"
