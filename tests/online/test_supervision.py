"""Supervised loops with real processes: a SIGKILLed judge or trainer is restarted (bounded, with
backoff, shown by `ratchet serve status`), shutdown after a dead child is prompt and orderly, a
SIGKILLed server leaves no orphans, and a restart on the same run finds no stale pair.

The judge is the real rule-judge loop; the trainer is the stand-in loop of test_loops.py."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.contracts import RatchetError
from ratchet.online import status as status_mod
from ratchet.online.config import OnlineConfig
from ratchet.online.loops import LocalLoops
from ratchet.online.supervision import RestartPolicy, StopSignal, read_status, write_pidfile
from ratchet.processes import process_alive

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
FAKE_TRAINER = "test_loops:fake_trainer_loop"


def crashing_loop(config, queue_path, versions_dir, stop_event):
    raise RuntimeError("this loop always crashes")


def slow_start_loop(config, queue_path, versions_dir, stop_event):
    """A trainer whose start-up (imports, model load) takes longer than any stop deadline."""
    time.sleep(120)
    while not stop_event.is_set():
        stop_event.wait(0.05)


def slow_stop_loop(config, queue_path, versions_dir, stop_event):
    """A trainer that takes a moment to finish after its stop (returning its claims, a last write)."""
    Path(f"{queue_path}.{os.getpid()}.looping").touch()  # past its start-up
    while not stop_event.is_set():
        stop_event.wait(0.05)
    time.sleep(1.5)


def wait_for(condition, timeout: float = 120.0, what: str = "condition"):
    """``condition()``'s first truthy value. The deadline is generous: every loop start is a fresh
    spawned interpreter importing ratchet, which took over 20 s with the cores busy."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout:.0f}s")
        time.sleep(0.1)


def config(**loops) -> OnlineConfig:
    cfg = OnlineConfig(learn="combine", trainer_loop=FAKE_TRAINER, judge={"kind": "classifier"})  # never the 1.5B
    cfg.judge.poll_s = 0.05
    cfg.loops = cfg.loops.model_copy(update={"watch_s": 0.1, "restart_backoff_s": 0.1, **loops})
    return cfg


def running(state_dir: Path, name: str, restarts: int):
    """The loop's pid once loops.json says it runs with ``restarts`` restarts and its process lives."""
    st = read_status(state_dir)
    loop = (st or {}).get("loops", {}).get(name)
    if loop and loop["state"] == "running" and loop["restarts"] == restarts and process_alive(loop["pid"]):
        return loop["pid"]
    return None


# ------------------------------------------------------------------ pieces


def test_restart_policy_backs_off_and_gives_up_within_its_window():
    policy = RestartPolicy(max_restarts=3, window_s=100, backoff_s=1, backoff_max_s=3)
    assert [policy.delay([], 0), policy.delay([0], 1), policy.delay([0, 1], 2)] == [1, 2, 3]
    assert policy.delay([0, 1, 2], 3) is None
    assert policy.delay([0, 1, 2], 150) == 1  # old restarts age out of the window


def test_stop_signal_is_a_pipe_nothing_can_block():
    reader, writer = multiprocessing.Pipe(duplex=False)
    stop = StopSignal(reader, os.getppid())  # as a child sees it: its parent is the one that made the pipe
    assert not stop.is_set() and not stop.wait(0.05)
    writer.close()  # what the parent does to stop a loop, and what its death does
    assert stop.wait(5) and stop.is_set()


# ------------------------------------------------------------------ loops under a parent in this process


