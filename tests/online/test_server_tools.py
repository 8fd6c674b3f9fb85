"""Tools on ``/v1/chat/completions`` over a scripted policy: calls parsed into ``tool_calls``,
forced choices passed on as a grammar, streaming deltas, tool results as the judged next state,
and every inconsistent tool input a 400 naming the parameter."""

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
from ratchet.online.tool_calls import ReplySplitter, Tool, close_json, split_reply

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TESTS = {"type": "function", "function": {"name": "run_tests", "parameters": {"type": "object", "properties": {}}}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
U1 = {"role": "user", "content": "What is the weather in Paris?"}


def script(messages):
    """Calls the tool until a tool result came back, then answers in text."""
    last = messages[-1]
    if last["role"] == "tool":
        return f"It is {last['content']} in Paris."
    if "just talk" in str(last.get("content")):
        return "Hello there."
    return CALL


@pytest.fixture
def served(tmp_path):
    policy = ScriptedPolicy(script)
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue, served_name="ratchet-test")
    with ServerThread(create_app(state)) as server:
        client = httpx.Client(base_url=server.url, timeout=30)
        yield client, state, queue, policy
        client.close()
    state.collector.close()


def post(client, body, **headers):
    return client.post("/v1/chat/completions", json=body, headers=headers)


def test_a_call_comes_back_as_tool_calls(served):
    client, _, _, policy = served
    r = post(client, {"messages": [U1], "tools": [WEATHER, TESTS]})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    # The model saw the tools (its template renders them); "auto" constrains nothing.
    assert [t["function"]["name"] for t in policy.last_tools] == ["get_weather", "run_tests"]
    assert policy.last_grammar is None


def test_a_text_reply_with_tools_offered_stays_text(served):
    client, *_ = served
    r = post(client, {"messages": [{"role": "user", "content": "just talk"}], "tools": [WEATHER]})
    choice = r.json()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "Hello there."}
    assert choice["finish_reason"] == "stop"


def test_tool_choice_none_hides_the_tools_and_parses_nothing(served):
    client, _, _, policy = served
    r = post(client, {"messages": [U1], "tools": [WEATHER], "tool_choice": "none"})
    message = r.json()["choices"][0]["message"]
    assert policy.last_tools is None and "tool_calls" not in message and message["content"] == CALL


def test_a_forced_choice_is_decoded_under_the_tools_grammar(served):
    pytest.importorskip("llama_cpp")
    client, _, _, policy = served
    r = post(client, {"messages": [U1], "tools": [WEATHER, TESTS],
                      "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    grammar = policy.last_grammar
    assert grammar.startswith("root ::=") and '\\"get_weather\\"' in grammar and "run_tests" not in grammar
    post(client, {"messages": [U1], "tools": [WEATHER, TESTS], "tool_choice": "required"})
    assert "get_weather" in policy.last_grammar and "run_tests" in policy.last_grammar


def test_a_forced_choice_the_backend_ignored_is_an_error_not_text(tmp_path):
    policy = ScriptedPolicy("no call here")
    state = make_state(PolicyHost(lambda adapter: policy), TurnQueue(tmp_path / "q.db"))
    with ServerThread(create_app(state)) as server:
        r = httpx.post(server.url + "/v1/chat/completions", timeout=30,
                       json={"messages": [U1], "tools": [WEATHER], "tool_choice": "required"})
    state.collector.close()
    assert r.status_code == 502 and r.json()["error"]["code"] == "forced_call_failed"


def test_streamed_calls_are_tool_call_deltas(served):
    client, *_ = served
    with client.stream("POST", "/v1/chat/completions",
                       json={"messages": [U1], "tools": [WEATHER], "stream": True}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    deltas = [e["choices"][0]["delta"] for e in events]
    calls = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert len(calls) == 1 and calls[0][0]["index"] == 0 and calls[0][0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0][0]["function"]["arguments"]) == {"city": "Paris"}
    assert not any("<tool_call>" in (d.get("content") or "") for d in deltas)  # no markup leaks as text
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_openai_client_round_trip_and_the_tool_result_is_the_judged_next_state(served):
    openai = pytest.importorskip("openai")
    client, state, queue, _ = served
    oc = openai.OpenAI(base_url=str(client.base_url) + "/v1", api_key="none")
    first = oc.chat.completions.create(model="ratchet-test", messages=[U1], tools=[WEATHER])
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    messages = [U1, first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    second = oc.chat.completions.create(model="ratchet-test", messages=messages, tools=[WEATHER])
    assert second.choices[0].message.content == "It is sunny, 21 C in Paris."
    # Streaming through the stock client assembles the call from its delta.
    chunks = list(oc.chat.completions.create(model="ratchet-test", messages=[U1], tools=[WEATHER], stream=True))
    streamed = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert streamed[0].function.name == "get_weather"
    state.collector.flush()
    (work,) = queue.turns_to_judge(10)
    turn, next_state = work
    assert turn.turn_id == first.id.removeprefix("chatcmpl-")
    assert next_state == "tool: sunny, 21 C"
    assert RuleJudge().judge(turn, next_state).reward == 1
    # The recorded prompt holds the call with its arguments as an object, as the template reads it.
    assert turn.response_text == CALL


def test_a_failing_tool_is_judged_negative(served):
    client, state, queue, _ = served
    first = post(client, {"messages": [U1], "tools": [WEATHER]}, **{"X-Session-Id": "s"}).json()
    call = first["choices"][0]["message"]["tool_calls"][0]
    post(client, {"messages": [U1, first["choices"][0]["message"],
                               {"role": "tool", "tool_call_id": call["id"],
                                "content": "Traceback: KeyError 'Paris' not found"}], "tools": [WEATHER]},
         **{"X-Session-Id": "s"})
    state.collector.flush()
    ((turn, next_state),) = queue.turns_to_judge(10)
    assert next_state.startswith("tool: Traceback") and RuleJudge().judge(turn, next_state).reward == -1


@pytest.mark.parametrize("extra, param", [
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]},
     "tools[0].function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"properties": []}}}]},
     "tools[0].function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "str"}}}}}]}, "tools[0].function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {}, "required": ["x"]}}}]}, "tools[0].function.parameters"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
])
def test_bad_tool_input_is_a_400_naming_the_param(served, extra, param):
    client, state, *_ = served
    r = post(client, {"messages": [U1], **extra})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    assert state.requests == 0  # refused before generation


