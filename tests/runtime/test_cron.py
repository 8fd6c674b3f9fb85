"""Scheduled jobs are run by a scheduler process and survive its restart (and the agent's)."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import datetime

import pytest

from ratchet.runtime import PermissionPolicy
from ratchet.sandbox import isolation_report
from ratchet.runtime.cron import CronTable, ensure_scheduler, next_run, scheduler_alive, stop_scheduler
from ratchet.runtime.errors import ToolError
from ratchet.store import read_json

from .conftest import call, wait_for


def test_schedules():
    t = datetime(2026, 12, 1, 10, 7, 30).timestamp()
    assert next_run("@every 30s", t) == t + 30 and next_run("every 2m", t) == t + 120
    assert datetime.fromtimestamp(next_run("*/15 * * * *", t)) == datetime(2026, 12, 1, 10, 15)
    assert datetime.fromtimestamp(next_run("0 9 * * 1", t)) == datetime(2026, 12, 7, 9, 0)  # next Monday
    assert datetime.fromtimestamp(next_run("5,10 10 1 12 *", t)) == datetime(2026, 12, 1, 10, 10)
    assert datetime.fromtimestamp(next_run("0 9 * * 1-5", t)) == datetime(2026, 12, 2, 9, 0)  # Tue -> Wed
    for bad in ("soon", "* * *", "61 * * * *", "@every", "5-2 * * * *"):
        with pytest.raises(ToolError, match="bad schedule"):
            next_run(bad, t)


@pytest.mark.slow
def test_cron_jobs_survive_a_scheduler_restart(make_agent, workdir):
    agent = make_agent()
    root = agent.run_dir / "cron"
    out = call(agent, "cron_create", schedule="@every 1s", command="date +%s.%N >> ticks.txt")
    job_id = out.split()[3].rstrip(",")
    try:
        wait_for(lambda: len(CronTable(root).runs()) >= 2)
        first_pid = read_json(root / "scheduler.json")["pid"]
        assert ensure_scheduler(root) == first_pid  # one scheduler at a time
        os.killpg(first_pid, signal.SIGKILL)  # the scheduler dies (as in a machine restart)
        wait_for(lambda: not scheduler_alive(root))
        before = len(CronTable(root).runs())
        time.sleep(1.5)
        assert len(CronTable(root).runs()) == before  # nothing runs while no scheduler is up
        # A new agent on the same run directory (or anyone) starts the scheduler again: the job is still there.
        again = make_agent(run_dir=agent.run_dir)
        assert job_id in call(again, "cron_list")
        second_pid = ensure_scheduler(root)
        assert second_pid != first_pid
        wait_for(lambda: len(CronTable(root).runs()) >= before + 2)
        runs = CronTable(root).runs()
        assert {r["pid"] for r in runs} == {first_pid, second_pid}
        assert all(r["returncode"] == 0 and r["job"] == job_id for r in runs)
        assert len((workdir / "ticks.txt").read_text().splitlines()) >= len(runs) - 1
        assert json.loads(call(again, "cron_list"))[0]["runs"] >= len(runs) - 1
        assert call(again, "cron_delete", id=job_id) == f"deleted cron job {job_id}"
        assert call(again, "cron_list") == "no cron jobs"
        settled = len(CronTable(root).runs())
        time.sleep(2)
        assert len(CronTable(root).runs()) <= settled + 1  # at most the run that was under way
        assert "no cron job 'nope'" in call(again, "cron_delete", id="nope")
    finally:
        stop_scheduler(root)


def test_cron_commands_are_checked_by_the_policy(make_agent):
    agent = make_agent(policy=PermissionPolicy(allowed_commands=["echo *"]))
    assert "permission denied by allowed_commands" in call(agent, "cron_create", schedule="@every 1h", command="rm x")
    assert not (agent.run_dir / "cron" / "scheduler.json").exists()


@pytest.mark.slow
@pytest.mark.skipif(isolation_report()["mechanism"] != "bwrap", reason="needs bubblewrap")
def test_cron_commands_are_bound_by_the_agents_readable_rules(make_agent, workdir):
    (workdir / "private.txt").write_text("HIDDENTEXT\n")
    agent = make_agent(policy=PermissionPolicy(readable=["calc.py", "notes.txt"]))
    root = agent.run_dir / "cron"
    call(agent, "cron_create", schedule="@every 1s", command="cat private.txt notes.txt")
    try:
        wait_for(lambda: len(CronTable(root).runs()) >= 1)
    finally:
        stop_scheduler(root)
    output = CronTable(root).runs()[0]["output"]
    assert "alpha" in output and "HIDDENTEXT" not in output  # a readable file shows, the other is an empty view
