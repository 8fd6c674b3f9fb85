"""The operator's commands around the loops: `serve status`, `serve forget`, and start-up refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ratchet.cli import app
from ratchet.online import status as status_mod
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn

runner = CliRunner()


def make_run(root, name, session="s-private", text="my secret plan", version=0):
    base = status_mod.online_dir(root / name)
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    for i, s in enumerate([session, "other"]):
        tid = f"{name}-{i}"
        queue.add_turn(Turn(tid, s, s != session, "main", [{"role": "user", "content": text}], "ok", [1], [2],
                            [-0.1], version))
        queue.set_next_state(tid, "thanks!")
        queue.add_judgement(Judgement(tid, 1, [1, 1, -1], None, "thanks!", "rule"))
    batch = queue.take_batch(1, 0)
    queue.mark_trained([s.turn.turn_id for s in batch], 1)
    return base


def test_status_reports_per_version_metrics(tmp_path):
    from ratchet.online.versions import VersionStore

    base = make_run(tmp_path, "r1")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    VersionStore(base / status_mod.VERSIONS_NAME).publish(
        adapter, {"loss": 0.25, "kl_to_base": 0.01, "evaluation": {"score": 1.5, "promote": True}}, promote=True)
    st = status_mod.write(tmp_path / "r1", {"requests": 2})
    rows = {r["version"]: r for r in st["versions"]}
    assert rows[0]["turns"] == 2 and rows[0]["judged_fraction"] == 1.0 and rows[0]["reward_mean"] == 1.0
    assert rows[0]["judge_score_mean"] == pytest.approx(1 / 3)
    assert rows[1]["train_loss"] == 0.25 and rows[1]["kl_to_base"] == 0.01 and rows[1]["eval_score"] == 1.5
    assert rows[1]["promoted"] and rows[1]["current"] and st["current_version"] == 1
    assert json.loads((base / status_mod.STATUS_NAME).read_text())["serving"] == {"requests": 2}
    assert (base / status_mod.METRICS_NAME).read_text().count("\n") == 1
    result = runner.invoke(app, ["serve", "status", "--runs-root", str(tmp_path)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "serving v1" in result.output and "0.250" in result.output
    js = runner.invoke(app, ["serve", "status", "--run", "r1", "--runs-root", str(tmp_path), "--json"])
    assert json.loads(js.output)["queue"]["turns"] == 2


def test_status_shows_claimed_and_reclaimed_samples(tmp_path):
    import socket
    import subprocess
    import sys
    import uuid

    from ratchet.online.claims import Claimer

    base = make_run(tmp_path, "r1")  # one sample trained, one judged and waiting
    queue = TurnQueue(base / status_mod.QUEUE_NAME)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert len(queue.take_batch(1, 0, claimer=Claimer(socket.gethostname(), gone.pid, "-1", uuid.uuid4().hex))) == 1
    st = status_mod.collect(tmp_path / "r1")["queue"]
    assert st["claimed"] == 1 and st["claimed_lost"] == 1 and st["reclaimed"] == 0
    result = runner.invoke(app, ["serve", "status", "--runs-root", str(tmp_path)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "1 claimed by the trainer (1 by a trainer that is gone" in " ".join(result.output.split())
    assert len(queue.take_batch(1, 0)) == 1  # a new trainer takes it back
    result = runner.invoke(app, ["serve", "status", "--runs-root", str(tmp_path)], env={"COLUMNS": "120"})
    line = " ".join(result.output.split())
    assert "training claims: 1 claimed by the trainer, 1 reclaimed (1 samples), 0 failed" in line
    js = runner.invoke(app, ["serve", "status", "--run", "r1", "--runs-root", str(tmp_path), "--json"])
    q = json.loads(js.output)["queue"]
    assert (q["claimed"], q["claimed_lost"], q["reclaimed"], q["failed"]) == (1, 0, 1, 0)


def test_forget_deletes_a_session_from_every_run(tmp_path):
    make_run(tmp_path, "r1")
    make_run(tmp_path, "r2")
    result = runner.invoke(app, ["serve", "forget", "s-private", "--runs-root", str(tmp_path)],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "deleted 2 turns" in result.output
    assert "r1 v1" in result.output  # the trained version that used it is named
    for name in ("r1", "r2"):
        q = TurnQueue(status_mod.online_dir(tmp_path / name) / status_mod.QUEUE_NAME)
        assert q.sessions() == [("other", 1)]
        q.close()
        raw = b"".join(p.read_bytes() for p in status_mod.online_dir(tmp_path / name).iterdir() if p.is_file())
        assert b"my secret plan" in raw  # the other session said it too…
    make_run(tmp_path, "r3", text="only-in-private-session")
    q = TurnQueue(status_mod.online_dir(tmp_path / "r3") / status_mod.QUEUE_NAME)
    q.delete_session("other")
    q.close()
    runner.invoke(app, ["serve", "forget", "s-private", "--run", "r3", "--runs-root", str(tmp_path)])
    raw = b"".join(p.read_bytes() for p in status_mod.online_dir(tmp_path / "r3").iterdir() if p.is_file())
    assert b"only-in-private-session" not in raw


def test_status_without_runs_says_how_to_start(tmp_path):
    result = runner.invoke(app, ["serve", "status", "--runs-root", str(tmp_path)])
    assert result.exit_code != 0


def test_serving_beyond_localhost_requires_a_key(tmp_path, monkeypatch):
    from ratchet.cli.serve import run_server
    from ratchet.contracts import RatchetError
    from ratchet.online.config import OnlineConfig

    monkeypatch.delenv("RATCHET_SERVER_KEY", raising=False)
    with pytest.raises(RatchetError, match="without an API key"):
        run_server(OnlineConfig(host="0.0.0.0", runs_root=tmp_path))


def test_config_reads_bare_off_and_fills_the_trainer():
    from ratchet.config import load_config
    from ratchet.online.config import OnlineConfig

    cfg = load_config(OnlineConfig, None, ["learn=off", "model=local:smollm2-135m"])
    assert cfg.learn == "off"
    cfg = load_config(OnlineConfig, None, ["learn=binary", "model=local:smollm2-135m"])
    trainer = cfg.resolved_trainer()
    assert trainer.signal == "rl" and trainer.model == "smollm2-135m"


@pytest.mark.real_model
def test_ratchet_serve_end_to_end_and_graceful_stop(tmp_path):
    """`ratchet serve` as a user runs it: answers, collects, judges, and stops cleanly on Ctrl-C."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    import httpx

    from ratchet.models.registry import cached_path

    if not cached_path("smollm2-135m").is_file():
        pytest.skip("smollm2-135m is not pulled (ratchet models pull smollm2-135m)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RATCHET_RUNS": str(tmp_path), "RATCHET_SERVER_KEY": "k"}
    proc = subprocess.Popen([sys.executable, "-m", "ratchet", "serve", "--model", "local:smollm2-135m", "--learn",
                             "off", "--port", str(port), "--run", "e2e", "--set", "judge.poll_s=0.1",
                             "--set", "judge.kind=classifier"],  # not auto: never the 1.5B beside the 135M
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    headers = {"Authorization": "Bearer k"}
    try:
        deadline = time.time() + 120
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.time() < deadline, "server did not start"
                time.sleep(0.3)
        m = [{"role": "user", "content": "Say hi."}]
        r1 = httpx.post(url, json={"messages": m, "max_tokens": 8}, headers=headers, timeout=60)
        assert r1.status_code == 200
        m += [r1.json()["choices"][0]["message"], {"role": "user", "content": "thanks, perfect"}]
        r2 = httpx.post(url, json={"messages": m, "max_tokens": 8}, headers=headers, timeout=60)
        assert r2.status_code == 200 and r2.json()["ratchet"]["session_inferred"]
        assert httpx.post(url, json={"messages": m}, timeout=10).status_code == 401
        queue = TurnQueue(status_mod.online_dir(tmp_path / "e2e") / status_mod.QUEUE_NAME)
        while queue.stats()["judged"] < 1 and time.time() < deadline:
            time.sleep(0.2)
        assert queue.stats()["positive"] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "session inferred" in out
    assert not (status_mod.online_dir(tmp_path / "e2e") / "server.json").exists()
    assert json.loads((status_mod.online_dir(tmp_path / "e2e") / status_mod.STATUS_NAME).read_text())["queue"]["main"] == 2
