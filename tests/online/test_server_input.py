"""Strict input on /v1/chat/completions: every bad request gets its 4xx in OpenAI's error shape,
naming the field, and a huge body is refused before it is read, without holding up other requests."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ratchet.online.policy import PolicyHost, RequestRefused, ScriptedPolicy  # noqa: E402
from ratchet.online.queue import TurnQueue  # noqa: E402
from ratchet.online.server import ServerThread, create_app, make_state  # noqa: E402

U1 = {"role": "user", "content": "write a sort function"}
LIMIT_BYTES = 64 * 1024
CONTEXT = 50  # prompt "tokens" (words) the scripted policy's context allows


@pytest.fixture
def server(tmp_path):
    policy = ScriptedPolicy("sorted(x)", max_prompt_tokens=CONTEXT, token_delay_s=0.0)
    state = make_state(PolicyHost(lambda adapter: policy), TurnQueue(tmp_path / "q.db"), served_name="ratchet-test",
                       max_body_bytes=LIMIT_BYTES)
    with ServerThread(create_app(state)) as srv:
        yield srv, state, policy
    state.collector.close()


def with_(**fields):
    return {"messages": [U1], **fields}


BAD = [
    # (body, status, param the error must name)
    (with_(max_tokens="lots"), 400, "max_tokens"),
    (with_(max_tokens=-5), 400, "max_tokens"),
    (with_(max_tokens=0), 400, "max_tokens"),
    (with_(max_tokens=True), 400, "max_tokens"),
    (with_(max_completion_tokens=-1), 400, "max_completion_tokens"),
    (with_(temperature="hot"), 400, "temperature"),
    (with_(temperature=-1), 400, "temperature"),
    (with_(temperature=2.5), 400, "temperature"),
    (with_(top_p=0), 400, "top_p"),
    (with_(top_p=1.5), 400, "top_p"),
    (with_(top_p="high"), 400, "top_p"),
    (with_(seed="abc"), 400, "seed"),
    (with_(seed=1.5), 400, "seed"),
    (with_(seed=1 << 63), 400, "seed"),  # OpenAI's seeds are 64-bit signed integers
    (with_(seed=-(1 << 63) - 1), 400, "seed"),
    (with_(stop=5), 400, "stop"),
    (with_(stop=["a", 5]), 400, "stop"),
    (with_(stop=["a", "b", "c", "d", "e"]), 400, "stop"),
    (with_(n=2), 400, "n"),
    (with_(stream="yes"), 400, "stream"),
    (with_(logprobs="yes"), 400, "logprobs"),
    (with_(presence_penalty=3), 400, "presence_penalty"),
    (with_(model=7), 400, "model"),
    ({"messages": [1, 2]}, 400, "messages[0]"),
    ({"messages": "hello"}, 400, "messages"),
    ({"messages": []}, 400, "messages"),
    ({}, 400, "messages"),
    ({"messages": [{"role": "user", "content": 42}]}, 400, "messages[0].content"),
    ({"messages": [{"role": "user", "content": {"text": "hi"}}]}, 400, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]}, 400,
     "messages[0].content"),
    ({"messages": [{"role": "wizard", "content": "abracadabra"}]}, 400, "messages[0].role"),
    ({"messages": [{"content": "no role"}]}, 400, "messages[0].role"),
    ({"messages": [{"role": "user"}]}, 400, "messages"),
    ({"messages": [U1, {"role": 3, "content": "x"}]}, 400, "messages[1].role"),
    (with_(model="gpt-17"), 404, "model"),
    ({"messages": [{"role": "user", "content": " ".join(["word"] * (CONTEXT + 1))}]}, 400, "messages"),
]


@pytest.mark.parametrize(("body", "status", "param"), BAD, ids=[f"{p}-{i}" for i, (_, _, p) in enumerate(BAD)])
@pytest.mark.parametrize("stream", [False, True])
def test_bad_request_gets_its_4xx_naming_the_field(server, body, status, param, stream):
    srv, state, policy = server
    if stream and "stream" not in body and isinstance(body, dict):
        body = {**body, "stream": True}
    calls = policy.calls
    r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["code"]
    if error["code"] not in ("context_length_exceeded", "model_not_found"):
        assert f"'{param}'" in error["message"]
    assert policy.calls == calls  # refused before generating
    assert state.errors == 0  # none of these is a server error


def test_the_limits_are_stated_in_the_errors(server):
    srv, *_ = server
    long = {"messages": [{"role": "user", "content": " ".join(["word"] * 80)}]}
    r = httpx.post(srv.url + "/v1/chat/completions", json=long, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert "80 tokens" in r.json()["error"]["message"] and f"at most {CONTEXT}" in r.json()["error"]["message"]
    r = httpx.post(srv.url + "/v1/chat/completions", json=with_(model="gpt-17"), timeout=30)
    assert "gpt-17" in r.json()["error"]["message"] and "ratchet-test" in r.json()["error"]["message"]
    r = httpx.post(srv.url + "/v1/chat/completions", json=with_(temperature="hot"), timeout=30)
    assert "'temperature'" in r.json()["error"]["message"] and '"hot"' in r.json()["error"]["message"]


@pytest.mark.parametrize("body", [
    with_(),
    with_(model="ratchet-test", max_tokens=3, temperature=0, top_p=1, seed=7, stop=["x"], n=1, stream=False),
    with_(temperature=2, top_p=0.5, stop="x", logprobs=False, user="me", tools=[], presence_penalty=0.5),
    with_(seed=-1), with_(seed=(1 << 63) - 1),
    {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text",
                                                                                           "text": "hi"}]}]},
    {"messages": [U1, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "content": "ok", "tool_call_id": "c1"}]},
])
def test_good_requests_still_pass(server, body):
    srv, *_ = server
    r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text


def test_list_content_is_joined_to_text(server):
    srv, state, policy = server
    seen = []
    policy._reply = lambda messages: seen.append(messages) or "ok"
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]}]}
    assert httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=30).status_code == 200
    assert seen == [[{"role": "user", "content": "a b"}]]


def test_a_backend_refusal_mid_stream_is_the_clients_error_not_the_servers(server):
    srv, state, policy = server

    def refuse(messages):
        raise RequestRefused("the prompt is 9 tokens; the served context allows at most 8 prompt tokens",
                             code="context_length_exceeded", param="messages")

    policy._reply = refuse
    with httpx.stream("POST", srv.url + "/v1/chat/completions", json=with_(stream=True), timeout=30) as r:
        events = [line.removeprefix("data: ") for line in r.iter_lines() if line.startswith("data: ")]
    error = json.loads(next(e for e in events if '"error"' in e))["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "context_length_exceeded"
    assert error["param"] == "messages" and "at most 8 prompt tokens" in error["message"]
    r = httpx.post(srv.url + "/v1/chat/completions", json=with_(), timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    assert state.errors == 0


def test_a_prompt_far_over_the_context_is_refused_from_its_bound_without_the_tokenizer(tmp_path):
    class Bounded(ScriptedPolicy):
        """Knows a lower bound of its prompt length; its tokenizer takes its time, as a real one does."""

        tokenized = 0

        def prompt_tokens_at_least(self, messages):
            return sum(len(str(m.get("content") or "")) for m in messages) // 10

        def prompt_tokens(self, messages):
            Bounded.tokenized += 1
            return super().prompt_tokens(messages)

    policy = Bounded("ok", max_prompt_tokens=CONTEXT)
    state = make_state(PolicyHost(lambda adapter: policy), None, max_body_bytes=LIMIT_BYTES)
    with ServerThread(create_app(state)) as srv:
        huge = {"messages": [{"role": "user", "content": "x" * (LIMIT_BYTES // 2)}]}
        r = httpx.post(srv.url + "/v1/chat/completions", json=huge, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
        assert f"at least {LIMIT_BYTES // 20} tokens" in r.json()["error"]["message"]
        assert Bounded.tokenized == 0 and policy.calls == 0
        # Within the bound, the tokenizer decides as before.
        r = httpx.post(srv.url + "/v1/chat/completions", json=with_(), timeout=30)
        assert r.status_code == 200 and Bounded.tokenized == 1
    state.collector.close()


def test_not_json_and_not_an_object(server):
    srv, *_ = server
    deep = b'{"messages": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    nan = b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}'
    r = httpx.post(srv.url + "/v1/chat/completions", content=nan, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"
    for raw in (b"{not json", b"[1, 2]", b"\xff\xfe", b'"just a string"', deep):
        r = httpx.post(srv.url + "/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json", raw


def _raw_request(url: str, headers: list[str], body_chunks, *, read_timeout: float = 10.0) -> tuple[bytes, int]:
    """Send a request by hand (so the server may answer before the body is sent); (response, body
    bytes the server let us send before it closed the connection)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=read_timeout)
    sent = [0]
    head = "\r\n".join(["POST /v1/chat/completions HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
                        *headers, "", ""])
    sock.sendall(head.encode())

    def upload() -> None:
        try:
            for chunk in body_chunks:
                sock.sendall(chunk)
                sent[0] += len(chunk)
        except OSError:  # the server answered and closed: the rest is never read
            pass

    sender = threading.Thread(target=upload, daemon=True)
    sender.start()
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + 10:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    finally:
        sender.join(10)
        sock.close()
    return data, sent[0]


