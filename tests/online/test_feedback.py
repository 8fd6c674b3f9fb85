"""``POST /v1/feedback``: a reply's id as the receipt, a score as the reward, a text as the next
state the judge reads (or the hint beside a score), one feedback per reply, clear 4xx otherwise."""

from __future__ import annotations

import json
import sqlite3

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ratchet.online.judge import RuleJudge
from ratchet.online.policy import PolicyHost, ScriptedPolicy
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state

KEY = "sk-test"
U1 = {"role": "user", "content": "write a sort function"}


@pytest.fixture
def served(tmp_path):
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: ScriptedPolicy("sorted(x)")), queue, api_key=KEY)
    with ServerThread(create_app(state)) as server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        yield client, state, queue
        client.close()
    state.collector.close()


def reply(client, session="s", turn_type="main"):
    r = client.post("/v1/chat/completions", json={"messages": [U1]},
                    headers={"X-Session-Id": session, "X-Turn-Type": turn_type})
    assert r.status_code == 200
    return r.json()["id"]


def judgement(queue, turn_id):
    row = sqlite3.connect(queue.path).execute("SELECT data FROM judgements WHERE turn_id=?", (turn_id,)).fetchone()
    return json.loads(row[0]) if row else None


def state_of(queue, turn_id):
    return sqlite3.connect(queue.path).execute("SELECT state FROM turns WHERE turn_id=?", (turn_id,)).fetchone()[0]


def test_a_score_is_the_reward_of_a_judged_turn(served):
    client, state, queue = served
    rid = reply(client)
    r = client.post("/v1/feedback", json={"id": rid, "score": 1})
    assert r.status_code == 200, r.text
    assert r.json() == {"id": rid, "turn_id": rid.removeprefix("chatcmpl-"), "recorded": "reward", "reward": 1,
                        "hint": None}
    state.collector.flush()
    turn_id = rid.removeprefix("chatcmpl-")
    j = judgement(queue, turn_id)
    assert j["reward"] == 1 and j["judge"] == "feedback" and j["hint"] is None
    assert state_of(queue, turn_id) == "judged"
    assert len(queue.take_batch(10)) == 1  # the trainer reads it like any judged turn


@pytest.mark.parametrize("score, reward", [(-1, -1), (-0.4, -1), (0.3, 1), (0.0, 0)])
def test_a_fractional_score_gives_its_sign_and_a_text_beside_it_is_the_hint(served, score, reward):
    client, state, queue = served
    rid = reply(client)
    r = client.post("/v1/feedback", json={"id": rid, "score": score, "text": "Shorter, one sentence please."})
    assert r.status_code == 200 and r.json()["reward"] == reward
    state.collector.flush()
    j = judgement(queue, rid.removeprefix("chatcmpl-"))
    assert j["reward"] == reward and j["hint"] == "Shorter, one sentence please."
    # A zero score with a hint is still trainable (distillation); it is never excluded silently.
    assert state_of(queue, rid.removeprefix("chatcmpl-")) == "judged"


def test_a_text_alone_is_the_next_state_the_judge_reads(served):
    client, state, queue = served
    rid = reply(client)
    r = client.post("/v1/feedback", json={"id": rid, "text": "No, that is wrong. Use a merge sort."})
    assert r.status_code == 200 and r.json()["recorded"] == "next_state"
    ((turn, next_state),) = queue.turns_to_judge(10)
    assert turn.turn_id == rid.removeprefix("chatcmpl-") and next_state.startswith("No, that is wrong")
    assert RuleJudge().judge(turn, next_state).reward == -1
    # The user's next message no longer replaces it: the explicit feedback was first.
    client.post("/v1/chat/completions", json={"messages": [U1, {"role": "assistant", "content": "sorted(x)"},
                                                            {"role": "user", "content": "thanks!"}]},
                headers={"X-Session-Id": "s"})
    state.collector.flush()
    row = sqlite3.connect(queue.path).execute("SELECT next_state FROM turns WHERE turn_id=?",
                                              (turn.turn_id,)).fetchone()
    assert row[0].startswith("No, that is wrong")


