"""OpenAIModel against a stub OpenAI-compatible server on 127.0.0.1 (no network)."""

from __future__ import annotations

import asyncio

import pytest

from openai_stub import chat_body
from ratchet.contracts import RatchetError
from ratchet.models import OpenAIModel

MSGS = [{"role": "user", "content": "hi"}]


def make(server, **settings):
    settings = {"backoff_s": 0.01, "backoff_max_s": 0.05, "max_retries": 3, "timeout_s": 5,
                "require_api_key": False, "api_key_env": "RATCHET_API_KEY", **settings}
    return OpenAIModel("stub-model", base_url=server.base_url, **settings)


def test_success_text_usage_logprobs(stub_server):
    stub_server.replies = [(200, chat_body("hello", 11, 2))]
    done = make(stub_server).complete(MSGS, max_tokens=9, stop=["\n"], seed=3, logprobs=True)
    assert done.text == "hello" and done.usage.prompt_tokens == 11 and done.usage.completion_tokens == 2
    assert done.logprobs[0].token == "ok" and done.logprobs[0].logprob == -0.25
    assert done.latency_s > 0
    sent = stub_server.requests[0]
    assert sent["model"] == "stub-model" and sent["max_tokens"] == 9 and sent["stop"] == ["\n"]
    assert sent["seed"] == 3 and sent["logprobs"] is True and "grammar" not in sent


def test_429_then_success_is_retried(stub_server):
    stub_server.replies = [(429, {"error": {"message": "slow down"}}), (200, chat_body("after retry"))]
    assert make(stub_server).complete(MSGS).text == "after retry"
    assert len(stub_server.requests) == 2


def test_async_retries_too(stub_server):
    stub_server.replies = [(503, {"error": {"message": "busy"}}), (200, chat_body("async ok"))]
    assert asyncio.run(make(stub_server).acomplete(MSGS)).text == "async ok"
    assert len(stub_server.requests) == 2


def test_500s_until_give_up(stub_server):
    stub_server.replies = [(500, {"error": {"message": "boom"}})]
    with pytest.raises(RatchetError) as err:
        make(stub_server, max_retries=2).complete(MSGS)
    assert "gave up after 3 attempts" in str(err.value) and "500" in str(err.value)
    assert len(stub_server.requests) == 3


def test_401_is_an_auth_error_naming_the_key(stub_server):
    stub_server.replies = [(401, {"error": {"message": "bad key"}})]
    with pytest.raises(RatchetError) as err:
        make(stub_server).complete(MSGS)
    assert "HTTP 401" in str(err.value) and "RATCHET_API_KEY" in err.value.hint
    assert len(stub_server.requests) == 1  # never retried


def test_404_lists_the_servers_models(stub_server):
    stub_server.replies = [(404, {"error": {"message": "model not found"}})]
    with pytest.raises(RatchetError) as err:
        make(stub_server).complete(MSGS)
    text = str(err.value)
    assert "not found" in text and "stub-model" in text and "other-model" in text


def test_async_404_lists_models(stub_server):
    stub_server.replies = [(404, {"error": {"message": "model not found"}})]
    with pytest.raises(RatchetError, match="other-model"):
        asyncio.run(make(stub_server).acomplete(MSGS))


def test_grammar_refused_unless_server_accepts_it(stub_server):
    stub_server.replies = [(200, chat_body("yes"))]
    with pytest.raises(RatchetError, match="grammar"):
        make(stub_server).complete(MSGS, grammar='root ::= "yes"')
    assert stub_server.requests == []
    assert make(stub_server, accepts_grammar=True).complete(MSGS, grammar='root ::= "yes"').text == "yes"
    assert stub_server.requests[0]["grammar"] == 'root ::= "yes"'


def test_connection_refused_gives_up_with_hint():
    model = OpenAIModel("m", base_url="http://127.0.0.1:9/v1", require_api_key=False, max_retries=1,
                        backoff_s=0.01, timeout_s=2)
    with pytest.raises(RatchetError) as err:
        model.complete(MSGS)
    assert "cannot reach" in str(err.value) and "gave up after 2 attempts" in str(err.value)