def test_a_20_mb_body_is_refused_with_413_before_it_is_read(server):
    srv, state, policy = server
    size = 20 * 1024 * 1024
    body = (b'{"messages": [{"role": "user", "content": "' + b"x" * size + b'"}]}')
    chunks = (body[i : i + (1 << 16)] for i in range(0, len(body), 1 << 16))
    # Declared length: refused from the headers alone.
    response, sent = _raw_request(srv.url, [f"Content-Length: {len(body)}"], chunks)
    assert response.startswith(b"HTTP/1.1 413"), response[:200]
    assert sent < len(body)  # the server closed the connection instead of reading 20 MB
    assert b"request_too_large" in response and str(LIMIT_BYTES).encode() in response
    # No declared length (chunked): counted as it arrives and refused once past the limit.
    def chunked():
        for i in range(0, len(body), 1 << 16):
            piece = body[i : i + (1 << 16)]
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        yield b"0\r\n\r\n"

    response2, sent2 = _raw_request(srv.url, ["Transfer-Encoding: chunked"], chunked())
    assert response2.startswith(b"HTTP/1.1 413"), response2[:200]
    assert sent2 < len(body)
    assert policy.calls == 0 and state.errors == 0


def test_a_huge_upload_does_not_stall_other_requests(server):
    srv, state, policy = server

    answered = threading.Event()

    def slow_huge():  # a client trickling a huge chunked body: a quarter of the limit, then the rest
        piece = b"x" * 4096
        for _ in range(LIMIT_BYTES // 4 // len(piece)):
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        answered.wait(30)  # still uploading while the other request is served
        for _ in range(LIMIT_BYTES // len(piece)):
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"

    result: list[bytes] = []
    uploader = threading.Thread(
        target=lambda: result.append(_raw_request(srv.url, ["Transfer-Encoding: chunked"], slow_huge())[0]),
        daemon=True)
    uploader.start()
    time.sleep(0.2)  # the upload is in progress
    r = httpx.post(srv.url + "/v1/chat/completions", json=with_(), timeout=30)
    upload_open = uploader.is_alive() and not result
    answered.set()
    assert r.status_code == 200 and upload_open  # answered while the huge upload was still coming in
    uploader.join(30)
    assert result and result[0].startswith(b"HTTP/1.1 413")


@pytest.mark.real_model
def test_an_over_long_prompt_to_the_embedded_model_is_a_400_with_its_context(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from ratchet.models.registry import cached_path
    from ratchet.online.llama_policy import LlamaPolicy

    gguf = cached_path("smollm2-135m")
    if not gguf.is_file():
        pytest.skip("smollm2-135m is not pulled (ratchet models pull smollm2-135m)")
    policy = LlamaPolicy(gguf, n_ctx=256, n_threads=1, name="local:smollm2-135m")
    state = make_state(PolicyHost(lambda adapter: policy), None)
    with ServerThread(create_app(state)) as srv:
        long = {"messages": [{"role": "user", "content": "count: " + " ".join(str(i) for i in range(400))}]}
        r = httpx.post(srv.url + "/v1/chat/completions", json=long, timeout=120)
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded", r.text
        assert "at most 255 prompt tokens" in r.json()["error"]["message"]
        ok = httpx.post(srv.url + "/v1/chat/completions", json={**with_(), "max_tokens": 4}, timeout=120)
        assert ok.status_code == 200, ok.text
        # A prompt of exactly the limit still gets its reply token (it was a 500: one position short).
        words = 1
        while len(policy.prompt_tokens([{"role": "user", "content": "a" + " a" * words}])) < 255:
            words += 1
        at_limit = [{"role": "user", "content": "a" + " a" * words}]
        assert len(policy.prompt_tokens(at_limit)) == 255
        r = httpx.post(srv.url + "/v1/chat/completions", json={"messages": at_limit, "max_tokens": 8}, timeout=120)
        assert r.status_code == 200, r.text
        # Any 64-bit seed samples (a negative one was a 500), and the same seed samples the same reply.
        sampled = [httpx.post(srv.url + "/v1/chat/completions", timeout=120, json={
            **with_(), "max_tokens": 12, "temperature": 1.5, "seed": seed}) for seed in (-1, -1, (1 << 63) - 1)]
        assert [s.status_code for s in sampled] == [200, 200, 200], sampled[0].text
        assert sampled[0].json()["choices"][0]["message"] == sampled[1].json()["choices"][0]["message"]
        # 1.5 MB of prompt is refused from the vocabulary's bound, without seconds of tokenizing.
        huge = {"messages": [{"role": "user", "content": "x" * 1_500_000}]}
        started = time.monotonic()
        r = httpx.post(srv.url + "/v1/chat/completions", json=huge, timeout=120)
        assert r.status_code == 400 and "the prompt is at least" in r.json()["error"]["message"], r.text
        assert time.monotonic() - started < 1.0
        assert state.errors == 0
    state.collector.close()
    policy.close()