def test_a_killed_loop_is_restarted_and_shutdown_after_a_dead_child_is_orderly(tmp_path):
    base = status_mod.online_dir(tmp_path / "run")
    loops = LocalLoops(config(restart_backoff_s=0.1), base / status_mod.QUEUE_NAME, base / "versions").start()
    state_dir = base / status_mod.LOOPS_NAME
    try:
        for name in ("judge", "trainer"):
            first = wait_for(lambda n=name: running(state_dir, n, 0), what=f"{name} running")
            os.kill(first, signal.SIGKILL)
            second = wait_for(lambda n=name: running(state_dir, n, 1), what=f"{name} restarted")
            assert second != first and not process_alive(first)
            assert read_status(state_dir)["loops"][name]["last_exit"] == "killed by SIGKILL"
        # `ratchet serve status` shows it, from another process's point of view
        out = CliRunner().invoke(app, ["serve", "status", "--run", str(tmp_path / "run")], env={"COLUMNS": "200"})
        assert out.exit_code == 0, out.output
        line = " ".join(out.output.split())
        assert "judge running" in line and "restarted 1×, last died: killed by SIGKILL" in line
        # A loop killed just before shutdown: stop neither hangs nor needs to terminate the other one.
        loops.supervisor.policy.backoff_s = 60  # it stays dead until stop
        judge = loops.processes["judge"]
        os.kill(judge.pid, signal.SIGKILL)
        wait_for(lambda: not judge.is_alive(), what="judge dead")
    finally:
        codes = loops.stop(timeout_s=30)
    assert codes == {"judge": -signal.SIGKILL, "trainer": 0}  # the trainer stopped on its signal, not killed
    assert not list(state_dir.glob("*.pid"))
    assert {v["state"] for v in read_status(state_dir)["loops"].values()} == {"stopped"}


def test_a_loop_stopped_while_it_starts_exits_promptly_and_cleanly(tmp_path):
    # Its start-up never looks at the stop; the child's start-up guard does.
    cfg = config()
    cfg.trainer_loop = f"{__name__}:slow_start_loop"
    loops = LocalLoops(cfg, tmp_path / "q.sqlite", tmp_path / "versions").start()
    try:
        wait_for(lambda: running(tmp_path / "loops", "trainer", 0), what="trainer running")
        time.sleep(1.0)  # well inside its start-up
    finally:
        started = time.monotonic()
        codes = loops.stop(timeout_s=30)
    assert codes["trainer"] == 0, codes  # not terminated at the deadline (-15)
    assert time.monotonic() - started < 20


def test_a_restarted_loop_finishes_its_orderly_stop(tmp_path):
    # The restart is launched by the watcher thread, the "parent" of the child's parent-death
    # signal: that thread must not end before the child has finished stopping.
    cfg = config(restart_backoff_s=0.05)
    cfg.trainer_loop = f"{__name__}:slow_stop_loop"
    loops = LocalLoops(cfg, tmp_path / "q.sqlite", tmp_path / "versions").start()
    try:
        first = wait_for(lambda: running(tmp_path / "loops", "trainer", 0), what="trainer running")
        os.kill(first, signal.SIGKILL)
        second = wait_for(lambda: running(tmp_path / "loops", "trainer", 1), what="trainer restarted")
        wait_for(lambda: Path(f"{tmp_path / 'q.sqlite'}.{second}.looping").exists(), what="restarted trainer looping")
    finally:
        codes = loops.stop(timeout_s=60)
    assert codes == {"judge": 0, "trainer": 0}


def test_a_loop_that_keeps_dying_is_left_down_and_says_so(tmp_path):
    cfg = config(max_restarts=2, restart_backoff_s=0.05)
    cfg.trainer_loop = f"{__name__}:crashing_loop"
    loops = LocalLoops(cfg, tmp_path / "q.sqlite", tmp_path / "versions").start()
    try:
        st = wait_for(lambda: (read_status(tmp_path / "loops") or {}).get("loops", {}).get("trainer", {}).get("state")
                      == "failed" and read_status(tmp_path / "loops"), 240, what="trainer given up")
        assert st["loops"]["trainer"]["restarts"] == 2 and st["loops"]["trainer"]["last_exit"] == "exit code 1"
        assert st["loops"]["judge"]["state"] == "running"  # the other loop is unaffected
        assert "trainer failed" in status_mod.loops_line(st)
    finally:
        loops.stop(timeout_s=30)


def pidfile_of(path: Path, pid: int, server: int) -> None:
    """A loop pid file as server ``server`` would have written it for its child ``pid``."""
    write_pidfile(path, pid)
    record = json.loads(path.read_text())
    record.update(parent_pid=server, parent_started=None)
    path.write_text(json.dumps(record))


