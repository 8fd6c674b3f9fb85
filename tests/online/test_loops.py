"""The judging loop, and the judging + training loops as separate processes sharing only files."""

from __future__ import annotations

import threading
import time

from ratchet.online.config import OnlineConfig
from ratchet.online.loops import LocalLoops, run_judge_loop
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Turn


def turn(i: int, version: int = 0) -> Turn:
    return Turn(f"t{i}", f"s{i % 3}", False, "main", [{"role": "user", "content": f"q{i}"}], f"a{i}",
                [1, 2], [3, 4], [-0.5, -0.7], version)


NEXT = ["thanks, perfect", "no, I meant the other one", "what time is it", "great, it works", "try again"]


def fill(queue: TurnQueue, n: int = 5) -> None:
    for i in range(n):
        queue.add_turn(turn(i))
        queue.set_next_state(f"t{i}", NEXT[i % len(NEXT)])


def fake_trainer_loop(config, queue_path, versions_dir, stop_event):
    """Stands in for the torch trainer: claims batches and marks them trained as version 1."""
    queue = TurnQueue(queue_path)
    while not stop_event.is_set():
        batch = queue.take_batch(config.batch_size, min_version=0)
        if batch:
            queue.mark_trained([s.turn.turn_id for s in batch], 1)
        stop_event.wait(0.05)


def test_judge_loop_scores_waiting_turns(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    fill(queue)
    stop = threading.Event()
    config = OnlineConfig(learn="binary", judge={"kind": "classifier"})  # not auto: never the 1.5B here
    config.judge.poll_s = 0.02
    worker = threading.Thread(target=lambda: run_judge_loop(config, tmp_path / "q.db", stop))
    worker.start()
    deadline = time.time() + 10
    while queue.stats()["judged"] < 5 and time.time() < deadline:
        time.sleep(0.02)
    stop.set()
    worker.join(5)
    st = queue.stats()
    assert st["judged"] == 5 and st["positive"] == 2 and st["negative"] == 2 and st["zero"] == 1


def test_judge_loop_survives_a_failing_judge(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    fill(queue, 2)

    class Flaky:
        name = "flaky"
        calls = 0

        def judge(self, t, next_state):
            Flaky.calls += 1
            raise RuntimeError("judge down")

    stop = threading.Event()
    config = OnlineConfig()
    config.judge.poll_s = 0.01
    worker = threading.Thread(target=lambda: run_judge_loop(config, tmp_path / "q.db", stop, judge=Flaky()))
    worker.start()
    time.sleep(0.2)
    stop.set()
    worker.join(5)
    assert not worker.is_alive() and Flaky.calls == 2
    assert queue.stats()["ready"] == 2  # still waiting, leased, not lost


def test_judge_and_trainer_run_as_processes(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    fill(queue, 10)
    config = OnlineConfig(learn="combine", trainer_loop=f"{__name__}:fake_trainer_loop",
                          judge={"kind": "classifier"})  # not auto: never the 1.5B here
    config.judge.poll_s = 0.05
    loops = LocalLoops(config, tmp_path / "q.db", tmp_path / "versions").start()
    try:
        pids = {name: p.pid for name, p in loops.processes.items()}
        assert set(pids) == {"judge", "trainer"} and len(set(pids.values())) == 2
        deadline = time.time() + 90
        while time.time() < deadline:
            st = queue.stats()
            if st["judged"] == 10 and st["trained"] == 8:
                break
            time.sleep(0.1)
        # while the loops run, serving-side writes are never blocked
        queue.add_turn(turn(99))
    finally:
        codes = loops.stop(timeout_s=30)
    st = queue.stats()
    assert st["judged"] == 10 and st["trained"] == 8 and st["excluded"] == 2  # 8 non-zero rewards
    assert codes == {"judge": 0, "trainer": 0}


def test_learn_off_starts_no_trainer(tmp_path):
    loops = LocalLoops(OnlineConfig(learn="off"), tmp_path / "q.db", tmp_path / "v")
    assert set(loops.specs) == {"judge"}
