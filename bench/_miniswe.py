"""What the benches against mini-swe-agent share: the one ``ratchet serve`` both agents talk to,
mini-swe-agent's run in its own environment (``bench/_miniswe_worker.py`` in ``.venv-bench``), the
task statement both get, and how its rejected replies were wrong. A support module: ``python -m
bench`` does not run it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench._setup import bench_python
from ratchet.runtime.suite import prepare

WORKER = Path(__file__).resolve().parent / "_miniswe_worker.py"


def statement(task) -> str:
    return (f"{task.statement}\nThe repository is your working directory; its tests run with "
            f"`{task.test_command}`.")


def start_server(spec: str, port: int, threads: int, n_ctx: int, store: Path) -> subprocess.Popen:
    # The classifier judge, as these benches were measured with: the default (auto) would load the
    # 1.5B beside the served model wherever it is pulled, changing the timings compared here.
    cmd = [sys.executable, "-m", "ratchet", "serve", "--model", spec, "--learn", "off",
           "--port", str(port), "--set", f"serving_threads={threads}", "--set", f"n_ctx={n_ctx}",
           "--set", "served_name=qwen", "--judge", "classifier"]
    env = {**os.environ, "RATCHET_RUNS": str(store / "serve-runs"), "OMP_NUM_THREADS": str(threads)}
    log = (store / "server.log").open("ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited {proc.returncode}; see {store / 'server.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(1)
    stop_server(proc)
    raise SystemExit("the server did not come up in 180 s")


def stop_server(proc: subprocess.Popen) -> None:
    """TERM (a request in flight gets the server's shutdown grace, 10 s), then KILL after 60 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


def run_miniswe(task, store: Path, api_base: str, step_limit: int, max_tokens: int,
                config: str = "textbased", tool_choice: str = "", parallel_tool_calls: bool = True) -> dict:
    workdir = prepare(task, store / "work" / "miniswe" / task.id)
    trajectory = store / "runs" / "miniswe" / f"{task.id}.traj.json"
    cmd = [str(bench_python()), str(WORKER), "--workdir", str(workdir), "--task", statement(task),
           "--api-base", api_base, "--step-limit", str(step_limit),
           "--max-tokens", str(max_tokens), "--timeout", "30", "--path-prefix", str(Path(sys.executable).parent),
           "--trajectory", str(trajectory), "--config", config, "--tool-choice", tool_choice,
           *([] if parallel_tool_calls else ["--no-parallel-tool-calls"])]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=step_limit * 240, cwd=workdir,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"exit_status": f"error: worker exited {proc.returncode}: {proc.stderr[-300:]}", "steps": 0,
                "prompt_tokens": 0, "completion_tokens": 0, "wall_s": round(wall, 3), "workdir": str(workdir)}
    return {**json.loads(lines[-1]), "workdir": str(workdir)}


def format_errors(trajectory: Path) -> dict | None:
    """How mini-swe-agent's rejected replies were wrong, read from its own trajectory: every reply
    without exactly one action is kept there as a FormatError with the action count and the
    server's finish_reason. Says whether a RepeatedFormatError is the model writing several
    actions, none, or being cut at the reply budget (None when the run left no trajectory)."""
    if not trajectory.exists():
        return None
    try:
        messages = json.loads(trajectory.read_text()).get("messages", [])
    except (OSError, ValueError):
        return None
    counts = {"rejected": 0, "several_actions": 0, "no_action": 0, "cut_at_reply_budget": 0, "other_fence": 0,
              "wrote_observation": 0}
    for message in messages:
        extra = message.get("extra") or {}
        if extra.get("interrupt_type") != "FormatError":
            continue
        counts["rejected"] += 1
        n = extra.get("n_actions", 0)
        counts["several_actions" if n > 1 else "no_action"] += 1
        response = extra.get("response")
        if isinstance(response, dict) and (response.get("choices") or [{}])[0].get("finish_reason") == "length":
            counts["cut_at_reply_budget"] += 1
        # a command fenced as ```bash/```sh instead of the config's ```mswea_bash_command would be a
        # format the model was never asked for, i.e. a configuration mismatch rather than the model
        reply = str(extra.get("model_response") or "")
        if re.search(r"```(?:bash|sh|shell|console)\s*\n", reply):
            counts["other_fence"] += 1
        if "<returncode>" in reply:  # the model wrote a command's result itself instead of a command
            counts["wrote_observation"] += 1
    return counts
