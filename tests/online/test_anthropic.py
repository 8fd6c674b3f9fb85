"""``POST /v1/messages`` (Anthropic's Messages API) over a scripted policy: reply and stream
shapes, tool_use / tool_result blocks on the same turn path, and Anthropic-shaped 4xx errors."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ratchet.online.judge import RuleJudge
from ratchet.online.policy import PolicyHost, ScriptedPolicy
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state

KEY = "sk-ant-test"
MODEL = "ratchet-test"
WEATHER = {"name": "get_weather", "description": "The weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
U1 = {"role": "user", "content": "What is the weather in Paris?"}


def script(messages):
    last = messages[-1]
    if last["role"] == "tool":
        return f"It is {last['content']}."
    if "weather" in str(last.get("content")):
        return CALL
    return "Hello there, friend."


@pytest.fixture
def served(tmp_path):
    policy = ScriptedPolicy(script)
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue, api_key=KEY, served_name=MODEL)
    with ServerThread(create_app(state)) as server:
        client = httpx.Client(base_url=server.url, headers={"x-api-key": KEY, "anthropic-version": "2023-06-01"},
                              timeout=30)
        yield client, state, queue, policy
        client.close()
    state.collector.close()


def send(client, **body):
    return client.post("/v1/messages", json={"model": MODEL, "max_tokens": 64, **body})


def events(client, **body):
    with client.stream("POST", "/v1/messages", json={"model": MODEL, "max_tokens": 64, "stream": True, **body}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = list(r.iter_lines())
    names = [line[7:] for line in lines if line.startswith("event: ")]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert [d["type"] for d in data] == names  # every event's name matches its data's type
    return data


def test_a_text_reply_in_anthropic_shape(served):
    client, *_ = served
    r = send(client, system="Be brief.", messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["id"].startswith("msg_") and data["type"] == "message" and data["role"] == "assistant"
    assert data["model"] == MODEL and data["content"] == [{"type": "text", "text": "Hello there, friend."}]
    assert data["stop_reason"] == "end_turn" and data["stop_sequence"] is None
    assert data["usage"]["output_tokens"] == 3 and data["usage"]["input_tokens"] > 0
    cut = send(client, max_tokens=2, messages=[{"role": "user", "content": "hi"}]).json()
    assert cut["stop_reason"] == "max_tokens" and cut["content"][0]["text"] == "Hello there,"


def test_tool_use_then_tool_result_is_the_judged_next_state(served):
    client, state, queue, policy = served
    first = send(client, messages=[U1], tools=[WEATHER])
    data = first.json()
    assert data["stop_reason"] == "tool_use"
    (block,) = data["content"]
    assert block["type"] == "tool_use" and block["id"].startswith("toolu_") and block["name"] == "get_weather"
    assert block["input"] == {"city": "Paris"}
    assert policy.last_tools[0]["function"]["parameters"] == WEATHER["input_schema"]
    second = send(client, tools=[WEATHER], messages=[
        U1, {"role": "assistant", "content": data["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block["id"], "content": "sunny"}]}])
    assert second.json()["content"] == [{"type": "text", "text": "It is sunny."}]
    state.collector.flush()
    ((turn, next_state),) = queue.turns_to_judge(10)
    assert turn.turn_id == data["id"].removeprefix("msg_") and next_state == "tool: sunny"
    assert RuleJudge().judge(turn, next_state).reward == 1
    # The receipt of an Anthropic reply works for explicit feedback too.
    r = client.post("/v1/feedback", json={"id": second.json()["id"], "score": -1},
                    headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and r.json()["reward"] == -1


def test_a_tool_error_reads_as_an_error_to_the_judge(served):
    client, state, queue, _ = served
    data = send(client, messages=[U1], tools=[WEATHER]).json()
    tool_id = data["content"][0]["id"]
    send(client, tools=[WEATHER], messages=[
        U1, {"role": "assistant", "content": data["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "is_error": True,
                                      "content": [{"type": "text", "text": "city unknown"}]}]}])
    state.collector.flush()
    ((turn, next_state),) = queue.turns_to_judge(10)
    assert next_state == "tool: Error: city unknown" and RuleJudge().judge(turn, next_state).reward == -1


def test_tool_choice_any_and_tool_are_forced(served):
    pytest.importorskip("llama_cpp")
    client, _, _, policy = served
    send(client, messages=[U1], tools=[WEATHER], tool_choice={"type": "tool", "name": "get_weather"})
    assert policy.last_grammar.startswith("root ::=") and "get_weather" in policy.last_grammar
    send(client, messages=[U1], tools=[WEATHER], tool_choice={"type": "any"})
    assert "get_weather" in policy.last_grammar
    none = send(client, messages=[U1], tools=[WEATHER], tool_choice={"type": "none"}).json()
    assert policy.last_tools is None and none["content"][0]["type"] == "text"


def test_streamed_text_events(served):
    client, *_ = served
    data = events(client, messages=[{"role": "user", "content": "hi"}])
    kinds = [d["type"] for d in data]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and data[1]["content_block"] == {"type": "text", "text": ""}
    text = "".join(d["delta"]["text"] for d in data if d["type"] == "content_block_delta")
    assert text == "Hello there, friend." and kinds.count("content_block_stop") == 1
    assert data[-2]["delta"]["stop_reason"] == "end_turn" and data[-2]["usage"]["output_tokens"] == 3


def test_streamed_tool_use_events(served):
    client, *_ = served
    data = events(client, messages=[U1], tools=[WEATHER])
    starts = [d for d in data if d["type"] == "content_block_start"]
    assert len(starts) == 1 and starts[0]["content_block"]["type"] == "tool_use"
    assert starts[0]["content_block"]["name"] == "get_weather" and starts[0]["content_block"]["input"] == {}
    partial = "".join(d["delta"]["partial_json"] for d in data if d["type"] == "content_block_delta")
    assert json.loads(partial) == {"city": "Paris"}
    assert data[-2]["delta"]["stop_reason"] == "tool_use"


@pytest.mark.parametrize("body, needle", [
    ({"messages": [U1]}, "max_tokens"),
    ({"max_tokens": 0, "messages": [U1]}, "max_tokens"),
    ({"max_tokens": 8, "messages": []}, "messages"),
    ({"max_tokens": 8, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content"),
    ({"max_tokens": 8, "messages": [U1], "temperature": 1.5}, "temperature"),
    ({"max_tokens": 8, "messages": [U1], "stop_sequences": "x"}, "stop_sequences"),
    ({"max_tokens": 8, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": "ok"}]}]}, "messages[0].content[0].tool_use_id"),
    ({"max_tokens": 8, "messages": [U1], "tools": [WEATHER], "tool_choice": {"type": "tool", "name": "nope"}},
     "tool_choice"),
    ({"max_tokens": 8, "messages": [U1], "tools": [WEATHER], "tool_choice": {"type": "tool"}}, "tool_choice.name"),
    ({"max_tokens": 8, "messages": [U1], "tool_choice": {"type": "any"}}, "tool_choice"),
    ({"max_tokens": 8, "messages": [U1], "tools": [{"name": "f", "input_schema": {"type": "array"}}]},
     "tools[0].input_schema"),
    ({"max_tokens": 8, "messages": [U1], "tools": [{"name": "f"}]}, "tools[0].input_schema"),
])
def test_bad_input_is_an_anthropic_shaped_400_naming_the_field(served, body, needle):
    client, state, *_ = served
    r = client.post("/v1/messages", json={"model": MODEL, **body})
    assert r.status_code == 400, r.text
    data = r.json()
    assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    assert needle in data["error"]["message"]
    assert state.requests == 0


def test_auth_model_and_json_errors(served):
    client, *_ = served
    url = str(client.base_url) + "/v1/messages"
    body = {"model": MODEL, "max_tokens": 8, "messages": [U1]}
    r = httpx.post(url, json=body, headers={"x-api-key": "wrong"})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert httpx.post(url, json=body, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    r = send(client, model="claude-x", messages=[U1])
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = client.post("/v1/messages", content=b"[1]", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["type"] == "error"
