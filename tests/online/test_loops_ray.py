"""The same judging and training loops as Ray actors, on a local Ray instance."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'ratchet[ray]')")

from ratchet.online.config import OnlineConfig
from ratchet.online.loops import RayLoops
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Turn


def fake_ray_trainer(config, queue_path, versions_dir, stop_event):
    """Claims judged samples and marks them trained as version 1; returns its pid."""
    queue = TurnQueue(queue_path)
    while not stop_event.is_set():
        batch = queue.take_batch(16, min_version=0)
        if batch:
            queue.mark_trained([s.turn.turn_id for s in batch], 1)
        stop_event.wait(0.05)
    return os.getpid()


@pytest.mark.slow
def test_judge_and_trainer_as_ray_actors(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    for i in range(6):
        queue.add_turn(Turn(f"t{i}", "s", False, "main", [{"role": "user", "content": "q"}], "a", [1], [2],
                            [-0.3], 0))
        queue.set_next_state(f"t{i}", "thanks!" if i % 2 else "no, that's wrong")
    # The actors import this test module by name: put its folder on their path, and keep the
    # driver's own path so that they run the same ratchet as this test (not another install's).
    path = os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        config = OnlineConfig(learn="binary", executor="ray")
        config.judge.poll_s = 0.05
        loops = RayLoops(config, tmp_path / "q.db", tmp_path / "v", trainer_target="test_loops_ray:fake_ray_trainer")
        loops.start()
        pids = loops.pids()
        assert os.getpid() not in pids.values() and len(set(pids.values())) == 2
        deadline = time.time() + 120
        while queue.stats()["trained"] < 6 and time.time() < deadline:
            time.sleep(0.2)
        results = loops.stop(timeout_s=60)
    finally:
        ray.shutdown()
    st = queue.stats()
    assert st["judged"] == 6 and st["positive"] == 3 and st["negative"] == 3 and st["trained"] == 6
    assert results["judge"] == 6 and results["trainer"] == pids["trainer"]
