"""The shared on-disk queue: pairing, judging claims, staleness drops, stats and deletion."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp

import pytest

from ratchet.online.queue import TurnQueue
from ratchet.online.records import Judgement, Sample, Turn


def make_turn(turn_id: str, session: str = "s1", version: int = 0, turn_type: str = "main", inferred=False) -> Turn:
    return Turn(
        turn_id=turn_id, session_id=session, session_inferred=inferred, turn_type=turn_type,
        messages=[{"role": "user", "content": f"question {turn_id}"}], response_text=f"answer {turn_id}",
        prompt_token_ids=[1, 2, 3], response_token_ids=[4, 5], response_logprobs=[-0.1, -0.2],
        policy_version=version,
    )


def test_records_round_trip_json():
    import json

    t = make_turn("a")
    j = Judgement("a", -1, [-1, -1, 1], "say hello first", "no, greet me", "rule")
    s = Sample(t, j)
    assert Sample.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(ValueError):
        Turn("x", "s", False, "main", [], "", [], [1, 2], [-0.1], 0)
    with pytest.raises(ValueError):
        Judgement("x", 2, [], None, "", "rule")


def test_lifecycle_and_stats(tmp_path):
    q = TurnQueue(tmp_path / "q.db")
    q.add_turn(make_turn("a"))
    q.add_turn(make_turn("b", inferred=True))
    q.add_turn(make_turn("side", turn_type="side"))
    assert q.turns_to_judge(10) == []  # nothing has a next state yet
    assert q.set_next_state("a", "thanks!")
    assert not q.set_next_state("a", "again")  # only once
    assert not q.set_next_state("side", "x")  # side turns are never judged
    taken = q.turns_to_judge(10)
    assert [(t.turn_id, ns) for t, ns in taken] == [("a", "thanks!")]
    assert q.turns_to_judge(10) == []  # leased to the first judge
    q.add_judgement(Judgement("a", 1, [1, 1, 0], None, "thanks!", "rule"))
    q.set_next_state("b", "hmm")
    q.add_judgement(Judgement("b", 0, [1, -1], None, "hmm", "rule"))  # tie, no hint: excluded
    batch = q.take_batch(16, min_version=0)
    assert [s.turn.turn_id for s in batch] == ["a"]
    assert batch[0].judgement.reward == 1
    assert q.take_batch(16, 0) == []  # claimed once
    q.mark_trained(["a"], 1)
    st = q.stats()
    assert st["turns"] == 3 and st["main"] == 2 and st["side"] == 1 and st["inferred"] == 1
    assert st["judged"] == 2 and st["positive"] == 1 and st["zero"] == 1 and st["trained"] == 1
    assert st["excluded"] == 1


def test_hint_only_judgement_is_trainable(tmp_path):
    q = TurnQueue(tmp_path / "q.db")
    q.add_turn(make_turn("a"))
    q.set_next_state("a", "use tabs")
    q.add_judgement(Judgement("a", 0, [1], "The user wants tabs.", "use tabs", "llm"))
    assert [s.judgement.hint for s in q.take_batch(4, 0)] == ["The user wants tabs."]


def test_stale_samples_are_dropped_and_counted(tmp_path):
    q = TurnQueue(tmp_path / "q.db")
    for i, version in enumerate([0, 1, 3, 4]):
        q.add_turn(make_turn(f"t{i}", version=version))
        q.set_next_state(f"t{i}", "thanks")
        q.add_judgement(Judgement(f"t{i}", 1, [1], None, "thanks", "rule"))
    batch = q.take_batch(16, min_version=3)
    assert sorted(s.turn.policy_version for s in batch) == [3, 4]
    assert q.stats()["dropped_stale"] == 2


def test_release_returns_claims(tmp_path):
    q = TurnQueue(tmp_path / "q.db")
    q.add_turn(make_turn("a"))
    q.set_next_state("a", "thanks")
    q.add_judgement(Judgement("a", 1, [1], None, "thanks", "rule"))
    assert len(q.take_batch(4, 0)) == 1
    q.release(["a"])
    assert len(q.take_batch(4, 0)) == 1


def test_delete_session_removes_text_from_file(tmp_path):
    path = tmp_path / "q.db"
    q = TurnQueue(path)
    secret = "my-very-private-sentence-42"
    t = make_turn("a", session="private")
    t = Turn(**{**t.__dict__, "messages": [{"role": "user", "content": secret}]})
    q.add_turn(t)
    q.add_turn(make_turn("b", session="other"))
    q.set_next_state("a", secret)
    q.add_judgement(Judgement("a", 1, [1], None, secret, "rule"))
    assert q.delete_session("private") == 1
    assert q.sessions() == [("other", 1)]
    q.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert secret.encode() not in raw


def _writer(path: str, prefix: str, n: int) -> None:
    q = TurnQueue(path)
    for i in range(n):
        q.add_turn(make_turn(f"{prefix}{i}", session=prefix))


def test_concurrent_processes_share_the_queue(tmp_path):
    path = str(tmp_path / "q.db")
    TurnQueue(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, p, 30)) for p in ("x", "y")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert TurnQueue(path).stats()["turns"] == 60


def test_a_queue_file_from_before_finish_reasons_and_judgement_priorities_still_loads(tmp_path):
    import json
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE turns (turn_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, turn_type TEXT NOT NULL,"
        " inferred INTEGER NOT NULL, policy_version INTEGER NOT NULL, created_at REAL NOT NULL, state TEXT NOT NULL,"
        " data TEXT NOT NULL, next_state TEXT, judge_lease REAL, trained_version INTEGER);"
        "CREATE TABLE judgements (turn_id TEXT PRIMARY KEY, reward INTEGER NOT NULL, has_hint INTEGER NOT NULL,"
        " data TEXT NOT NULL, created_at REAL NOT NULL);")
    for turn_id, judge in (("fb", "feedback"), ("rl", "rule")):
        data = make_turn(turn_id).to_dict()
        del data["finish_reason"], data["tools"]  # rows written before turns recorded them
        verdict = Judgement(turn_id, -1, [-1], None, "no", judge).to_dict()
        del verdict["source"]
        old.execute("INSERT INTO turns VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (turn_id, "s1", "main", 0, 0, 1.0, "judged", json.dumps(data), "no", None, None))
        old.execute("INSERT INTO judgements VALUES (?,?,?,?,?)", (turn_id, -1, 0, json.dumps(verdict), 1.0))
    old.commit()
    old.close()

    q = TurnQueue(path)
    assert q.feedback_receipt("fb") == ("main", True) and q.feedback_receipt("rl") == ("main", False)
    assert q.feedback_receipt("nope") is None
    # The old feedback stays; the old judge verdict may still be replaced.
    assert q.add_judgement(Judgement("fb", 1, [1], None, "yes", "rule")) is False
    assert q.add_judgement(Judgement("rl", 1, [1], None, "yes", "rule")) is True
    samples = {s.turn.turn_id: s for s in q.take_batch(10)}
    assert samples["fb"].judgement.reward == -1 and samples["fb"].judgement.source == "feedback"
    assert samples["rl"].judgement.reward == 1 and samples["rl"].judgement.source == "judge"
    assert samples["fb"].turn.finish_reason is None and samples["fb"].turn.tools == []
    assert not samples["fb"].turn.ended


def test_turns_keep_why_generation_stopped_and_the_tools_offered():
    import json

    tools = [{"type": "function", "function": {"name": "ls", "description": "", "parameters": {"type": "object"}}}]
    t = dataclasses.replace(make_turn("a"), finish_reason="tool_calls", tools=tools)
    back = Turn.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back == t and back.ended and back.tools == tools
    assert dataclasses.replace(t, finish_reason="stop").ended
    assert not dataclasses.replace(t, finish_reason="length").ended
    with pytest.raises(ValueError, match="finish_reason"):
        dataclasses.replace(t, finish_reason="cancelled")
    with pytest.raises(ValueError, match="source"):
        Judgement("a", 1, [1], None, "", "rule", source="user")
