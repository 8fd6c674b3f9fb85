"""Which conversations the default gate holds out (online/holdout.py, the queue's ``splits``): the
held-out set filled first, one side per conversation, decisions that survive a restart, ``fixed``
as the hash share it always was, and queue files from before there were policies. No model."""

from __future__ import annotations

import sqlite3

import pytest
from test_gate_heldout import sessions

from ratchet.online.holdout import FillFirst, FixedShare, HeldSoFar, policy_from_dict
from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Turn, holds_out


def judge(queue: TurnQueue, turn_id: str, session: str, reward: int = 1, reply: str = "ahoy") -> None:
    queue.add_turn(Turn(turn_id, session, False, "main", [{"role": "user", "content": f"q {turn_id}"}],
                        reply, [1, 2], [3], [-0.5], 0))
    queue.set_next_state(turn_id, "thanks" if reward >= 0 else "No, not like that.")
    queue.add_judgement(Judgement(turn_id, reward, [reward], None, "thanks", "rule"))


def side(queue: TurnQueue, turn_id: str) -> str:
    return queue._conn().execute("SELECT state FROM turns WHERE turn_id=?", (turn_id,)).fetchone()[0]


def recorded(queue: TurnQueue) -> dict[str, tuple[int, int]]:
    rows = queue._conn().execute("SELECT session_id, held, early FROM splits").fetchall()
    return {s: (held, early) for s, held, early in rows}


