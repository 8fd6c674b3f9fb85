"""Training claims are leases: a claimer that dies or stops renewing loses its samples to the next
trainer; a live claimer keeps them; a sample that keeps coming back is failed, kept, and reported."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

from trainable import judged_queue

from ratchet.online.claims import Claimer, LeaseKeeper
from ratchet.online.queue import TurnQueue
from ratchet.processes import process_alive, process_start

SRC = Path(__file__).resolve().parents[2] / "src"


def ids(samples) -> list[str]:
    return sorted(s.turn.turn_id for s in samples)


def dead_claimer() -> Claimer:
    """The identity of a process of this host that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    # A start time no process has: even if the pid is reused meanwhile, it is not this claimer.
    return Claimer(host=socket.gethostname(), pid=proc.pid, started="-1", token=uuid.uuid4().hex)


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {src!r})
    from ratchet.online.queue import TurnQueue
    q = TurnQueue({path!r})
    batch = q.take_batch(3, 0, lease_s=3600)
    print("claimed", len(batch), flush=True)
    time.sleep(600)
""")


def test_claims_of_a_sigkilled_process_go_to_the_next_trainer(tmp_path):
    path = tmp_path / "q.db"
    q = judged_queue(path, 3)
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(src=str(SRC), path=str(path))],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().split() == ["claimed", "3"]
        st = q.stats()
        assert st["claimed"] == 3 and st["claimed_lost"] == 0
        assert q.take_batch(3, 0) == []  # a live claimer with an hour-long lease keeps its samples
        os.kill(child.pid, signal.SIGKILL)
        # Not reaped yet: the dead trainer is a zombie, and its claims must not wait for the reaping.
        deadline = time.monotonic() + 10
        while process_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert q.stats()["claimed_lost"] == 3
        taken = q.take_batch(8, 0)
    finally:
        child.kill()
        child.wait()
    assert ids(taken) == ["t0", "t1", "t2"]
    st = q.stats()
    assert st["claimed"] == 3 and st["reclaimed"] == 3 and st["reclaimed_samples"] == 3 and st["failed"] == 0
    assert q.held() == {"t0", "t1", "t2"}  # now this process's claims
    q.mark_trained(["t0", "t1", "t2"], 1)
    assert q.stats()["trained"] == 3 and q.stats()["claimed"] == 0


def test_an_expired_lease_is_reclaimed_with_its_reason(tmp_path):
    q = judged_queue(tmp_path / "q.db", 2)
    slow = Claimer.new()  # alive (this very process), but it stopped renewing
    assert len(q.take_batch(2, 0, claimer=slow, lease_s=0.05)) == 2
    time.sleep(0.1)
    other = Claimer.new()
    assert ids(q.take_batch(2, 0, claimer=other)) == ["t0", "t1"]
    assert q.held(slow) == set() and q.held(other) == {"t0", "t1"}
    reason = q._conn().execute("SELECT reclaim_reason FROM turns WHERE turn_id='t0'").fetchone()[0]
    assert "expired" in reason and str(os.getpid()) in reason
    # The slow claimer cannot hand back what it lost, nor take it from its new holder.
    assert q.release(["t0", "t1"], claimer=slow) == 0
    assert q.held(other) == {"t0", "t1"}


def test_a_live_claimer_is_not_robbed_and_renewal_keeps_its_lease(tmp_path):
    q = judged_queue(tmp_path / "q.db", 2)
    holder, other = Claimer.new(), Claimer.new()
    assert len(q.take_batch(2, 0, claimer=holder, lease_s=0.3)) == 2
    with LeaseKeeper(q, holder, lease_s=0.3):
        end = time.monotonic() + 1.2  # four leases long
        while time.monotonic() < end:
            assert q.take_batch(2, 0, claimer=other) == []
            time.sleep(0.05)
    assert q.held(holder) == {"t0", "t1"}
    st = q.stats()
    assert st["reclaimed"] == 0 and st["claimed"] == 2 and st["claimed_lost"] == 0
    # Without the keeper the lease runs out and the samples move on.
    time.sleep(0.4)
    assert ids(q.take_batch(2, 0, claimer=other)) == ["t0", "t1"]


def test_claims_from_another_host_wait_for_their_deadline(tmp_path):
    q = judged_queue(tmp_path / "q.db", 1)
    remote = Claimer(host="another-node", pid=1, started=None, token=uuid.uuid4().hex)
    assert len(q.take_batch(1, 0, claimer=remote, lease_s=60)) == 1
    assert q.take_batch(1, 0) == []  # its process cannot be checked from here: the lease decides
    q._conn().execute("UPDATE turns SET claim_deadline=? WHERE turn_id='t0'", (time.time() - 1,))
    assert ids(q.take_batch(1, 0)) == ["t0"]


def test_a_reused_pid_does_not_keep_a_dead_claim(tmp_path):
    q = judged_queue(tmp_path / "q.db", 1)
    me = os.getpid()
    assert process_alive(me, process_start(me))
    impostor = Claimer(host=socket.gethostname(), pid=me, started="-1", token=uuid.uuid4().hex)
    assert not process_alive(me, "-1")
    q.take_batch(1, 0, claimer=impostor, lease_s=3600)
    assert ids(q.take_batch(1, 0)) == ["t0"]


def test_a_poison_sample_is_failed_after_max_reclaims_and_kept(tmp_path):
    q = judged_queue(tmp_path / "q.db", 1)
    for _ in range(2):
        assert ids(q.take_batch(4, 0, claimer=dead_claimer(), max_reclaims=3)) == ["t0"]
    # The third claimer dies too: the next take fails the sample instead of handing it out again.
    assert len(q.take_batch(4, 0, claimer=dead_claimer(), max_reclaims=3)) == 1
    assert q.take_batch(4, 0, max_reclaims=3) == []
    st = q.stats()
    assert st["failed"] == 1 and st["reclaimed"] == 3 and st["turns"] == 1 and st["claimed"] == 0
    [(turn_id, reclaims, reason)] = q.failed_samples()
    assert turn_id == "t0" and reclaims == 3
    assert reason.startswith("reclaimed 3 times without being trained") and "is gone" in reason
    # Kept, text and judgement included: nothing is deleted.
    assert q._conn().execute("SELECT COUNT(*) FROM judgements").fetchone()[0] == 1


def test_a_claimer_holds_at_most_one_suspect_sample(tmp_path):
    q = judged_queue(tmp_path / "q.db", 4)
    # t0..t2 crashed two trainers each (suspects); t3 never did.
    for _ in range(2):
        assert len(q.take_batch(3, 0, claimer=dead_claimer())) == 3
        q.reclaim_lost()
    trainer = Claimer.new()
    assert ids(q.take_batch(4, 0, claimer=trainer)) == ["t0", "t3"]
    assert q.take_batch(4, 0, claimer=trainer) == []  # still holds a suspect
    assert ids(q.take_batch(4, 0, claimer=Claimer.new())) == ["t1"]  # another trainer may take one


def test_abandon_counts_a_reclaim_and_release_does_not(tmp_path):
    q = judged_queue(tmp_path / "q.db", 2)
    c = Claimer.new()
    q.take_batch(2, 0, claimer=c)
    assert q.release(["t0"], claimer=c) == 1
    assert q.abandon(["t1"], "training step failed: ValueError: bad tokens", claimer=c, max_reclaims=1) == 1
    st = q.stats()
    assert st["reclaimed"] == 1 and st["failed"] == 1 and st["claimed"] == 0
    reason = "reclaimed 1 times without being trained; last: training step failed: ValueError: bad tokens"
    assert q.failed_samples() == [("t1", 1, reason)]
    assert ids(q.take_batch(2, 0)) == ["t0"]


def test_claims_recorded_before_leases_are_returned(tmp_path):
    """A queue file from before leases, with a sample wedged in 'claimed', heals on the next take."""
    import sqlite3

    path = tmp_path / "q.db"
    judged_queue(path, 1).close()
    db = sqlite3.connect(path)
    with db:  # the old layout: no claim columns, and a claim nobody will ever finish
        for col in ("claim_host", "claim_pid", "claim_started", "claim_token", "claim_deadline", "reclaims",
                    "reclaim_reason", "fail_reason"):
            db.execute(f"ALTER TABLE turns DROP COLUMN {col}")
        db.execute("UPDATE turns SET state='claimed'")
    db.close()
    q = TurnQueue(path)
    assert q.stats()["claimed_lost"] == 1
    assert ids(q.take_batch(1, 0)) == ["t0"]
