"""Chaos: ``ratchet evolve`` SIGKILLed at random moments and resumed each time keeps every accepted
candidate and finished evaluation, pays for no reply twice, keeps its SQLite store intact and ends
where an uninterrupted run with the same seeds ends."""

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
import yaml
from doubles import make_workspace
from killed_runs import only_run, whole_lines, whole_records

from ratchet.evolve.cache import EVALS, REPLIES

DRIVER = Path(__file__).with_name("chaos_cli.py")
KILLS = 20  # each resume pays the CLI's start-up (3-5 s on two busy cores): about a minute on an idle machine


def _config(root: Path) -> Path:
    make_workspace(root, p=0.2)
    data = {"workspace": "ws", "model": "scripted:", "suite": {"name": "noisy", "options": {"tasks": 40}},
            "splits": {"search": 0.25, "heldin": 0.25, "heldout": 0.25, "test": 0.25},
            "selector": {"name": "greedy"}, "proposers": [{"name": "doubles:ModelProposer"}],
            "iterations": 12, "seeds": [0, 1, 2], "static": {"load_entry": False}, "seed": 5}
    path = root / "evolve.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _command(root: Path) -> list[str]:
    run_id = only_run(root)
    args = ["resume", run_id] if run_id else ["run", str(root / "evolve.yaml")]
    return [sys.executable, str(DRIVER), str(root / "ledger.jsonl"), *args, "--root", str(root / "runs")]


def _store(root: Path, run_id: str) -> dict:
    """What the run kept: candidates (index), finished evaluations (the cache), its report."""
    with sqlite3.connect(root / "runs" / "index.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        candidates = {(r[0], r[1], r[2], round(r[3], 9) if r[3] is not None else None) for r in conn.execute(
            "SELECT id, parent_id, status, score FROM candidates WHERE run_id = ?", (run_id,))}
    run_dir = root / "runs" / run_id
    evals = [(r["candidate"], r["task_id"], r["seed"], r["score"]) for r in whole_records(run_dir / EVALS)]
    assert len(evals) == len(set(evals))  # no evaluation ran (and was paid) twice
    report_path = run_dir / "evolve" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return {"candidates": candidates, "evals": set(evals), "report": report and report["comparison"]}


def _finish(root: Path) -> None:
    done = subprocess.run(_command(root), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


@pytest.mark.slow
def test_evolve_killed_at_random_points_resumes_to_the_uninterrupted_result(tmp_path):
    reference_root = tmp_path / "reference"
    _config(reference_root)
    began, started_at = time.perf_counter(), time.time()
    _finish(reference_root)
    reference_s = time.perf_counter() - began
    reference_id = only_run(reference_root)
    reference = _store(reference_root, reference_id)
    reference_calls = whole_lines(reference_root / "ledger.jsonl")
    first_call = json.loads((reference_root / "ledger.jsonl").read_text().splitlines()[0])["at"]
    startup_s = first_call - started_at  # imports, the original's evaluation
    work_s = reference_s - startup_s
    accepted = {c for c in reference["candidates"] if c[2] == "accepted"}
    assert reference["report"] and reference_calls >= 10 and len(accepted) >= 2
    assert whole_lines(reference_root / "runs" / reference_id / REPLIES) == reference_calls

    rng = random.Random(20261201)
    kills = attempts = 0
    roots = [tmp_path / "chaos-0"]
    _config(roots[0])
    unjournaled = 0
    while kills < KILLS and attempts < 3 * KILLS:
        attempts += 1
        root = roots[-1]
        proc = subprocess.Popen(_command(root), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        try:
            # From most of the start-up to a share of the work past it: each attempt gets some work
            # done, so the kills land in model calls, evaluations and store writes.
            proc.wait(timeout=rng.uniform(0.8 * startup_s, startup_s + work_s / KILLS))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
        else:
            # It finished before the kill came (start-up was quicker than the reference's): check
            # it like the last one and go on killing a fresh run.
            assert proc.returncode == 0, proc.stderr.read().decode()[-3000:]
            _check_resumed(root, reference, reference_calls, unjournaled)
            roots.append(tmp_path / f"chaos-{len(roots)}")
            _config(roots[-1])
            unjournaled = 0
            continue
        finally:
            proc.stderr.close()
        run_id = only_run(root)
        if run_id is None:
            continue  # killed before the run existed
        kept = _store(root, run_id)  # PRAGMA integrity_check after every kill, too
        # Replies the endpoint returned that the journal had not written when a kill came: asked
        # for (and paid) again after the resume. Cumulative, as both files only grow.
        unjournaled = whole_lines(root / "ledger.jsonl") - whole_lines(root / "runs" / run_id / REPLIES)
        assert kept["evals"] <= reference["evals"]  # every finished evaluation belongs to the final run
        assert {c for c in kept["candidates"] if c[2] == "accepted"} <= accepted
    assert kills == KILLS, f"only {kills} kills landed in {attempts} attempts"

    _finish(roots[-1])
    _check_resumed(roots[-1], reference, reference_calls, unjournaled)
    print(f"evolve chaos: {kills} kills in {attempts} attempts over {len(roots)} run(s); reference {reference_s:.1f} s "
          f"(start-up {startup_s:.1f} s)")


def _check_resumed(root: Path, reference: dict, reference_calls: int, unjournaled: int) -> None:
    """A killed-and-resumed run that finished equals the uninterrupted one and paid for no reply
    twice, except one cut off between the endpoint and the journal."""
    final = _store(root, only_run(root))
    assert final == reference  # the same candidates, decisions, evaluations and report
    assert whole_lines(root / "runs" / only_run(root) / REPLIES) == reference_calls  # each journaled reply asked once
    assert whole_lines(root / "ledger.jsonl") == reference_calls + unjournaled