def test_feedback_twice_for_one_reply_is_a_409(served):
    client, state, queue = served
    rid = reply(client)
    assert client.post("/v1/feedback", json={"id": rid, "score": -1}).status_code == 200
    again = client.post("/v1/feedback", json={"id": rid, "score": 1})
    assert again.status_code == 409 and again.json()["error"]["code"] == "feedback_exists"
    state.collector.flush()
    assert judgement(queue, rid.removeprefix("chatcmpl-"))["reward"] == -1  # the first one stands


def test_a_text_after_the_conversation_went_on_is_a_409_but_a_score_still_counts(served):
    client, state, queue = served
    rid = reply(client)
    client.post("/v1/chat/completions", json={"messages": [U1, {"role": "assistant", "content": "sorted(x)"},
                                                            {"role": "user", "content": "and in reverse?"}]},
                headers={"X-Session-Id": "s"})
    late = client.post("/v1/feedback", json={"id": rid, "text": "bad"})
    assert late.status_code == 409 and late.json()["error"]["code"] == "already_followed"
    assert client.post("/v1/feedback", json={"id": rid, "score": -1}).status_code == 200
    state.collector.flush()
    assert judgement(queue, rid.removeprefix("chatcmpl-"))["reward"] == -1


def test_the_bare_turn_id_is_a_receipt_too(served):
    client, _, _ = served
    rid = reply(client)
    assert client.post("/v1/feedback", json={"id": rid.removeprefix("chatcmpl-"), "score": 1}).status_code == 200


def test_unknown_ids_side_turns_and_no_learning(served, tmp_path):
    client, _, _ = served
    r = client.post("/v1/feedback", json={"id": "chatcmpl-nope", "score": 1})
    assert r.status_code == 404 and r.json()["error"]["param"] == "id"
    side = reply(client, turn_type="side")
    r = client.post("/v1/feedback", json={"id": side, "score": 1})
    assert r.status_code == 409 and r.json()["error"]["code"] == "side_turn"
    state = make_state(PolicyHost(lambda adapter: ScriptedPolicy("x")), None, learn=False)
    with ServerThread(create_app(state)) as server:
        rid = httpx.post(server.url + "/v1/chat/completions", json={"messages": [U1]}).json()["id"]
        r = httpx.post(server.url + "/v1/feedback", json={"id": rid, "score": 1})
    state.collector.close()
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_learning"


