"""The OpenAI-compatible server over a scripted policy: auth, shapes, streaming, tagging, collection."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ratchet.online.policy import PolicyHost, ScriptedPolicy
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state

KEY = "sk-test-key"
U1 = {"role": "user", "content": "write a sort function"}


@pytest.fixture
def served(tmp_path):
    policy = ScriptedPolicy("def sort(x): return sorted(x)")
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue, api_key=KEY, served_name="ratchet-test")
    with ServerThread(create_app(state)) as server:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
        yield client, state, queue, policy
        client.close()
    state.collector.close()


def post(client, body, **headers):
    return client.post("/v1/chat/completions", json=body, headers=headers)


def test_auth_required_with_openai_shaped_error(served):
    client, *_ = served
    bad = httpx.post(str(client.base_url) + "/v1/chat/completions", json={"messages": [U1]},
                     headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401
    assert bad.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(str(client.base_url) + "/v1/models").status_code == 401


def test_models_lists_the_served_model(served):
    client, *_ = served
    data = client.get("/v1/models").json()
    assert data["object"] == "list" and data["data"][0]["id"] == "ratchet-test"


def test_openai_client_works_unchanged(served):
    openai = pytest.importorskip("openai")
    client, *_ = served
    oc = openai.OpenAI(base_url=str(client.base_url) + "/v1", api_key=KEY)
    out = oc.chat.completions.create(model="ratchet-test", messages=[U1])
    assert out.choices[0].message.content == "def sort(x): return sorted(x)"
    chunks = list(oc.chat.completions.create(model="ratchet-test", messages=[U1], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "def sort(x): return sorted(x)"


def test_non_streaming_shape_and_logprobs(served):
    client, state, queue, policy = served
    r = post(client, {"messages": [U1], "logprobs": True}, **{"X-Session-Id": "s1"})
    assert r.status_code == 200
    data = r.json()
    assert data["object"] == "chat.completion"
    choice = data["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "def sort(x): return sorted(x)"}
    assert [t["logprob"] for t in choice["logprobs"]["content"]] == [-0.25] * 4
    assert data["usage"]["completion_tokens"] == 4
    assert data["ratchet"]["session_id"] == "s1" and len(data["ratchet"]["response_token_ids"]) == 4
    assert r.headers["X-Session-Id"] == "s1"


def test_streaming_sse_chunks(served):
    client, state, queue, _ = served
    with client.stream("POST", "/v1/chat/completions", json={"messages": [U1], "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "def sort(x): return sorted(x)"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    state.collector.flush()
    assert queue.stats()["turns"] == 1  # streamed turns are collected too


def test_collection_and_pairing_through_http(served):
    client, state, queue, _ = served
    r1 = post(client, {"messages": [U1]}, **{"X-Session-Id": "s1"})
    reply = r1.json()["choices"][0]["message"]["content"]
    post(client, {"messages": [U1, {"role": "assistant", "content": reply},
                               {"role": "user", "content": "thanks!"}]}, **{"X-Session-Id": "s1"})
    state.collector.flush()
    work = queue.turns_to_judge(10)
    assert len(work) == 1
    turn, next_state = work[0]
    assert turn.turn_id == r1.json()["ratchet"]["turn_id"]
    assert next_state == "thanks!"
    assert turn.messages == [U1] and turn.response_text == reply
    assert turn.response_logprobs == [-0.25] * 4 and turn.policy_version == 0


def test_stock_client_turns_are_inferred_not_dropped(served):
    client, state, queue, _ = served
    r1 = post(client, {"messages": [U1]})
    reply = r1.json()["choices"][0]["message"]["content"]
    r2 = post(client, {"messages": [U1, {"role": "assistant", "content": reply},
                                    {"role": "user", "content": "no, I meant in place"}]})
    assert r1.json()["ratchet"]["session_inferred"] and r2.json()["ratchet"]["session_inferred"]
    assert r1.json()["ratchet"]["session_id"] == r2.json()["ratchet"]["session_id"]
    state.collector.flush()
    st = queue.stats()
    assert st["main"] == 2 and st["inferred"] == 2 and st["ready"] == 1


def test_session_fields_in_body_are_stripped(served):
    client, state, queue, policy = served
    seen = []
    policy._reply = lambda messages: seen.append(messages) or "ok"
    r = post(client, {"messages": [U1], "session_id": "body-s", "turn_type": "side", "session_done": True})
    assert r.status_code == 200 and r.json()["ratchet"]["session_id"] == "body-s"
    assert r.json()["ratchet"]["turn_type"] == "side"
    assert seen == [[U1]]
    state.collector.flush()
    assert queue.stats()["side"] == 1 and queue.turns_to_judge(5) == []  # side turns are not trained


def test_bad_requests(served):
    client, *_ = served
    assert post(client, {"messages": []}).status_code == 400
    assert post(client, {"messages": [U1], "n": 2}).status_code == 400
    r = client.post("/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()


def test_generation_failure_is_a_500_not_a_crash(served):
    client, state, _, policy = served

    def boom(messages):
        raise RuntimeError("model fell over")

    policy._reply = boom
    r = post(client, {"messages": [U1]})
    assert r.status_code == 500 and r.json()["error"]["code"] == "generation_failed"
    policy._reply = "fine"
    assert post(client, {"messages": [U1]}).status_code == 200


def test_forget_endpoint_drops_session_memory(served):
    client, state, *_ = served
    post(client, {"messages": [U1]}, **{"X-Session-Id": "secret"})
    assert client.delete("/v1/ratchet/sessions/secret").json() == {"forgotten": True}
    assert client.delete("/v1/ratchet/sessions/secret").json() == {"forgotten": False}


def test_no_key_configured_means_open_local_server(tmp_path):
    state = make_state(PolicyHost(lambda a: ScriptedPolicy("hi")), None)
    with ServerThread(create_app(state)) as server:
        assert httpx.post(server.url + "/v1/chat/completions", json={"messages": [U1]}).status_code == 200
    state.collector.close()


def test_an_unknown_path_gets_an_openai_shaped_error(served):
    client, *_ = served
    r = client.get("/v1/no-such-thing")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "unknown_url" and "/v1/no-such-thing" in r.json()["error"]["message"]
    r = client.get("/v1/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_or_failing_backend_is_a_502(tmp_path):
    """Neither the client nor this server is at fault when the backend behind it is down or
    answers 5xx: a gateway's 502, and the server keeps serving."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from ratchet.online.http_policy import HttpPolicy

    backend = FastAPI()

    @backend.post("/v1/chat/completions")
    async def fail():
        return JSONResponse(status_code=503, content={"error": "overloaded"})

    queue = TurnQueue(tmp_path / "q.db")
    with ServerThread(backend) as failing:
        for url in (f"http://127.0.0.1:{_free_port()}/v1", failing.url + "/v1"):
            policy = HttpPolicy(url, "m", timeout_s=5)
            state = make_state(PolicyHost(lambda adapter, p=policy: p), queue, served_name="ratchet-test")
            with ServerThread(create_app(state)) as server:
                r = httpx.post(server.url + "/v1/chat/completions", json={"messages": [U1]}, timeout=30)
                assert r.status_code == 502, r.text
                assert r.json()["error"]["code"] == "backend_failed" and url.rsplit("/v1", 1)[0] in r.json()["error"]["message"]
                assert httpx.get(server.url + "/health", timeout=5).status_code == 200
            state.collector.close()