@pytest.mark.parametrize("messages, param", [
    ([U1, {"role": "tool", "tool_call_id": "c9", "content": "x"}], "messages[1].tool_call_id"),
    ([U1, {"role": "tool", "content": "x"}], "messages[1].tool_call_id"),
    ([U1, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                 "function": {"name": "f", "arguments": "{not json"}}]}],
     "messages[1].tool_calls[0].function.arguments"),
    ([U1, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                 "function": {"name": "f", "arguments": {"a": 1}}}]}],
     "messages[1].tool_calls[0].function.arguments"),
    ([U1, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
     "messages[1].tool_calls[0].id"),
])
def test_inconsistent_tool_messages_are_a_400(served, messages, param):
    client, *_ = served
    r = post(client, {"messages": messages})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_splitting_holds_back_a_tag_cut_between_pieces_and_keeps_unknown_calls_as_text():
    tools = [Tool("get_weather")]
    splitter = ReplySplitter(tools)
    out = []
    for piece in ["Let me check. <tool", "_call>\n{\"name\": \"get_weather\", \"argu", "ments\": {}}\n</tool_call>"]:
        out += splitter.feed(piece)
    out += splitter.finish()
    assert [k for k, _ in out] == ["text", "call"] and out[0][1] == "Let me check. "
    unknown = split_reply('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>', tools)
    assert unknown.calls == [] and "rm_rf" in unknown.content
    fenced = split_reply('```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```', tools)
    assert json.loads(fenced.calls[0].arguments) == {"city": "Oslo"} and fenced.content is None
    two = split_reply('{"name": "get_weather", "arguments": {"city": "A"}}\n{"name": "get_weather", "arguments": {}}',
                      tools)
    assert [json.loads(c.arguments) for c in two.calls] == [{"city": "A"}, {}]
    stray = split_reply('{"name": "get_weather", "arguments": {}}\n```', tools)
    assert len(stray.calls) == 1 and stray.content is None
    cut = split_reply('{"name": "get_weather", "arguments": {}}\n{"name": "get_weather", "argu', tools)
    assert len(cut.calls) == 1 and cut.truncated
    mixed = split_reply('{"name": "get_weather", "arguments": {}} and then some prose', tools)
    assert mixed.calls == [] and mixed.content.endswith("prose")


def test_a_forced_call_cut_short_still_has_arguments_that_parse():
    reply = split_reply('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', [Tool("get_weather")],
                        forced=True)
    assert reply.truncated and json.loads(reply.calls[0].arguments) == {"city": "Par"}
    for cut in ['{"a": [1, {"b": tr', '{"a\\', '{"a": ', '', '{"a": "x\\"y']:
        assert isinstance(json.loads(close_json(cut)), dict)


def test_an_http_backend_refuses_tools_with_a_400_instead_of_dropping_them(tmp_path):
    from ratchet.online.http_policy import HttpPolicy

    backend = HttpPolicy("http://127.0.0.1:9/v1", "m", timeout_s=2)  # never reached: refused before
    state = make_state(PolicyHost(lambda adapter: backend), TurnQueue(tmp_path / "q.db"))
    with ServerThread(create_app(state)) as server:
        r = httpx.post(server.url + "/v1/chat/completions", timeout=30, json={"messages": [U1], "tools": [WEATHER]})
    state.collector.close()
    assert r.status_code == 400 and r.json()["error"]["code"] == "tools_unsupported"
    assert r.json()["error"]["param"] == "tools"


def recorded(queue, turn_id):
    import sqlite3

    from ratchet.online.records import Turn

    row = sqlite3.connect(queue.path).execute("SELECT data FROM turns WHERE turn_id=?", (turn_id,)).fetchone()
    return Turn.from_dict(json.loads(row[0]))


def test_turns_record_why_generation_stopped_and_the_tools_the_model_saw(served):
    client, state, queue, _ = served
    called = post(client, {"messages": [U1], "tools": [WEATHER]}).json()
    talked = post(client, {"messages": [{"role": "user", "content": "just talk"}], "tools": [WEATHER]}).json()
    hidden = post(client, {"messages": [U1], "tools": [WEATHER], "tool_choice": "none"}).json()
    cut = post(client, {"messages": [{"role": "user", "content": "just talk"}], "max_tokens": 1}).json()
    assert cut["choices"][0]["finish_reason"] == "length"
    state.collector.flush()
    turns = {name: recorded(queue, body["id"].removeprefix("chatcmpl-"))
             for name, body in (("called", called), ("talked", talked), ("hidden", hidden), ("cut", cut))}
    assert turns["called"].finish_reason == "tool_calls" and turns["called"].tools == [WEATHER]
    assert turns["talked"].finish_reason == "stop" and turns["talked"].tools == [WEATHER] and turns["talked"].ended
    assert turns["hidden"].finish_reason == "stop" and turns["hidden"].tools == []  # not shown to the model
    assert turns["cut"].finish_reason == "length" and not turns["cut"].ended and turns["cut"].tools == []
