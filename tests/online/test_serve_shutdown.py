"""SIGTERM to `ratchet serve` while a request is in flight: it finishes or is cancelled within the
grace period, the judging and training processes are stopped, and the server exits cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ratchet.online import status as status_mod

STUB = Path(__file__).with_name("serve_stub.py")
SRC = Path(__file__).resolve().parents[2] / "src"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_members(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the server was started as its leader)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


def ask(url: str, box: dict) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5000}).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            box["status"], box["body"] = resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        box["status"], box["body"] = exc.code, json.loads(exc.read())


@pytest.mark.parametrize("grace, words, finishes", [(1.0, 4000, False), (60.0, 40, True)],
                         ids=["cancelled-after-the-grace-period", "finished-within-it"])
def test_sigterm_mid_request_exits_in_bounded_time_with_its_children_stopped(tmp_path, grace, words, finishes):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    log = (tmp_path / "serve.log").open("w")
    # 4000 words at 0.05 s each: a reply that would hold the server for over three minutes.
    proc = subprocess.Popen([sys.executable, str(STUB), str(tmp_path), str(port), str(grace), str(words), "0.05"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2).close()
                break
            except OSError:
                time.sleep(0.3)
        loops = status_mod.online_dir(tmp_path / "r") / status_mod.LOOPS_NAME / "loops.json"
        children = {name: info["pid"] for name, info in json.loads(loops.read_text())["loops"].items()}
        assert set(children) == {"judge", "trainer"}
        box: dict = {}
        client = threading.Thread(target=ask, args=(url, box), daemon=True)
        client.start()
        while json.loads(urllib.request.urlopen(f"{url}/health", timeout=5).read())["requests"] < 1:
            time.sleep(0.1)
        time.sleep(0.5)  # the generation is under way
        assert all(pid in session_members(proc.pid) for pid in children.values())
        stopped_at = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=grace + 60)
        took = time.monotonic() - stopped_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = (tmp_path / "serve.log").read_text()
    assert code == 0, output[-3000:]
    # Stopping the loops and exiting take seconds on a busy machine; the bound leaves room for that.
    assert took < (45 if finishes else grace + 45), f"exit took {took:.1f} s"
    client.join(timeout=10)
    if finishes:
        assert box["status"] == 200 and box["body"]["choices"][0]["message"]["content"].count("word") == words
    else:
        assert box["status"] == 503 and box["body"]["error"]["code"] == "shutting_down"
        assert took < 100  # the whole reply would have taken 200 s
    assert "stopping: serving, collection, judging, training" in output  # the orderly path, not the default action
    deadline = time.monotonic() + 10  # the resource tracker leaves when its pipe closes
    while session_members(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_members(proc.pid) == [], "processes of the server outlived it"
    assert all(not Path(f"/proc/{pid}").exists() for pid in children.values())
    assert not (status_mod.online_dir(tmp_path / "r") / "server.json").exists()
