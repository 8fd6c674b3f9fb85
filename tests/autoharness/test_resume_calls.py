"""Resume makes exactly the model calls an uninterrupted run makes, and a stopped search marks
its run done.

The scripted endpoint used here stamps every reply with how many replies it has sent so far, across
processes: a reply asked for twice comes back different, as from a sampling model, so the final
tree shows whether any reply was asked for again, and the stamp counts the calls.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import RULES, FakeTicTacToe, MemoryRun
from resume_worker import config, responder

from ratchet.autoharness.search import REPLIES
from ratchet.models.journal import JournaledModel, request_key
from ratchet.autoharness.runtime import InProcessHarness
from ratchet.autoharness.search import Synthesis
from ratchet.models import ScriptedModel
from ratchet.store import RunStore
from ratchet.store.files import read_json

WORKER = Path(__file__).with_name("resume_worker.py")
SAMPLES = 3  # calls per refinement, so that a kill can fall between two calls of one iteration


def _worker(store: Path, id_file: Path, calls: Path, *extra: str, resume: str = "-") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(WORKER), str(store), str(id_file), resume, "0", "--calls", str(calls),
                           "--samples", str(SAMPLES), *extra], capture_output=True, text=True, timeout=120)


def _result(out: subprocess.CompletedProcess) -> dict:
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _sent(calls: Path) -> int:
    return int(read_json(calls, 0))


def _killed_mid_iteration(tmp_path: Path, die_at: int) -> tuple[Path, Path, str]:
    """A run SIGKILLed when about to ask for reply ``die_at`` + 1, inside an iteration."""
    store, id_file, calls = tmp_path / "store", tmp_path / "run.id", tmp_path / "calls.json"
    out = _worker(store, id_file, calls, "--die-at", str(die_at))
    assert out.returncode == -signal.SIGKILL, out.stderr[-3000:]
    run = RunStore(store).open_run(id_file.read_text())
    state = run.load_checkpoint("autoharness")
    # The kill fell inside an iteration: replies arrived after the last checkpoint.
    assert state["calls"] < die_at and state["calls"] % SAMPLES == 0
    assert [r["call"] for r in run.read_jsonl(REPLIES)] == list(range(die_at))
    return store, calls, id_file.read_text()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("reference")
    result = _result(_worker(tmp / "store", tmp / "run.id", tmp / "calls.json"))
    assert result["best_h"] == 1.0 and result["calls"] > 2 * SAMPLES
    assert _sent(tmp / "calls.json") == result["calls"] and result["replayed"] == 0
    return result


def test_a_sigkilled_iteration_reuses_its_replies_on_resume(tmp_path, reference):
    die_at = SAMPLES + 2  # two of iteration 1's three replies have arrived
    store, calls, run_id = _killed_mid_iteration(tmp_path, die_at)
    resumed = _result(_worker(store, tmp_path / "run.id", calls, resume=run_id))
    assert resumed.pop("replayed") == 2
    reference = dict(reference)
    reference.pop("replayed")
    assert resumed == reference  # the same tree, history, calls and tokens
    assert _sent(calls) == reference["calls"]  # both processes together asked for no more replies
    run = RunStore(store).open_run(run_id)
    assert len(run.read_jsonl(REPLIES)) == reference["calls"]  # every reply kept once


def test_without_the_recorded_replies_the_killed_iteration_is_asked_again(tmp_path, reference):
    """The control for the test above: the same kill, with the replies file gone, costs two calls
    more and, with a sampling endpoint, ends in a different tree."""
    store, calls, run_id = _killed_mid_iteration(tmp_path, SAMPLES + 2)
    RunStore(store).open_run(run_id).path(REPLIES).unlink()
    resumed = _result(_worker(store, tmp_path / "run.id", calls, resume=run_id))
    assert resumed["replayed"] == 0
    assert _sent(calls) == reference["calls"] + 2
    assert resumed["nodes"] != reference["nodes"]


class Interrupted(Exception):
    """The connection to the model dropped."""


def _search(run, calls: Path, fail_after: int | None = None) -> Synthesis:
    respond = responder(0.0, calls)

    def interrupting(messages):
        if fail_after is not None and _sent(calls) >= fail_after:
            raise Interrupted(f"after {fail_after} replies")
        return respond(messages)

    return Synthesis(config(SAMPLES), ScriptedModel(interrupting), run, lambda: FakeTicTacToe(), InProcessHarness,
                     description=RULES.format(p=0))


def _shape(search: Synthesis, result) -> tuple:
    nodes = sorted((n["candidate_id"], n["parent_id"], n["h"], n["refinements"]) for n in search.tree.to_json())
    return result.best_id, result.best_h, result.iterations, result.calls, result.tokens, result.history, nodes


def test_a_search_interrupted_by_the_model_resumes_without_asking_twice(tmp_path):
    ref_calls = tmp_path / "ref-calls.json"
    ref_search = _search(RunStore(tmp_path / "ref").create_run("autoharness", {}, "ref"), ref_calls)
    expected = _shape(ref_search, ref_search.run_search())

    run = RunStore(tmp_path / "store").create_run("autoharness", {}, "interrupted")
    calls = tmp_path / "calls.json"
    fail_after = 2 * SAMPLES + 1  # one reply into iteration 2
    with pytest.raises(Interrupted):
        _search(run, calls, fail_after).run_search()
    assert run.status()["status"] == "running"  # not finished: resumable
    assert run.load_checkpoint("autoharness")["calls"] == 2 * SAMPLES

    resumed = _search(run, calls)
    assert _shape(resumed, resumed.run_search()) == expected
    assert resumed.replies.replayed == 1
    assert _sent(calls) == _sent(ref_calls) == expected[3]


def test_journal_replays_only_replies_recorded_after_the_checkpoint():
    run = MemoryRun()
    model = ScriptedModel(["first", "second", "third"])
    journal = JournaledModel(model, run, REPLIES)
    messages = [{"role": "user", "content": "write the harness"}]
    assert journal.complete(messages, temperature=0.2, seed=7).text == "first"
    assert journal.complete(messages, temperature=0.7, seed=8).text == "second"

    again = JournaledModel(model, run, REPLIES)
    assert again.resume(1) == 1  # call 0 came before the checkpoint; only call 1 is replayable
    # A request that differs in any parameter is not the one recorded: it goes to the model.
    assert again.complete(messages, temperature=0.7, seed=9).text == "third"
    assert again.complete(messages, temperature=0.7, seed=8).text == "second"
    assert again.replayed == 1 and len(model.calls) == 3
    assert request_key("a", messages, {"seed": 1}) != request_key("b", messages, {"seed": 1})


@pytest.mark.parametrize("stop", ["solved", "call budget"])
def test_run_search_marks_its_run_done(tmp_path, stop):
    run = RunStore(tmp_path).create_run("autoharness", {}, "status")
    search = _search(run, tmp_path / "calls.json")
    if stop == "call budget":
        search.cfg = search.cfg.model_copy(update={"budget": search.cfg.budget.model_copy(update={"max_calls": 4})})
    result = search.run_search()
    assert result.stop_reason.startswith(stop)
    status = run.status()
    assert status["status"] == "done"
    assert status["summary"] == {"best_h": result.best_h, "stop_reason": result.stop_reason, "calls": result.calls}
    listed = {r["id"]: r for r in RunStore(tmp_path).list_runs()}
    assert listed[run.id]["status"] == "done"  # what `ratchet runs list` shows