def test_the_held_out_set_fills_first_then_the_share_holds(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    queue.hold_out(0.2, FillFirst(early_share=0.75, min_turns=5))
    ids = [f"conv-{i}" for i in range(60)]
    for i, s in enumerate(ids):  # one praised turn per conversation, in order
        judge(queue, f"t{i}", s)
    held = [side(queue, f"t{i}") == "heldout" for i in range(len(ids))]
    # While fewer than 5 turns are held out, three of every four new conversations (the first trains):
    # 5 held out of the first 7.
    assert held[:7] == [False, True, True, True, False, True, True]
    # Then the share by the hash, whatever the early count was.
    assert held[7:] == [holds_out(s, 0.2) for s in ids[7:]]
    assert sum(held[:7]) / 7 > 0.7 and sum(held[7:]) / len(ids[7:]) < 0.35
    assert sum(holds_out(s, 0.2) for s in ids[:7]) < 5  # the hash share alone: the gate not engaged yet
    report = queue.holdout()
    assert report["policy"] == {"policy": "fill_first", "early_share": 0.75, "min_turns": 5}
    assert (report["early_sessions"], report["early_turns"], report["turns"]) == (5, 5, sum(held))
    assert report["signed"] == sum(held)
    # Turns judged 0 (no signal) do not fill the set: only praised or corrected ones count.
    other = TurnQueue(tmp_path / "zero.sqlite")
    other.hold_out(0.2, FillFirst())
    for i in range(12):
        judge(other, f"z{i}", f"quiet-{i}", reward=0)
    assert other.holdout()["signed"] == 0 and all(early for _, early in recorded(other).values())


def test_a_conversation_stays_on_the_side_its_first_judgement_put_it(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    queue.hold_out(0.2, FillFirst())
    # first: trains while filling though the hash would hold it out; late: held out while filling
    # though the hash would not.
    first, late = sessions(0.2, True, 1, "first")[0], sessions(0.2, False, 1, "late")[0]
    judge(queue, "f0", first, reward=0)  # its first judgement decides, trainable or not
    assert side(queue, "f0") == "excluded" and recorded(queue)[first] == (0, 1)
    judge(queue, "l0", late)
    for i in range(5):
        judge(queue, f"x{i}", f"filler-{i}")
    assert queue.holdout()["signed"] >= 5  # filled: from now on the share's hash decides new ones
    judge(queue, "f1", first, reward=-1)
    judge(queue, "l1", late, reward=-1)
    assert side(queue, "f1") == "judged" and side(queue, "l1") == "heldout"
    # Feedback replacing a judge's verdict keeps the side.
    assert queue.add_judgement(Judgement("l1", 1, [1], None, "thanks", "feedback", source="feedback"))
    assert side(queue, "l1") == "heldout"
    # No claim takes a held-out turn; the trainer's batches take the first conversation whole.
    taken = queue.take_batch(100)
    assert late not in {s.turn.session_id for s in taken} and {"f1"} <= {s.turn.turn_id for s in taken}
    assert {s.turn.session_id for s in queue.heldout_samples()} >= {late}


def test_a_restart_keeps_every_decision(tmp_path) -> None:
    path = tmp_path / "q.sqlite"
    queue = TurnQueue(path)
    queue.hold_out(0.2, FillFirst())
    ids = [f"conv-{i}" for i in range(12)]
    for i, s in enumerate(ids):
        judge(queue, f"a{i}", s)
    before = recorded(queue)
    sides = [side(queue, f"a{i}") for i in range(12)]
    queue.close()
    # The trainer restarts with another share and policy: nothing decided moves, and the judging
    # process (another queue object) follows what the file says.
    again = TurnQueue(path)
    assert again.hold_out(0.5, FixedShare()) == 0
    for i, s in enumerate(ids):
        judge(again, f"b{i}", s)
    assert recorded(again) == before
    assert [side(again, f"b{i}") for i in range(12)] == sides
    assert sum(side == "heldout" for side in sides) < sum(holds_out(s, 0.5) for s in ids) + 5  # not recomputed


def test_fixed_is_the_hash_share_and_records_nothing(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    ids = [f"conv-{i}" for i in range(40)]
    for i, s in enumerate(ids):
        judge(queue, f"t{i}", s)
    # Judged before the share was set: moved at once, by the hash alone, as before there were policies.
    assert queue.hold_out(0.2, FixedShare()) == sum(holds_out(s, 0.2) for s in ids)
    assert [side(queue, f"t{i}") == "heldout" for i in range(40)] == [holds_out(s, 0.2) for s in ids]
    for i, s in enumerate(ids):
        judge(queue, f"u{i}", s)
    assert [side(queue, f"u{i}") == "heldout" for i in range(40)] == [holds_out(s, 0.2) for s in ids]
    assert recorded(queue) == {} and queue.holdout()["early_turns"] == 0
    # A larger share moves the judged turns it now covers, as it always did.
    moved = queue.hold_out(0.4)
    assert moved == 2 * sum(holds_out(s, 0.4) and not holds_out(s, 0.2) for s in ids) > 0
    assert queue.holdout()["policy"] == {"policy": "fixed"}


def test_turns_judged_before_the_policy_is_set_are_decided_in_the_order_judged(tmp_path) -> None:
    queue = TurnQueue(tmp_path / "q.sqlite")
    ids = [f"conv-{i}" for i in range(8)]
    for i, s in enumerate(ids):
        judge(queue, f"t{i}", s)
    # A trainer claimed conv-0's turn before the share was set; then conv-0 went on.
    assert [s.turn.turn_id for s in queue.take_batch(1)] == ["t0"]
    judge(queue, "t0b", ids[0])
    moved = queue.hold_out(0.2, FillFirst())
    # conv-0 already trains: it stays on that side (and is not counted as an early decision); then
    # while filling conv-1 trains, conv-2..4 are held out, conv-5 trains, conv-6..7 are held out.
    held = [side(queue, f"t{i}") == "heldout" for i in range(1, 8)]
    assert held == [False, True, True, True, False, True, True] and moved == 5
    assert side(queue, "t0") == "claimed" and side(queue, "t0b") == "judged"
    assert recorded(queue)[ids[0]] == (0, 0)


def test_a_queue_file_from_before_hold_out_policies_keeps_working(tmp_path) -> None:
    path = tmp_path / "old.sqlite"
    old = TurnQueue(path)
    old.hold_out(0.2)
    kept, trained = sessions(0.2, True, 1, "kept")[0], sessions(0.2, False, 1, "trained")[0]
    judge(old, "k0", kept)
    judge(old, "r0", trained)
    old.mark_trained([s.turn.turn_id for s in old.take_batch(10)], 1)
    old.close()
    # The file as the previous release wrote it: no table of decisions, no policy.
    db = sqlite3.connect(path)
    db.execute("DROP TABLE splits")
    db.execute("DELETE FROM meta WHERE key='heldout_policy'")
    db.commit()
    db.close()

    queue = TurnQueue(path)
    assert queue.holdout()["policy"] == {"policy": "fixed"} and queue.heldout_share() == pytest.approx(0.2)
    assert [s.turn.turn_id for s in queue.heldout_samples()] == ["k0"]
    queue.hold_out(0.2, FillFirst())  # the trainer of this release starts on it
    judge(queue, "k1", kept)
    judge(queue, "r1", trained)
    # Each old conversation stays where its turns went (kept was the first early decision: by the
    # count it would have trained).
    assert side(queue, "k1") == "heldout" and side(queue, "r1") == "judged"
    assert recorded(queue) == {kept: (1, 0), trained: (0, 0)}
    judge(queue, "n0", "new-0")  # new conversations follow the policy: the first early one trains
    assert side(queue, "n0") == "judged" and recorded(queue)["new-0"] == (0, 1)
    # Forgetting a conversation forgets its decision too.
    queue.delete_session(kept)
    assert kept not in recorded(queue)


def test_policies_round_trip_and_bad_ones_are_refused() -> None:
    for policy in (FixedShare(), FillFirst(0.5, 3)):
        assert policy_from_dict(policy.to_dict()) == policy
    assert policy_from_dict(None) == FixedShare()
    with pytest.raises(ValueError, match="unknown hold-out policy"):
        policy_from_dict({"policy": "random"})
    with pytest.raises(ValueError, match="early held-out share"):
        FillFirst(1.5)
    # Never below the share: an early share under it holds out the share's count while filling.
    low = FillFirst(early_share=0.1)
    assert low.decide("s", 0.5, HeldSoFar(0, 1, 0)).held and not low.decide("s", 0.5, HeldSoFar(0, 2, 1)).held
