"""``tool_choice: "auto"`` made robust for small models, and ``"required"``, over a scripted policy.

Under "auto" nothing constrains the reply, and the small Qwen2.5 coders write their calls as bare
JSON (``{"name": "bash", "arguments": {...}}``) without the template's tags. A reply that is
nothing but such calls is returned as ``tool_calls``; anything else (prose around JSON, a tool that
was not sent, arguments that are not an object) stays text. ``"required"`` is a grammar of one or
more calls; one when parallel calls are off."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ratchet.online.policy import PolicyHost, ScriptedPolicy
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state
from ratchet.online.tool_calls import CallConstraint, Tool, choice_constraint, split_reply

BASH = {"type": "function", "function": {
    "name": "bash", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
SUBMIT = {"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {}}}}
LS = '{"name": "bash", "arguments": {"command": "ls -la"}}'
TOOLS = [Tool("bash"), Tool("submit")]

#: Replies the 0.5B wrote under "auto" (bench/results/online_tool_agent.json), and their kin.
AS_CALLS = {
    "bare": (LS, [("bash", {"command": "ls -la"})]),
    "fenced": (f"```json\n{LS}\n```", [("bash", {"command": "ls -la"})]),
    "two in a row": (f'{LS}\n{{"name": "submit", "arguments": {{}}}}', [("bash", {"command": "ls -la"}), ("submit", {})]),
    "an array": (f'[{LS}, {{"name": "submit", "parameters": {{}}}}]', [("bash", {"command": "ls -la"}), ("submit", {})]),
    "OpenAI's shape": ('{"type": "function", "function": {"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}}',
                       [("bash", {"command": "pwd"})]),
    "one fence per call": (f'```json\n{LS}\n```\n\n```\n{{"name": "submit", "arguments": {{}}}}\n```',
                           [("bash", {"command": "ls -la"}), ("submit", {})]),
    "a stray closing fence": (f"{LS}\n```", [("bash", {"command": "ls -la"})]),
    "tags without the closing one": (f"<tool_call>\n{LS}\n", [("bash", {"command": "ls -la"})]),
}
AS_TEXT = {
    "prose around JSON": f"Run this: {LS} and tell me.",
    "JSON then prose": f"{LS}\nThat lists the files.",
    "an undeclared tool": '{"name": "rm_rf", "arguments": {"path": "/"}}',
    "one undeclared among declared": f'{LS}\n{{"name": "rm_rf", "arguments": {{}}}}',
    "no arguments written": '{"name": "bash"}',
    "arguments not an object": '{"name": "bash", "arguments": ["ls"]}',
    "other JSON": '{"city": "Paris", "days": 3}',
    "the prompt's example copied": '[Makes bash tool call with {"command": "ls -la"} as arguments]',
    "a code block": "```python\nprint('bash')\n```",
}


@pytest.fixture
def serve(tmp_path):
    """A server whose scripted policy answers with the reply set on ``policy.reply``."""
    box = {"reply": ""}
    policy = ScriptedPolicy(lambda messages: box["reply"])
    state = make_state(PolicyHost(lambda adapter: policy), TurnQueue(tmp_path / "q.db"), served_name="m")
    with ServerThread(create_app(state)) as server:
        client = httpx.Client(base_url=server.url, timeout=30)

        def ask(reply: str, **body):
            box["reply"] = reply
            return client.post("/v1/chat/completions", json={
                "messages": [{"role": "user", "content": "List the files."}], "tools": [BASH, SUBMIT], **body})

        yield ask, client, box, policy
        client.close()
    state.collector.close()


@pytest.mark.parametrize("case", sorted(AS_CALLS))
def test_a_reply_of_nothing_but_calls_comes_back_as_tool_calls(serve, case):
    ask, *_ = serve
    reply, expected = AS_CALLS[case]
    r = ask(reply)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == expected
    assert len({c["id"] for c in calls}) == len(calls)


@pytest.mark.parametrize("case", sorted(AS_TEXT))
def test_anything_else_stays_text_as_written(serve, case):
    ask, *_ = serve
    r = ask(AS_TEXT[case])
    choice = r.json()["choices"][0]
    assert "tool_calls" not in choice["message"]
    assert choice["message"]["content"] == AS_TEXT[case]
    assert choice["finish_reason"] == "stop"


def test_bare_calls_stream_as_tool_call_deltas_and_bare_text_streams_intact(serve):
    _, client, box, _ = serve

    def stream(reply):
        box["reply"] = reply
        with client.stream("POST", "/v1/chat/completions", json={
                "messages": [{"role": "user", "content": "List the files."}], "tools": [BASH, SUBMIT],
                "stream": True}) as r:
            return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]

    events = stream(f"```json\n{LS}\n```\n{{\"name\": \"submit\", \"arguments\": {{}}}}")
    deltas = [e["choices"][0]["delta"] for e in events]
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert [(c["index"], c["function"]["name"]) for c in calls] == [(0, "bash"), (1, "submit")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"command": "ls -la"}
    assert not any(d.get("content") for d in deltas)  # none of the JSON leaks as text
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"

    text = AS_TEXT["the prompt's example copied"]
    events = stream(text)
    deltas = [e["choices"][0]["delta"] for e in events]
    assert "".join(d.get("content") or "" for d in deltas) == text
    assert not any("tool_calls" in d for d in deltas)
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


def test_a_call_cut_after_complete_ones_is_left_out_and_the_reply_says_length(serve):
    ask, *_ = serve
    tagged = f"<tool_call>\n{LS}\n</tool_call>\n<tool_call>\n{LS[:20]}"
    reply = split_reply(tagged, TOOLS, forced=True)
    assert [c.name for c in reply.calls] == ["bash"] and reply.truncated
    r = ask(f"{LS}\n{LS}\n{LS[:25]}", max_tokens=8)  # a model repeating its call until max_tokens
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert [json.loads(c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] == [{"command": "ls -la"}]


def test_required_asks_for_one_or_more_calls_and_one_when_parallel_calls_are_off(serve):
    pytest.importorskip("llama_cpp")
    from llama_cpp.llama_grammar import LlamaGrammar

    ask, _, _, policy = serve
    two = f"<tool_call>\n{LS}\n</tool_call>\n<tool_call>\n{{\"name\": \"submit\", \"arguments\": {{}}}}\n</tool_call>"
    r = ask(two, tool_choice="required")
    assert [c["function"]["name"] for c in r.json()["choices"][0]["message"]["tool_calls"]] == ["bash", "submit"]
    several = policy.last_grammar
    assert several.startswith('root ::= call ( "\\n" call )*\n') and '\\"bash\\"' in several and "submit" in several
    ask(two, tool_choice="required", parallel_tool_calls=False)
    assert policy.last_grammar.startswith("root ::= call\n") and "submit" in policy.last_grammar
    ask(two, tool_choice={"type": "function", "function": {"name": "bash"}})
    assert policy.last_grammar.startswith("root ::= call\n") and "submit" not in policy.last_grammar
    for grammar in (several, policy.last_grammar):  # llama.cpp reads them
        LlamaGrammar.from_string(grammar, verbose=False)


def test_anthropic_any_with_parallel_use_disabled_is_one_call(serve):
    pytest.importorskip("llama_cpp")
    _, client, box, policy = serve
    box["reply"] = f"<tool_call>\n{LS}\n</tool_call>"
    body = {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": "List the files."}],
            "tools": [{"name": "bash", "input_schema": BASH["function"]["parameters"]}]}
    r = client.post("/v1/messages", json={**body, "tool_choice": {"type": "any"}})
    assert r.status_code == 200, r.text
    assert policy.last_grammar.startswith("root ::= call (")
    r = client.post("/v1/messages", json={**body, "tool_choice": {"type": "any", "disable_parallel_tool_use": True}})
    assert r.status_code == 200 and [b["name"] for b in r.json()["content"] if b["type"] == "tool_use"] == ["bash"]
    assert policy.last_grammar.startswith("root ::= call\n")


def test_choice_constraints():
    assert choice_constraint(TOOLS, "auto") is None and choice_constraint(TOOLS, "none") is None
    assert choice_constraint(TOOLS, "required") == CallConstraint(tuple(TOOLS), None, several=True)
    assert choice_constraint(TOOLS, "required", parallel=False) == CallConstraint(tuple(TOOLS), None, several=False)
    assert choice_constraint(TOOLS, "bash", parallel=True) == CallConstraint(tuple(TOOLS), "bash", several=False)
