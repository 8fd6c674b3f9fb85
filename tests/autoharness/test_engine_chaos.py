"""Chaos on the engine path: ``ratchet autoharness`` (the engine, its default) SIGKILLed at random
moments and resumed each time keeps its SQLite store intact, pays for no journaled reply twice and
ends where an uninterrupted run ends (the same candidates, evaluations, decisions and report)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from killed_runs import only_run, whole_lines

DRIVER = Path(__file__).with_name("chaos_cli.py")
KILLS = 8
REPLIES = "evolve/replies.jsonl"  # the engine's journal of the run's model replies
OPTIONS = ["--env", "TicTacToe-v0", "--model", "scripted:", "--method", "faithful", "--iterations", "8",
           "--set", "eval_steps=60", "--set", "search_seeds=[0,1]",
           "--set", "heldout_seeds=[50]", "--set", "rng_seed=3", "--protocol", "none"]


def _command(root: Path, resume: str | None) -> list[str]:
    extra = ["--resume", resume] if resume else []
    return [sys.executable, str(DRIVER), str(root / "ledger.jsonl"), *OPTIONS,
            "--set", f"library_dir={root / 'lib'}", "--store", str(root / "runs"), *extra]


def _store(root: Path, run_id: str) -> dict:
    """What the run kept: its candidates, its finished evaluations, the engine's decisions and the reports."""
    with sqlite3.connect(root / "runs" / "index.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        candidates = {(r[0], r[1], r[2], round(r[3], 9) if r[3] is not None else None) for r in conn.execute(
            "SELECT id, parent_id, status, score FROM candidates WHERE run_id = ?", (run_id,))}
        evaluations = {(r[0], r[1], round(r[2], 9)) for r in conn.execute(
            "SELECT candidate_id, split, score FROM evaluations WHERE run_id = ?", (run_id,))}
    run_dir = root / "runs" / run_id
    events = [json.loads(line) for line in (run_dir / "evolve" / "events.jsonl").read_text().splitlines()
              if line.strip().endswith("}")] if (run_dir / "evolve" / "events.jsonl").exists() else []
    steps = sorted({(e.get("step"), e.get("candidate"), e.get("decision")) for e in events if e.get("kind") == "step"}, key=str)
    report = json.loads((run_dir / "report.json").read_text()) if (run_dir / "report.json").exists() else None
    if report:
        report = {"best_h": report["search"]["best_h"], "iterations": report["search"]["iterations"],
                  "stop": report["search"]["stop_reason"], "nodes": report["search"]["nodes"],
                  "best": report["engine"]["best"]["id"], "alone": report["harness_alone"], "adoption": report["adoption"]}
    return {"candidates": candidates, "evaluations": evaluations, "steps": steps, "report": report}


def _finish(root: Path) -> None:
    done = subprocess.run(_command(root, only_run(root)), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_the_engine_path_killed_at_random_points_resumes_to_the_uninterrupted_result(tmp_path):
    reference_root = tmp_path / "reference"
    began, started_at = time.perf_counter(), time.time()
    _finish(reference_root)
    reference_s = time.perf_counter() - began
    reference_id = only_run(reference_root)
    assert reference_id
    reference = _store(reference_root, reference_id)
    reference_calls = whole_lines(reference_root / "ledger.jsonl")
    paid_at = [json.loads(line)["at"] for line in (reference_root / "ledger.jsonl").read_text().splitlines()]
    startup_s = paid_at[0] - started_at  # until the first reply
    work_s = reference_s - startup_s
    assert reference["report"] and reference["steps"] and reference_calls >= 4
    assert whole_lines(reference_root / "runs" / reference_id / REPLIES) == reference_calls

    rng = random.Random(20261206)
    kills = attempts = finished = 0
    roots, unjournaled = [tmp_path / "chaos-0"], 0
    while kills < KILLS and attempts < 3 * KILLS:
        attempts += 1
        root = roots[-1]
        proc = subprocess.Popen(_command(root, only_run(root)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            # From half the start-up to a little past it: the kills land in calls, evaluations and writes.
            proc.wait(timeout=rng.uniform(0.5 * startup_s, startup_s + 5 * work_s / KILLS))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
        else:
            # It finished before the kill came: check it as the last one, go on killing a fresh run.
            assert proc.returncode == 0, proc.stderr.read().decode()[-3000:]
            _check_resumed(root, reference, reference_calls, unjournaled)
            finished += 1
            roots.append(tmp_path / f"chaos-{len(roots)}")
            unjournaled = 0
            continue
        finally:
            proc.stderr.close()
        run_id = only_run(root)
        if run_id is None:
            continue  # killed before the run existed
        kept = _store(root, run_id)  # also: PRAGMA integrity_check after every kill
        # A reply the endpoint returned but the journal had not written yet may be asked again.
        unjournaled = whole_lines(root / "ledger.jsonl") - whole_lines(root / "runs" / run_id / REPLIES)
        assert kept["evaluations"] <= reference["evaluations"]
        assert {c[0] for c in kept["candidates"]} <= {c[0] for c in reference["candidates"]}
    assert kills == KILLS, f"only {kills} kills landed in {attempts} attempts"

    _finish(roots[-1])
    _check_resumed(roots[-1], reference, reference_calls, unjournaled)
    print(f"engine chaos: {kills} kills in {attempts} attempts over {len(roots)} run(s)")


def _check_resumed(root: Path, reference: dict, reference_calls: int, unjournaled: int) -> None:
    """A killed-and-resumed run that finished equals the uninterrupted one and paid for no journaled
    reply twice (only one cut off between the endpoint and the journal is asked again)."""
    run_id = only_run(root)
    assert _store(root, run_id) == reference
    assert whole_lines(root / "runs" / run_id / REPLIES) == reference_calls  # each reply journaled once
    assert whole_lines(root / "ledger.jsonl") == reference_calls + unjournaled
