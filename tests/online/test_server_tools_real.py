"""Tools with the real embedded 0.5B: a forced ``tool_choice`` always comes back as a call whose
arguments parse (grammar-constrained decoding), through the stock ``openai`` client and through an
Anthropic-shaped request."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

MODEL = "qwen2.5-coder-0.5b"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather forecast for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city", "days"]}}}
RUN = {"type": "function", "function": {
    "name": "run_shell", "description": "Run a shell command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ratchet.models.registry import cached_path
    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.policy import PolicyHost
    from ratchet.online.queue import TurnQueue
    from ratchet.online.server import ServerThread, create_app, make_state

    path = cached_path(MODEL)
    if not path.is_file():
        pytest.skip(f"{MODEL} is not pulled (ratchet models pull {MODEL})")
    policy = LlamaPolicy(path, n_ctx=2048, n_threads=1, name=MODEL)
    queue = TurnQueue(tmp_path_factory.mktemp("tools") / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue, served_name=MODEL)
    with ServerThread(create_app(state)) as srv:
        yield srv, state, queue
    state.collector.close()


@pytest.mark.real_model
def test_forced_tool_choice_always_returns_parseable_arguments(server):
    openai = pytest.importorskip("openai")
    srv, state, queue = server
    oc = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", timeout=300)
    # A prompt that invites prose, not a call: the grammar must still produce the forced call.
    prompts = ["Tell me a joke about cats.", "What's the weather like in Oslo for the next 3 days?"]
    for prompt, temperature in zip(prompts, (0.0, 0.8), strict=True):
        out = oc.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], tools=[WEATHER, RUN], max_tokens=48,
            temperature=temperature, seed=5, tool_choice={"type": "function", "function": {"name": "get_weather"}})
        choice = out.choices[0]
        assert choice.finish_reason in ("tool_calls", "length")
        (call,) = choice.message.tool_calls
        assert call.function.name == "get_weather"
        assert isinstance(json.loads(call.function.arguments), dict)
        if choice.finish_reason == "tool_calls":  # complete: the schema's required keys are there
            assert {"city", "days"} <= set(json.loads(call.function.arguments))
    # The tool's result goes back; the model answers and the first turn's next state is the result.
    messages = [{"role": "user", "content": "What's the weather like in Oslo for the next 3 days?"},
                out.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "rain, 8 C"}]
    answer = oc.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER], max_tokens=24)
    assert answer.choices[0].message.content or answer.choices[0].message.tool_calls
    state.collector.flush()
    assert any(next_state == "tool: rain, 8 C" for _, next_state in queue.turns_to_judge(10))


PROMPTS = ["Tell me a joke about cats.", "What's the weather like in Oslo for the next 3 days?",
           "Delete the build folder, then say done."]


@pytest.mark.real_model
@pytest.mark.parametrize("choice", [{"type": "function", "function": {"name": "run_shell"}}, "required"],
                         ids=["named", "required"])
def test_a_forced_choice_is_always_calls_whose_arguments_parse(server, choice):
    """Three prompts, one inviting prose: every reply is one or more calls of the tools sent (of
    the named one when named), each with arguments that parse as a JSON object."""
    srv, *_ = server
    for prompt, temperature in zip(PROMPTS, (0.0, 0.8, 0.0), strict=True):
        r = httpx.post(srv.url + "/v1/chat/completions", timeout=300, json={
            "model": MODEL, "messages": [{"role": "user", "content": prompt}], "tools": [WEATHER, RUN],
            "tool_choice": choice, "max_tokens": 64, "temperature": temperature, "seed": 3})
        assert r.status_code == 200, r.text
        choice_out = r.json()["choices"][0]
        calls = choice_out["message"].get("tool_calls")
        assert calls, (prompt, choice_out)
        assert choice_out["finish_reason"] in ("tool_calls", "length")
        for call in calls:
            assert call["function"]["name"] in ({"run_shell"} if choice != "required" else {"run_shell", "get_weather"})
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
        if choice != "required":
            assert len(calls) == 1


@pytest.mark.real_model
def test_anthropic_request_with_a_forced_tool_round_trips(server):
    srv, *_ = server
    r = httpx.post(srv.url + "/v1/messages", timeout=300, json={
        "model": MODEL, "max_tokens": 48, "messages": [{"role": "user", "content": "List the files here."}],
        "tools": [{"name": RUN["function"]["name"], "description": RUN["function"]["description"],
                   "input_schema": RUN["function"]["parameters"]}],
        "tool_choice": {"type": "tool", "name": "run_shell"}})
    assert r.status_code == 200, r.text
    data = r.json()
    uses = [b for b in data["content"] if b["type"] == "tool_use"]
    assert len(uses) == 1 and uses[0]["name"] == "run_shell" and isinstance(uses[0]["input"], dict)
    assert data["stop_reason"] in ("tool_use", "max_tokens")
