"""Scheduled jobs, run by a real scheduler process and kept in files, so they survive restarts.

``<dir>/jobs.json`` holds the jobs (written atomically); ``<dir>/runs.jsonl`` gets one record per
run; ``<dir>/scheduler.json`` names the scheduler's pid (and kernel start time). A job's next
run time is moved forward *before* it runs, so a scheduler killed mid-run never runs it twice.
Run the scheduler with ``python -m ratchet.runtime.cron DIR``; :func:`ensure_scheduler` starts
one when none is alive. Each job is a shell command run in the sandbox, in its working directory.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ratchet.processes import process_start
from ratchet.runtime.config import PermissionPolicy
from ratchet.runtime.errors import PermissionDenied, ToolError
from ratchet.runtime.permissions import Guard
from ratchet.runtime.shell import Shell
from ratchet.runtime.subagents import is_alive
from ratchet.store import append_jsonl, read_json, read_jsonl, write_json_atomic

_EVERY = re.compile(r"@?every\s+(\d+(?:\.\d+)?)\s*(s|m|h)?$")
_UNITS = {"s": 1, "m": 60, "h": 3600, None: 1}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _field(spec: str, low: int, high: int) -> set[int]:
    """The values one cron field allows: ``*``, ``N``, ``A-B``, each with an optional ``/STEP``, comma-separated."""
    out: set[int] = set()
    for part in spec.split(","):
        body, _, step = part.partition("/")
        if body == "*":
            lo, hi = low, high
        elif "-" in body:
            lo, hi = (int(x) for x in body.split("-", 1))
        else:
            lo = hi = int(body)
        if lo < low or hi > high or lo > hi:
            raise ValueError(part)
        out.update(range(lo, hi + 1, int(step) if step else 1))
    return out


def next_run(schedule: str, after: float) -> float:
    """The first time after ``after`` that ``schedule`` fires: ``@every 30s|5m|2h`` or 5-field cron."""
    match = _EVERY.match(schedule.strip())
    if match:
        return after + float(match.group(1)) * _UNITS[match.group(2)]
    parts = schedule.split()
    try:
        if len(parts) != 5:
            raise ValueError(schedule)
        minute, hour, day, month, weekday = (_field(p, *r) for p, r in zip(parts, _RANGES))
    except ValueError as exc:
        raise ToolError(f"bad schedule {schedule!r}: use '@every 30s' (s, m or h) or five cron fields "
                        "like '*/5 * * * *'") from exc
    t = datetime.fromtimestamp(after).replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(366 * 24 * 60):
        if (t.minute in minute and t.hour in hour and t.day in day and t.month in month
                and (t.weekday() + 1) % 7 in weekday):
            return t.timestamp()
        t += timedelta(minutes=1)
    raise ToolError(f"schedule {schedule!r} never fires within a year")


class CronTable:
    """The jobs of one directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def jobs(self) -> list[dict[str, Any]]:
        return list(read_json(self.root / "jobs.json", []) or [])

    def _save(self, jobs: list[dict[str, Any]]) -> None:
        write_json_atomic(self.root / "jobs.json", jobs)

    def create(self, schedule: str, command: str, workdir: Path, network: bool = False,
               readable: list[str] | None = None, hidden: list[str] | None = None) -> dict[str, Any]:
        """A new job; ``readable`` (the creating agent's patterns) and ``hidden`` (its hidden paths)
        bind the job's commands as they bind the agent's own."""
        now = time.time()
        job = {"id": uuid.uuid4().hex[:8], "schedule": schedule, "command": command, "workdir": str(workdir),
               "network": network, "readable": list(readable or ["*"]), "hidden": list(hidden or []),
               "created_at": now, "next_run": next_run(schedule, now), "runs": 0}
        self._save(self.jobs() + [job])
        return job

    def delete(self, job_id: str) -> None:
        jobs = self.jobs()
        if not any(j["id"] == job_id for j in jobs):
            raise ToolError(f"no cron job {job_id!r}; cron_list shows them")
        self._save([j for j in jobs if j["id"] != job_id])

    def runs(self) -> list[dict[str, Any]]:
        return read_jsonl(self.root / "runs.jsonl") if (self.root / "runs.jsonl").exists() else []

    def claim_due(self, now: float) -> list[dict[str, Any]]:
        """Jobs due at ``now``, with their next run moved on (saved before they run)."""
        jobs, due = self.jobs(), []
        for job in jobs:
            if job["next_run"] <= now:
                due.append(dict(job))
                job["next_run"] = next_run(job["schedule"], now)
                job["runs"] += 1
                job["last_run"] = now
        if due:
            self._save(jobs)
        return due


def scheduler_alive(root: Path) -> bool:
    return is_alive(read_json(Path(root) / "scheduler.json"))


def ensure_scheduler(root: Path) -> int:
    """Start the scheduler for ``root`` unless one is alive; returns its pid."""
    record = read_json(Path(root) / "scheduler.json")
    if is_alive(record):
        return int(record["pid"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    with (Path(root) / "scheduler.log").open("ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ratchet.runtime.cron", str(root)], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    write_json_atomic(Path(root) / "scheduler.json", {"pid": proc.pid, "start_ticks": process_start(proc.pid),
                                                      "started_at": time.time()})
    return proc.pid


def stop_scheduler(root: Path) -> None:
    record = read_json(Path(root) / "scheduler.json")
    if is_alive(record):
        os.killpg(int(record["pid"]), signal.SIGTERM)


def _shell_for(job: dict[str, Any], root: Path) -> Shell:
    """The sandboxed shell of one job: its agent's readable rules and hidden paths, the cron
    directory hidden too; denials go to the cron directory's ``denials.jsonl``."""
    workdir = Path(job["workdir"])
    guard = Guard(PermissionPolicy(readable=job.get("readable") or ["*"]), workdir, root / "denials.jsonl")
    guard.tool_name = f"cron:{job['id']}"
    return Shell(workdir, network=bool(job.get("network")), hidden=[root, *(Path(p) for p in job.get("hidden", []))],
                 guard=guard)


def serve(root: Path, tick_s: float = 0.5) -> None:
    """The scheduler loop: run due jobs until killed (or until its directory is removed)."""
    table = CronTable(root)
    shells: dict[str, Shell] = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while Path(root).is_dir():
            for job in table.claim_due(time.time()):
                shell = shells.get(job["id"]) or shells.setdefault(job["id"], _shell_for(job, Path(root)))
                started = time.time()
                try:
                    result = shell.run(job["command"], 60.0, 16 * 1024)
                except PermissionDenied as exc:  # the readable rules cannot be enforced here
                    result = {"returncode": None, "output": f"error: {exc}"}
                append_jsonl(Path(root) / "runs.jsonl", {"job": job["id"], "at": started, "pid": os.getpid(),
                                                         "duration_s": time.time() - started,
                                                         "returncode": result["returncode"],
                                                         "output": result["output"][-2000:]})
            time.sleep(tick_s)
    finally:
        for shell in shells.values():
            shell.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="ratchet.runtime.cron")
    parser.add_argument("root", type=Path)
    serve(parser.parse_args().root)
