"""Chaos: ``ratchet autoharness --search`` (the dedicated search) SIGKILLed at random moments and resumed each time loses nothing,
pays for no reply twice, keeps its SQLite store intact and ends where an uninterrupted run ends."""

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

from ratchet.autoharness.search import REPLIES

DRIVER = Path(__file__).with_name("chaos_cli.py")
KILLS = 20
OPTIONS = ["--search", "--env", "TicTacToe-v0", "--model", "scripted:", "--method", "faithful", "--iterations", "8",
           "--set", "eval_envs=2", "--set", "eval_steps=60", "--set", "search_seeds=[0,1]",
           "--set", "heldout_seeds=[50]", "--set", "rng_seed=3", "--protocol", "none"]


def _command(root: Path, resume: str | None) -> list[str]:
    extra = ["--resume", resume] if resume else []
    return [sys.executable, str(DRIVER), str(root / "ledger.jsonl"), *OPTIONS,
            "--set", f"library_dir={root / 'lib'}", "--store", str(root / "runs"), *extra]


def _store(root: Path, run_id: str) -> dict:
    """What the run kept: its candidates, its finished evaluations, its tree, its report."""
    with sqlite3.connect(root / "runs" / "index.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        candidates = {(r[0], r[1], r[2], round(r[3], 9) if r[3] is not None else None) for r in conn.execute(
            "SELECT id, parent_id, status, score FROM candidates WHERE run_id = ?", (run_id,))}
        evaluations = {(r[0], r[1], round(r[2], 9)) for r in conn.execute(
            "SELECT candidate_id, split, score FROM evaluations WHERE run_id = ?", (run_id,))}
    run_dir = root / "runs" / run_id
    checkpoint = sorted((run_dir / "checkpoints").glob("autoharness*"))
    state = json.loads(checkpoint[-1].read_text()) if checkpoint else {}
    tree = sorted((n["candidate_id"], n["parent_id"], round(n["h"], 9), n["refinements"]) for n in state.get("tree", []))
    report = json.loads((run_dir / "report.json").read_text()) if (run_dir / "report.json").exists() else None
    if report:
        for key in ("run_id", "wall_s"):
            report.pop(key, None)
        report["search"].pop("wall_s", None)
    return {"candidates": candidates, "evaluations": evaluations, "tree": tree, "report": report}


def _finish(root: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(_command(root, only_run(root)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_autoharness_killed_at_random_points_resumes_to_the_uninterrupted_result(tmp_path):
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
    assert reference["report"]["search"]["best_h"] == 1.0 and reference_calls >= 4
    assert whole_lines(reference_root / "runs" / reference_id / REPLIES) == reference_calls

    rng = random.Random(20261201)
    kills = attempts = paid_total = 0
    replies_at_kill: list[int] = []  # where the kills landed, for the log
    roots = [tmp_path / "chaos-0"]
    unjournaled = 0
    while kills < KILLS and attempts < 3 * KILLS:
        attempts += 1
        root = roots[-1]
        proc = subprocess.Popen(_command(root, only_run(root)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            # From half the start-up (imports, the root's evaluation) to a little past it: each
            # attempt gets some work done, so the kills land in calls, evaluations and writes.
            proc.wait(timeout=rng.uniform(0.5 * startup_s, startup_s + 5 * work_s / KILLS))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
        else:
            # It finished before the kill came (the machine got faster than the reference run
            # measured): check this run like the last one and go on killing a fresh one.
            assert proc.returncode == 0, proc.stderr.read().decode()[-3000:]
            paid_total += _check_resumed(root, reference, reference_calls, unjournaled)
            roots.append(tmp_path / f"chaos-{len(roots)}")
            unjournaled = 0
            continue
        finally:
            proc.stderr.close()
        run_id = only_run(root)
        if run_id is None:
            continue  # killed before the run existed
        kept = _store(root, run_id)  # also: PRAGMA integrity_check after every kill
        # A reply the endpoint returned but the journal had not written yet is the one that may
        # be asked again (the kill fell between the two); count those windows as they happen.
        unjournaled = whole_lines(root / "ledger.jsonl") - whole_lines(root / "runs" / run_id / REPLIES)
        replies_at_kill.append(whole_lines(root / "ledger.jsonl"))
        # Every finished evaluation and every evaluated candidate so far belongs to the final run.
        assert kept["evaluations"] <= reference["evaluations"]
        assert {c for c in kept["candidates"] if c[2] == "evaluated"} <= reference["candidates"]
    assert kills == KILLS, f"only {kills} kills landed in {attempts} attempts"

    _finish(roots[-1])
    paid_total += _check_resumed(roots[-1], reference, reference_calls, unjournaled)
    print(f"chaos: {kills} kills in {attempts} attempts over {len(roots)} run(s), {paid_total} replies paid for vs "
          f"{reference_calls * len(roots)} uninterrupted; replies paid at each kill: {replies_at_kill}")


def _check_resumed(root: Path, reference: dict, reference_calls: int, unjournaled: int) -> int:
    """A killed-and-resumed run that finished equals the uninterrupted one and paid for no reply
    twice, except one cut off between the endpoint and the journal; returns the replies paid."""
    final = _store(root, only_run(root))
    assert final == reference
    journal = whole_lines(root / "runs" / only_run(root) / REPLIES)
    assert journal == reference_calls  # each journaled reply was asked for exactly once
    paid = whole_lines(root / "ledger.jsonl")
    assert paid == reference_calls + unjournaled
    return paid