@pytest.mark.parametrize("body, param", [
    ({"id": "x"}, ""),
    ({"id": "x", "text": "   "}, ""),
    ({"id": "x", "score": 2}, "score"),
    ({"id": "x", "score": "1"}, "score"),
    ({"id": "x", "score": True}, "score"),
    ({"score": 1}, "id"),
    ({"id": "x", "scroe": 1}, "scroe"),
    ({"id": 5, "score": 1}, "id"),
])
def test_a_bad_body_is_a_400_naming_the_field(served, body, param):
    client, _, _ = served
    r = client.post("/v1/feedback", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["message"]


def test_feedback_needs_the_key_and_json(served):
    client, _, _ = served
    assert httpx.post(str(client.base_url) + "/v1/feedback", json={"id": "x", "score": 1}).status_code == 401
    r = client.post("/v1/feedback", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


# ------------------------------------------------------------------ explicit feedback wins


def test_feedback_that_arrives_while_the_judge_holds_the_turn_is_not_overwritten_by_it(served):
    client, state, queue = served
    rid = reply(client)
    turn_id = rid.removeprefix("chatcmpl-")
    client.post("/v1/chat/completions", json={"messages": [U1, {"role": "assistant", "content": "sorted(x)"},
                                                            {"role": "user", "content": "thanks, perfect!"}]},
                headers={"X-Session-Id": "s"})
    state.collector.flush()
    ((turn, next_state),) = queue.turns_to_judge(10)  # the judging loop took the turn
    late_verdict = RuleJudge().judge(turn, next_state)
    assert late_verdict.reward == 1 and late_verdict.source == "judge"
    r = client.post("/v1/feedback", json={"id": rid, "score": -1, "text": "It must sort in place."})
    assert r.status_code == 200, r.text
    state.collector.flush()
    assert queue.add_judgement(late_verdict) is False  # the judge writes after the feedback: dropped
    j = judgement(queue, turn_id)
    assert j["reward"] == -1 and j["source"] == "feedback" and j["hint"] == "It must sort in place."
    (sample,) = queue.take_batch(10)
    assert sample.judgement.reward == -1 and sample.judgement.source == "feedback"


def test_feedback_after_the_judge_replaces_its_verdict_and_the_turns_state(served):
    client, state, queue = served
    rid = reply(client)
    turn_id = rid.removeprefix("chatcmpl-")
    client.post("/v1/chat/completions", json={"messages": [U1, {"role": "assistant", "content": "sorted(x)"},
                                                            {"role": "user", "content": "ok"}]},
                headers={"X-Session-Id": "s"})
    state.collector.flush()
    ((turn, _),) = queue.turns_to_judge(10)
    from ratchet.online.records import Judgement
    assert queue.add_judgement(Judgement(turn.turn_id, 0, [0], None, "ok", "rule")) is True
    assert state_of(queue, turn_id) == "excluded"  # nothing to learn from the judge's verdict
    assert client.post("/v1/feedback", json={"id": rid, "score": 1}).status_code == 200
    state.collector.flush()
    assert judgement(queue, turn_id)["reward"] == 1 and state_of(queue, turn_id) == "judged"


# ------------------------------------------------------------------ receipts across a restart


def serve_on(queue_path):
    state = make_state(PolicyHost(lambda adapter: ScriptedPolicy("sorted(x)")), TurnQueue(queue_path), api_key=KEY)
    return state, ServerThread(create_app(state))


def test_receipts_survive_a_restart_on_the_same_queue(tmp_path):
    path = tmp_path / "q.db"
    state, server = serve_on(path)
    with server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        later, given, side = reply(client, "a"), reply(client, "b"), reply(client, "c", turn_type="side")
        assert client.post("/v1/feedback", json={"id": given, "score": 1}).status_code == 200
        client.close()
    state.collector.close()

    state, server = serve_on(path)  # a new process on the same queue file: nothing in memory
    with server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        r = client.post("/v1/feedback", json={"id": later, "score": -1})
        assert r.status_code == 200, r.text
        again = client.post("/v1/feedback", json={"id": later, "score": 1})
        assert again.status_code == 409 and again.json()["error"]["code"] == "feedback_exists"
        before = client.post("/v1/feedback", json={"id": given, "score": -1})
        assert before.status_code == 409 and before.json()["error"]["code"] == "feedback_exists"
        r = client.post("/v1/feedback", json={"id": side, "score": 1})
        assert r.status_code == 409 and r.json()["error"]["code"] == "side_turn"
        assert client.post("/v1/feedback", json={"id": "chatcmpl-nope", "score": 1}).status_code == 404
        client.close()
    state.collector.close()
    queue = TurnQueue(path)
    assert judgement(queue, later.removeprefix("chatcmpl-"))["reward"] == -1
    assert judgement(queue, given.removeprefix("chatcmpl-"))["reward"] == 1


def test_receipts_beyond_the_ones_in_memory_are_read_from_the_queue(tmp_path):
    from ratchet.online.feedback import Receipts

    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: ScriptedPolicy("sorted(x)")), queue, api_key=KEY,
                       receipts=Receipts(max_receipts=1, lookup=queue.feedback_receipt))
    with ServerThread(create_app(state)) as server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        old, _new = reply(client, "a"), reply(client, "b")
        state.collector.flush()
        assert client.post("/v1/feedback", json={"id": old, "score": 1}).status_code == 200
        client.close()
    state.collector.close()
