"""Sub-agents: real concurrent workers (one OS process each), whose state lives in files.

Each sub-agent has a directory ``<parent run>/agents/<id>/`` holding ``spec.json`` (task, model,
workspace, working directory, depth), ``process.json`` (pid and its kernel start time, so a
reused pid is never mistaken for it), and what its own :class:`~ratchet.runtime.agent.Agent`
writes there: ``state.json`` after every step, ``trace.jsonl``, ``memory/``. The supervisor keeps
no state of its own: a parent that was killed and started again reads the same files, finds the
workers that kept running, and resumes (``recover``) the ones that died mid-run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ratchet.processes import process_alive, process_start
from ratchet.runtime.errors import ToolError
from ratchet.store import read_json, read_jsonl, write_json_atomic

#: The parent's cursor over its sub-agents' traces: model calls already counted, per trace file.
ACCOUNTED = "accounted.json"

#: Statuses of a sub-agent as the supervisor reports them.
TERMINAL = ("submitted", "limits_exceeded", "repeated_failure", "interrupted", "terminated", "closed")


def is_alive(record: dict[str, Any] | None) -> bool:
    if not record or not record.get("pid"):
        return False
    # A record without a start time cannot tell its process from a later one with the same pid.
    return record.get("start_ticks") is not None and process_alive(int(record["pid"]), record["start_ticks"])


class Supervisor:
    """Spawns, lists, waits for, interrupts, resumes and closes the sub-agents under ``root``."""

    def __init__(self, root: Path, *, model_spec: str | None, model_options: dict[str, Any], workspace: Path,
                 workdir: Path, depth: int) -> None:
        self.root = Path(root)
        self.model_spec, self.model_options = model_spec, model_options
        self.workspace, self.workdir, self.depth = workspace, workdir, depth
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def dir(self, agent_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", agent_id or ""):
            raise ToolError(f"bad agent id {agent_id!r}; use letters, digits, '-', '_', '.'")
        return self.root / agent_id

    def ids(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if (p / "spec.json").exists()) if self.root.is_dir() else []

    def status(self, agent_id: str) -> dict[str, Any]:
        d = self.dir(agent_id)
        if not (d / "spec.json").exists():
            raise ToolError(f"no sub-agent {agent_id!r}; list_agents shows them")
        proc = self._procs.get(agent_id)
        if proc is not None:
            proc.poll()  # reap a finished child of this process so it does not linger as a zombie
        state = read_json(d / "state.json", {}) or {}
        alive = is_alive(read_json(d / "process.json"))
        if (d / "closed").exists():
            status = "closed"
        elif alive:
            status = "running"
        elif state.get("status") in TERMINAL:
            status = state["status"]
        else:
            status = "lost"  # its worker died mid-run: resume_agent (or recover) continues it
        spec = read_json(d / "spec.json")
        return {"id": agent_id, "status": status, "task": spec["task"][:200], "steps": state.get("steps", 0),
                "submission": state.get("submission", ""), "tokens": state.get("tokens", {})}

    def new_model_calls(self) -> list[dict[str, Any]]:
        """The model-call records of every sub-agent (nested ones too) not handed out before, in
        trace order. The cursor (calls counted per trace) is saved in ``ACCOUNTED`` under the root,
        so a parent started again on the same run directory does not count a call twice."""
        if not self.root.is_dir():
            return []
        seen = read_json(self.root / ACCOUNTED, {}) or {}
        fresh: list[dict[str, Any]] = []
        for trace in sorted(self.root.rglob("trace.jsonl")):
            key = trace.relative_to(self.root).as_posix()
            calls = [r for r in read_jsonl(trace) if r.get("type") == "model_call"]
            fresh += calls[int(seen.get(key, 0)):]
            seen[key] = len(calls)
        if fresh:
            write_json_atomic(self.root / ACCOUNTED, seen)
        return fresh

    def list(self) -> list[dict[str, Any]]:
        return [self.status(i) for i in self.ids()]

    def running(self) -> int:
        return sum(1 for s in self.list() if s["status"] == "running")

    def spawn(self, task: str, name: str = "", workdir: str = "") -> str:
        if not self.model_spec:
            raise ToolError("sub-agents need a model spec to start their own process; this agent was made without one")
        agent_id = name or f"agent-{len(self.ids()) + 1}"
        d = self.dir(agent_id)
        if (d / "spec.json").exists():
            raise ToolError(f"a sub-agent named {agent_id!r} exists already; resume_agent continues it")
        d.mkdir(parents=True, exist_ok=True)
        write_json_atomic(d / "spec.json", {"task": task, "model": self.model_spec, "model_options": self.model_options,
                                            "workspace": str(self.workspace), "workdir": workdir or str(self.workdir),
                                            "depth": self.depth + 1, "created_at": time.time()})
        self._launch(agent_id)
        return agent_id

    def _launch(self, agent_id: str, message: str = "") -> None:
        d = self.dir(agent_id)
        (d / "closed").unlink(missing_ok=True)
        (d / "interrupt").unlink(missing_ok=True)  # a request from before this launch is answered
        cmd = [sys.executable, "-m", "ratchet.runtime.worker", str(d)] + (["--message", message] if message else [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with (d / "worker.log").open("ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env)
        self._procs[agent_id] = proc
        write_json_atomic(d / "process.json", {"pid": proc.pid, "start_ticks": process_start(proc.pid),
                                               "started_at": time.time()})

    def resume(self, agent_id: str, message: str = "") -> str:
        status = self.status(agent_id)["status"]
        if status == "running":
            raise ToolError(f"sub-agent {agent_id!r} is still running; wait_agent or interrupt_agent first")
        self._launch(agent_id, message)
        return agent_id

    def recover(self) -> list[str]:
        """Resume every sub-agent whose worker died mid-run; returns their ids."""
        lost = [s["id"] for s in self.list() if s["status"] == "lost"]
        for agent_id in lost:
            self._launch(agent_id)
        return lost

    def wait(self, ids: list[str], timeout_s: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout_s
        while True:
            states = [self.status(i) for i in ids]
            if all(s["status"] != "running" for s in states) or time.monotonic() >= deadline:
                return states
            time.sleep(0.1)

    def interrupt(self, agent_id: str) -> None:
        """Ask the worker to stop before its next model call (it saves its state; resumable)."""
        (self.dir(agent_id) / "interrupt").write_text(str(time.time()))

    def close(self, agent_id: str) -> None:
        d = self.dir(agent_id)
        self.status(agent_id)
        (d / "closed").write_text(str(time.time()))
        record = read_json(d / "process.json")
        if is_alive(record):
            try:
                os.killpg(int(record["pid"]), signal.SIGTERM)
            except ProcessLookupError:
                pass