def test_a_stale_loop_of_a_dead_server_is_stopped_and_a_live_one_refused(tmp_path):
    state_dir = tmp_path / "loops"
    state_dir.mkdir()
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    pidfile_of(state_dir / "judge.pid", orphan.pid, server=gone.pid)  # recorded by a server that is gone
    loops = LocalLoops(config(), tmp_path / "q.sqlite", tmp_path / "versions", trainer=False).start()
    try:
        assert orphan.wait(10) == -signal.SIGTERM
        assert running(state_dir, "judge", 0) not in (None, orphan.pid)
    finally:
        loops.stop(timeout_s=30)
    # A loop whose server still runs belongs to that server: starting a second pair is refused.
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        pidfile_of(state_dir / "judge.pid", other.pid, server=owner.pid)
        with pytest.raises(RatchetError, match="still running"):
            LocalLoops(config(), tmp_path / "q.sqlite", tmp_path / "versions", trainer=False).start()
        assert other.poll() is None
    finally:
        for proc in (owner, other):
            proc.kill()
            proc.wait()


# ------------------------------------------------------------------ `ratchet serve` as a process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(tmp_path: Path, run: str) -> tuple[subprocess.Popen, int]:
    """`ratchet serve` over an HTTP backend nobody calls (no model needed), stand-in trainer."""
    port = free_port()
    env = {**os.environ, "RATCHET_RUNS": str(tmp_path), "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
    env.pop("RATCHET_SERVER_KEY", None)
    cmd = [sys.executable, "-m", "ratchet", "serve", "--model", "http://127.0.0.1:9/v1#stub", "--port", str(port),
           "--run", run, "--set", f"trainer_loop={FAKE_TRAINER}", "--set", "judge.poll_s=0.1",
           "--set", "judge.kind=classifier", "--set", "loops.watch_s=0.2", "--set", "loops.restart_backoff_s=2"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    state_dir = status_mod.online_dir(tmp_path / run) / status_mod.LOOPS_NAME

    def up():
        assert proc.poll() is None, proc.communicate()[0]
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
        except httpx.HTTPError:
            return False
        return running(state_dir, "judge", 0) and running(state_dir, "trainer", 0)

    wait_for(up, 120, "ratchet serve up with both loops")
    return proc, port


@pytest.mark.slow
def test_ratchet_serve_restarts_its_loops_and_stops_after_a_dead_child(tmp_path):
    proc, _ = start_serve(tmp_path, "sup")
    state_dir = status_mod.online_dir(tmp_path / "sup") / status_mod.LOOPS_NAME
    try:
        for name in ("judge", "trainer"):
            first = running(state_dir, name, 0)
            os.kill(first, signal.SIGKILL)
            second = wait_for(lambda n=name: running(state_dir, n, 1), 60, f"{name} restarted")
            assert second != first
        pids = [running(state_dir, n, 1) for n in ("judge", "trainer")]
        os.kill(pids[0], signal.SIGKILL)  # dead at shutdown: its restart is 4 s away (backoff doubles)
        wait_for(lambda: not process_alive(pids[0]), 10, "judge dead")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "restarting it in" in out and "killed by SIGKILL" in out
    assert not process_alive(pids[1])
    assert read_status(state_dir)["loops"]["trainer"]["state"] == "stopped"


@pytest.mark.slow
def test_a_sigkilled_server_leaves_no_orphans_and_its_restart_no_stale_pair(tmp_path):
    proc, _ = start_serve(tmp_path, "orph")
    state_dir = status_mod.online_dir(tmp_path / "orph") / status_mod.LOOPS_NAME
    pids = [running(state_dir, n, 0) for n in ("judge", "trainer")]
    proc.kill()
    proc.communicate(timeout=30)
    wait_for(lambda: not any(process_alive(p) for p in pids), 30, "both loops gone after the server's SIGKILL")
    again, _ = start_serve(tmp_path, "orph")
    try:
        new = [running(state_dir, n, 0) for n in ("judge", "trainer")]
        assert set(new).isdisjoint(pids) and not any(process_alive(p) for p in pids)
        children = [int(p) for p in subprocess.run(["pgrep", "-P", str(again.pid)], capture_output=True,
                                                   text=True).stdout.split()]
        # multiprocessing's resource tracker is the one other child (it exits with its parent)
        loops = [p for p in children if b"resource_tracker" not in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert sorted(loops) == sorted(new)  # one pair, the new server's
    finally:
        again.send_signal(signal.SIGINT)
        out, _ = again.communicate(timeout=60)
    assert again.returncode == 0, out
