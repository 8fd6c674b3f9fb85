"""The training loop's claims: a trainer SIGKILLed mid-step hands its batch to the next trainer, a
long step keeps its lease, and a sample that breaks every step is failed while its batch-mates train.

The loop is the real ``run_trainer_loop``; the trainer in it is a stub (no torch, no model)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError
from trainable import judged_queue

from ratchet.online.batching import Usable
from ratchet.online.claims import Claimer
from ratchet.online.queue import TurnQueue
from ratchet.online.trainer_config import TrainerConfig
from ratchet.online.trainer_loop import _still_held, run_trainer_loop

SRC = Path(__file__).resolve().parents[2] / "src"


def config(**overrides) -> TrainerConfig:
    # The trainers here are stubs with no policy to gate: the built-in gate is off.
    settings = {"batch_size": 3, "min_batch": 1, "max_wait_s": 0.0, "poll_interval_s": 0.02, "convert_gguf": False,
                "kl_samples": 0, "gate": {"builtin": False}}
    settings.update(overrides)
    return TrainerConfig(**settings)


class RecordingTrainer:
    """Records each batch; makes no update (the loop then marks the batch trained at its version)."""

    version = 0
    usable = staticmethod(Usable.every)  # it drops nothing

    def __init__(self, seconds: float = 0.0, poison: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.seconds = seconds
        self.poison = poison
        self.in_step = threading.Event()

    def step(self, batch):
        self.in_step.set()
        ids = [s.turn.turn_id for s in batch]
        if self.poison in ids:
            raise ValueError(f"cannot tokenize {self.poison}")
        time.sleep(self.seconds)
        self.batches.append(ids)
        return {"updated": False}


def run_until(q: TurnQueue, trainer, cfg: TrainerConfig, tmp_path: Path, done, timeout: float = 30.0):
    stop = threading.Event()
    errors: list[Exception] = []

    def target():
        try:
            run_trainer_loop(cfg, q.path, tmp_path / "versions", stop, trainer=trainer)
        except Exception as exc:  # noqa: BLE001 - surfaced to the test below
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not done() and not errors and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    thread.join(30)
    assert not thread.is_alive()
    return errors


CHILD = textwrap.dedent("""
    import sys, threading, time
    from pathlib import Path
    sys.path.insert(0, {src!r})
    from ratchet.online.batching import Usable
    from ratchet.online.trainer_config import TrainerConfig
    from ratchet.online.trainer_loop import run_trainer_loop

    class StuckTrainer:  # is SIGKILLed in the middle of this step
        version = 0
        usable = staticmethod(Usable.every)
        def step(self, batch):
            Path({marker!r}).write_text(" ".join(s.turn.turn_id for s in batch))
            time.sleep(600)

    config = TrainerConfig(batch_size=3, min_batch=3, poll_interval_s=0.02, convert_gguf=False, kl_samples=0,
                           claim_lease_s=3600, gate={{"builtin": False}})
    run_trainer_loop(config, {queue!r}, {versions!r}, threading.Event(), trainer=StuckTrainer())
