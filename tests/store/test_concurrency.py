"""Several processes writing one store at once: nothing lost, nothing doubled, no lock errors."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from ratchet.contracts import Candidate, EpisodeSummary, LLMCall
from ratchet.store import RunStore

CALLS = 120


def _worker(root: str, run_id: str, worker: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    store = RunStore(root)
    run = store.open_run(run_id)
    barrier.wait()  # start together, so the writes really overlap
    for i in range(CALLS):
        run.record_llm_call(LLMCall("m", f"w{worker}", i, 1, 0.01, True))
        if i % 10 == 0:
            run.add_candidate(Candidate.from_files("harness", {"h.py": f"{worker}-{i}"}))
            run.add_episode(EpisodeSummary(f"w{worker}-e{i}", "TicTacToe-v0", i, "a", 1, 0, {0: 1.0}, False, 0.1))


def _create(root: str, worker: int, barrier: multiprocessing.synchronize.Barrier) -> None:
    barrier.wait()  # all processes create the index (and migrate the schema) at the same moment
    store = RunStore(root)
    for i in range(5):
        store.create_run("race", {"worker": worker, "i": i})


def _run_all(target, args_list) -> None:  # type: ignore[no-untyped-def]
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(args_list))
    procs = [ctx.Process(target=target, args=(*args, barrier)) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * len(procs)


def test_two_processes_write_one_run_at_once(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = RunStore(root).create_run("rollouts", {})
    _run_all(_worker, [(str(root), run.id, 0), (str(root), run.id, 1)])

    totals = run.llm_totals()
    assert totals["calls"] == 2 * CALLS
    assert totals["prompt_tokens"] == 2 * sum(range(CALLS))
    breakdown = run.llm_breakdown()
    assert breakdown["w0"]["calls"] == breakdown["w1"]["calls"] == CALLS
    assert len(run.read_jsonl("llm_calls.jsonl")) == 2 * CALLS  # file log agrees with the index
    assert len(run.candidates()) == 2 * (CALLS // 10)
    assert len(run.episodes()) == 2 * (CALLS // 10)
    info = RunStore(root).get_run(run.id)
    assert info["episodes"] == 2 * (CALLS // 10) and info["llm_calls"] == 2 * CALLS


def test_processes_create_the_index_and_runs_concurrently(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    _run_all(_create, [(str(root), w) for w in range(4)])
    store = RunStore(root)
    rows = store.list_runs(limit=100)
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    con = sqlite3.connect(root / "index.sqlite")
    assert con.execute("SELECT COUNT(*) FROM meta").fetchone()[0] == 1


def test_threads_share_a_store(tmp_path: Path) -> None:
    import threading

    store = RunStore(tmp_path / "runs")
    run = store.create_run("serve", {})
    errors: list[BaseException] = []

    def loop(n: int) -> None:
        try:
            for i in range(50):
                run.record_llm_call(LLMCall("m", f"t{n}", 1, 1, 0.0, True))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert run.llm_totals()["calls"] == 200
