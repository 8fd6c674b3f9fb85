"""A run whose process was killed without marking it reads `interrupted`, never `running` for good."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer
from typer.testing import CliRunner

from ratchet.cli import runs as runs_cli
from ratchet.processes import ProcessRecord, process_alive, process_start
from ratchet.store import RunStore

# Creates a run, says which, then waits to be killed: a run process that never gets to record an end.
OWNER = r"""
import sys, time
from ratchet.store import RunStore
run = RunStore(sys.argv[1]).create_run("evolve", {"iterations": 3}, name="killed")
print(run.id, flush=True)
time.sleep(600)
"""


def _killed_run(root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(root)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    run_id = proc.stdout.readline().strip()
    assert RunStore(root).open_run(run_id).status()["status"] == "running"  # its owner still lives
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return run_id


def test_a_sigkilled_run_reads_interrupted_everywhere_and_a_resume_makes_it_running(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run_id = _killed_run(root)
    store = RunStore(root)
    run = store.open_run(run_id)
    status = run.status()
    assert status["status"] == "interrupted" and "resume" in status["reason"]
    assert [r["status"] for r in store.list_runs()] == ["interrupted"]
    assert store.get_run(run_id)["status"] == "interrupted"
    app = typer.Typer()
    runs_cli.register(app)
    out = CliRunner().invoke(app, ["runs", "list", "--root", str(root)], env={"COLUMNS": "200"}).output
    assert "interrupted" in out and "running" not in out
    # This process takes it over: running again, and owned by a live process.
    run.set_status("running")
    assert run.status()["status"] == "running" and store.list_runs()[0]["status"] == "running"
    run.set_status("done", {"state": "done"})
    assert run.status()["status"] == "done" and "owner" not in run.read_json("status.json")


def test_a_live_owner_an_ownerless_record_and_another_hosts_owner_read_as_written(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    run = store.create_run("evolve", {})
    assert run.status()["status"] == "running"  # this test's process owns it
    record = run.read_json("status.json")
    run.write_json("status.json", {k: v for k, v in record.items() if k != "owner"})  # runs from before owners
    assert run.status()["status"] == "running"
    far = {**record, "owner": {"host": "another-host", "pid": 1, "started": "1"}}
    run.write_json("status.json", far)  # a process on another machine cannot be checked from here
    assert run.status()["status"] == "running"
    assert ProcessRecord.load({"pid": "x"}) is None and ProcessRecord.load(None) is None


def test_process_liveness_tells_a_reused_pid_and_a_zombie_from_the_process_recorded() -> None:
    me = os.getpid()
    assert process_alive(me, process_start(me)) and not process_alive(me, "-1")  # same pid, other start
    assert not ProcessRecord.current().gone()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while process_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Exited but not reaped (nobody waited): still in /proc as a zombie, and gone all the same.
    assert process_start(child.pid) is not None and not process_alive(child.pid)
    assert ProcessRecord.of(child.pid).gone()
    child.wait()


def test_the_reason_a_run_ended_can_still_be_recorded_after_its_owner_died(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = RunStore(root).open_run(_killed_run(root))
    run.record_failure(RuntimeError("lost: its worker died on all 2 attempts"))
    status = run.status()
    assert status["status"] == "failed" and "worker died" in status["summary"]["error"]