""")


def test_a_trainer_sigkilled_mid_step_hands_its_batch_to_the_next_trainer(tmp_path):
    q = judged_queue(tmp_path / "q.db", 3)
    marker = tmp_path / "in-step"
    script = CHILD.format(src=str(SRC), marker=str(marker), queue=str(q.path), versions=str(tmp_path / "versions"))
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), f"the trainer never reached its step (exit code {child.poll()})"
        assert sorted(marker.read_text().split()) == ["t0", "t1", "t2"]
        st = q.stats()
        assert st["claimed"] == 3 and st["claimed_lost"] == 0
        assert q.take_batch(3, 0) == []  # mid-step and alive: its claims hold
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert q.stats()["claimed_lost"] == 3
    trainer = RecordingTrainer()
    errors = run_until(q, trainer, config(), tmp_path, lambda: q.stats()["trained"] == 3)
    assert errors == []
    assert [sorted(b) for b in trainer.batches] == [["t0", "t1", "t2"]]
    st = q.stats()
    assert st["trained"] == 3 and st["claimed"] == 0 and st["reclaimed"] == 3 and st["failed"] == 0


def test_a_step_longer_than_the_lease_keeps_its_claims(tmp_path):
    q = judged_queue(tmp_path / "q.db", 3)
    trainer = RecordingTrainer(seconds=1.5)  # five leases long
    rival = Claimer.new()
    stolen: list[str] = []

    attempts = 0

    def rival_tries():
        nonlocal attempts
        trainer.in_step.wait(30)
        while not q.stats()["trained"] and len(stolen) == 0:
            stolen.extend(s.turn.turn_id for s in q.take_batch(3, 0, claimer=rival))
            attempts += 1
            time.sleep(0.05)

    thread = threading.Thread(target=rival_tries, daemon=True)
    thread.start()
    errors = run_until(q, trainer, config(claim_lease_s=0.3), tmp_path, lambda: q.stats()["trained"] == 3)
    thread.join(10)
    assert errors == [] and stolen == [] and attempts >= 5
    assert [sorted(b) for b in trainer.batches] == [["t0", "t1", "t2"]]
    assert q.stats()["reclaimed"] == 0


def test_a_poison_sample_is_failed_and_its_batch_mates_are_trained(tmp_path):
    q = judged_queue(tmp_path / "q.db", 4)  # t0 breaks every step it is in
    cfg = config(batch_size=2, max_reclaims=3)
    crashes = 0
    for _ in range(5):
        trainer = RecordingTrainer(poison="t0")
        errors = run_until(q, trainer, cfg, tmp_path, lambda: q.stats()["trained"] == 3)
        if not errors:
            break
        # The loop still crashes on a failing step (a supervisor restarts it), but gives its batch back.
        assert isinstance(errors[0], ValueError) and q.stats()["claimed"] == 0
        crashes += 1
    assert crashes == 3
    st = q.stats()
    assert st["trained"] == 3 and st["failed"] == 1 and st["claimed"] == 0
    [(turn_id, reclaims, reason)] = q.failed_samples()
    assert turn_id == "t0" and reclaims == 3
    assert reason == ("reclaimed 3 times without being trained; last: training step failed: ValueError: "
                      "cannot tokenize t0")


def test_claims_lost_while_waiting_are_not_trained(tmp_path):
    q = judged_queue(tmp_path / "q.db", 2)
    mine = Claimer.new()
    pending = q.take_batch(1, 0, claimer=mine, lease_s=0.05) + q.take_batch(1, 0, claimer=mine, lease_s=60)
    time.sleep(0.1)
    assert len(q.take_batch(1, 0, claimer=Claimer.new())) == 1  # t0 went to another trainer
    assert [s.turn.turn_id for s in _still_held(q, mine, pending)] == ["t1"]


@pytest.mark.parametrize("field,value", [("claim_lease_s", 0), ("max_reclaims", 0)])
def test_claim_settings_are_validated(field, value):
    with pytest.raises(ValidationError):
        TrainerConfig(**{field: value})


def test_the_loop_assesses_each_claimed_sample_once_per_poll(tmp_path):
    # What the trainer's version and lineage make of a sample cannot change within one poll, so
    # the samples claimed are assessed when they arrive and not again before the step.
    class AssessingTrainer(RecordingTrainer):
        def __init__(self) -> None:
            super().__init__()
            self.assessed: list[str] = []

        def usable(self, samples):
            self.assessed.extend(s.turn.turn_id for s in samples)
            return Usable.every(samples)

    q = judged_queue(tmp_path / "q.db", 3)
    trainer = AssessingTrainer()
    errors = run_until(q, trainer, config(batch_size=3, min_batch=3), tmp_path, lambda: q.stats()["trained"] == 3)
    assert errors == []
    assert [sorted(b) for b in trainer.batches] == [["t0", "t1", "t2"]]
    assert sorted(trainer.assessed) == ["t0", "t1", "t2"]
