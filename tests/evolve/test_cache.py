"""Nothing paid twice: the evaluation cache, the reply journal, and a run SIGKILLed mid-step and
resumed that makes exactly the evaluations and model calls an uninterrupted run makes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from doubles import make_workspace

from ratchet.contracts import Candidate
from ratchet.evolve.cache import EVALS, CachedEvaluator
from ratchet.models.journal import REPLIES, JournaledModel
from ratchet.evolve.suites.synthetic import NoisyOptions, NoisySuite
from ratchet.models import AccountedModel, Accountant, ScriptedModel
from ratchet.store import RunStore

WORKER = Path(__file__).with_name("evolve_worker.py")


class CountingNoisy(NoisySuite):
    def __init__(self, options: NoisyOptions) -> None:
        super().__init__(options)
        self.runs = 0

    def evaluate(self, candidate, tasks, seed):
        self.runs += len(tasks)
        return super().evaluate(candidate, tasks, seed)


def test_cached_results_survive_the_process_and_are_keyed_by_the_fingerprint(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create_run("evolve", {})
    suite = CountingNoisy(NoisyOptions(tasks=6))
    cand = Candidate.from_files("noisy", {"harness.json": '{"default": 0.5}'})
    first = CachedEvaluator(suite, run).evaluate(cand, suite.tasks(), 0)
    again = CachedEvaluator(suite, run)  # a new process reads the cache from the run
    assert again.evaluate(cand, suite.tasks(), 0) == first and (again.hits, again.paid, suite.runs) == (6, 0, 6)
    again.evaluate(cand, suite.tasks()[:2], 1)
    assert (again.paid, suite.runs) == (2, 8)  # another seed is another evaluation
    other = CountingNoisy(NoisyOptions(tasks=6, salt=1))  # another grader: nothing is reused
    CachedEvaluator(other, run).evaluate(cand, other.tasks(), 0)
    assert other.runs == 6 and len(run.read_jsonl(EVALS)) == 14


def test_the_journal_replays_the_interrupted_steps_replies_once_and_unpaid(tmp_path: Path) -> None:
    run = RunStore(tmp_path).create_run("evolve", {})
    scripted = ScriptedModel(["a", "b", "c", "d"])
    accountant = Accountant()
    journal = JournaledModel(AccountedModel(scripted, accountant), run)
    ask = [{"role": "user", "content": "q"}]
    assert journal.complete(ask).text == "a"  # a step that finished (checkpoint at call 1)
    assert [journal.complete(ask).text, journal.complete(ask).text] == ["b", "c"]  # the step that was killed
    resumed = JournaledModel(AccountedModel(scripted, accountant), run)
    assert resumed.resume(1) == 2
    assert [resumed.complete(ask).text, resumed.complete(ask).text, resumed.complete(ask).text] == ["b", "c", "d"]
    assert resumed.replayed == 2 and accountant.snapshot()["calls"] == 4 and len(scripted.calls) == 4
    assert [r["call"] for r in run.read_jsonl(REPLIES)] == [0, 1, 2, 3]


def _worker(tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [tmp / "store", tmp / "ws", tmp / "run.id", tmp / "evals.log", tmp / "calls.log"]
    return subprocess.run([sys.executable, str(WORKER), *map(str, args), *extra], capture_output=True, text=True, timeout=300)


def _summary(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _archive(tmp: Path) -> list[tuple]:
    run = RunStore(tmp / "store").open_run((tmp / "run.id").read_text())
    return [(r["id"], r["parent_id"], r["status"], r["score"]) for r in run.candidates()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reference")
    make_workspace(tmp)
    summary = _summary(_worker(tmp))
    evals = (tmp / "evals.log").read_text().splitlines()
    return {"summary": summary, "evals": evals, "calls": (tmp / "calls.log").read_text().splitlines(),
            "archive": _archive(tmp)}


@pytest.mark.parametrize("die_before", [60, 150, 240])  # inside steps 1 and 3, and in the report
def test_a_killed_run_resumes_paying_nothing_twice(tmp_path: Path, reference: dict, die_before: int) -> None:
    make_workspace(tmp_path)
    killed = _worker(tmp_path, "--die-before", str(die_before))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    run_id = (tmp_path / "run.id").read_text()
    run = RunStore(tmp_path / "store").open_run(run_id)
    step = run.load_checkpoint("evolve")["step"]
    assert 0 < step <= 5  # killed after the original was evaluated (5: in the final report)
    summary = _summary(_worker(tmp_path, "--resume", run_id))
    evals = (tmp_path / "evals.log").read_text().splitlines()
    assert summary["task_evals"] == len(evals) == len(reference["evals"])
    assert summary["replayed_replies"] == (1 if step < 5 else 0)  # the cut-off step's reply came from the journal
    assert not [k for k, n in Counter(evals).items() if n > 1], "an evaluation was run twice"
    assert Counter(evals) == Counter(reference["evals"])
    assert (tmp_path / "calls.log").read_text().splitlines() == reference["calls"]  # no model call made twice
    assert summary["model_calls"] == reference["summary"]["model_calls"] == len(reference["calls"])
    assert _archive(tmp_path) == [(i, p, s, sc) for i, p, s, sc in reference["archive"]]
