"""Evaluations that call the model, on a local process pool (``--workers N``): their calls come back
to the driver's one budget and journal (``executors/local_gateway.py``), as on Ray. A pool process
killed right after its evaluation's call returned stops the run; resumed, the run is given that
journaled reply instead of paying for it again, and ends where the in-process run ends."""

from __future__ import annotations

import asyncio
import pickle
import threading
from multiprocessing.connection import Client
from pathlib import Path

import pytest

import calling_run
from ratchet.evolve.cache import REPLIES
from ratchet.evolve.loop import Engine
from ratchet.executors import LocalExecutor
from ratchet.executors.local_gateway import LocalGateway, PipeModel
from ratchet.models import ScriptedModel
from ratchet.store import RunStore

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow


@pytest.fixture()
def doubles(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE.parent / "evolve"))  # doubles:ModelProposer (it runs in the driver)


def _run(root: Path, executor, markers: Path | None = None, paid: Path | None = None):
    cfg = calling_run.config(calling_run.workspace(root), markers)
    run = RunStore(root / "runs").create_run("evolve", cfg)
    return Engine(cfg, run, calling_run.model(paid), executor=executor).execute(), run, cfg


def test_evaluations_that_call_the_model_run_on_a_pool_with_one_budget_and_one_journal(tmp_path, doubles):
    summary, run, _ = _run(tmp_path / "here", None)
    here = {**calling_run.content(summary, run), "replies": calling_run.replies(run),
            "logged": len(run.read_jsonl("llm_calls.jsonl"))}
    assert here["model_calls"] == here["logged"] == here["task_evals"] + 2 > 30  # one per evaluation, one per proposal
    with LocalExecutor(2) as pool:
        summary, run, _ = _run(tmp_path / "pool", pool)
    on_pool = {**calling_run.content(summary, run), "replies": calling_run.replies(run),
               "logged": len(run.read_jsonl("llm_calls.jsonl"))}
    # The same evaluations, decisions and report; the same calls paid and logged (budget counted
    # once); every reply journaled once, under its evaluation and call number.
    assert on_pool == here
    slots = [(r["unit"], r["index"]) for r in run.read_jsonl(REPLIES) if r.get("unit")]
    assert len(slots) == len(set(slots)) == here["task_evals"]


def test_a_pool_process_killed_after_its_call_returned_is_not_paid_again_on_resume(tmp_path, doubles):
    summary, run, _ = _run(tmp_path / "here", None)
    here = {**calling_run.content(summary, run), "replies": calling_run.replies(run)}

    root, markers, paid = tmp_path / "pool", tmp_path / "markers", tmp_path / "paid.log"
    killer = calling_run.MarkerKiller(markers)
    killer.start()
    with LocalExecutor(2) as pool, pytest.raises(Exception) as broken:
        _run(root, pool, markers, paid)
    killer.join(timeout=5)
    assert killer.killed is not None and "BrokenProcessPool" in type(broken.value).__name__
    [run_id] = RunStore(root / "runs").run_ids()
    run = RunStore(root / "runs").open_run(run_id)
    paid_before = len(paid.read_text().splitlines())
    journaled_before = len(run.read_jsonl(REPLIES))

    cfg = calling_run.config(calling_run.workspace(root), markers)
    with LocalExecutor(2) as pool:
        summary = Engine(cfg, run, calling_run.model(paid), executor=pool).execute()
    resumed = {**calling_run.content(summary, run), "replies": calling_run.replies(run)}
    for part in ("evals", "candidates", "report", "replies"):
        assert resumed[part] == here[part], part
    # The killed evaluation's reply was journaled before its process died: its rerun replayed it.
    assert summary["replayed_replies"] >= 1
    assert len(paid.read_text().splitlines()) - paid_before == len(run.read_jsonl(REPLIES)) - journaled_before


def test_the_pool_model_pickles_and_reports_errors_from_the_driver(tmp_path):
    class Server:
        name = "scripted"

        def __init__(self):
            self.model = ScriptedModel(["first"])

        def complete_for(self, unit, index, messages, **params):
            return self.model.complete(messages, **params)

    with LocalGateway(Server()) as gateway:
        model = pickle.loads(pickle.dumps(gateway.model))
        assert isinstance(model, PipeModel) and model.complete([{"role": "user", "content": "x"}]).text == "first"
        with pytest.raises(Exception, match="ran out of responses"):
            model.complete([{"role": "user", "content": "y"}])
        assert gateway.served == 2


def test_a_caller_with_the_wrong_key_leaves_the_gateway_serving_and_closable():
    class Server:
        name = "scripted"

        def __init__(self):
            self.model = ScriptedModel(["after"])

        def complete_for(self, unit, index, messages, **params):
            return self.model.complete(messages, **params)

    gateway = LocalGateway(Server())
    with pytest.raises(Exception):  # refused by the key check (the acceptor must live on)
        Client(gateway.model.address, family="AF_UNIX", authkey=b"not the key").close()
    replies: list[str] = []
    caller = threading.Thread(target=lambda: replies.append(gateway.model.complete([{"role": "user", "content": "x"}]).text),
                              daemon=True)
    caller.start()
    caller.join(timeout=30)
    closer = threading.Thread(target=gateway.close, daemon=True)
    closer.start()
    closer.join(timeout=30)
    assert replies == ["after"], "the gateway stopped accepting after a refused caller"
    assert not closer.is_alive(), "close() hung"


class MeetingServer:
    """Answers a call only while a second call is being answered too: calls that do not overlap
    (one waits for the other's reply before it is sent) break the barrier and fail."""

    name = "meeting"

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=20)
        self.model = ScriptedModel(lambda messages: messages[-1]["content"].upper())

    def complete_for(self, unit, index, messages, **params):
        self.barrier.wait()
        return self.model.complete(messages, **params)


def asking_twice(model) -> list[str]:
    """Two ``acomplete`` calls at once on one event loop."""
    async def both():
        return await asyncio.gather(*(model.acomplete([{"role": "user", "content": c}]) for c in ("a", "b")))

    return [reply.text for reply in asyncio.run(both())]


def test_two_acomplete_calls_of_the_pool_model_overlap():
    server = MeetingServer()
    with LocalGateway(server) as gateway:
        model = pickle.loads(pickle.dumps(gateway.model))
        assert asking_twice(model) == ["A", "B"]  # each waited for the other: neither blocked the loop
        assert asking_twice(model) == ["A", "B"]  # and again, on the connections the first two left idle
        assert gateway.served == 4
