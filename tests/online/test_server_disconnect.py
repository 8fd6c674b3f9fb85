"""A client that leaves mid-reply stops its generation: no tokens are generated for no one."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ratchet.online.policy import GenerationCancelled, PolicyHost, ScriptedPolicy
from ratchet.online.queue import TurnQueue
from ratchet.online.server import ServerThread, create_app, make_state

WORDS = 400  # at 20 ms a word: 8 s to the end, if nothing stops it
LONG = " ".join(f"w{i}" for i in range(WORDS))


class CountingPolicy(ScriptedPolicy):
    """The scripted policy, recording how many pieces each generation emitted and how it ended."""

    def __init__(self) -> None:
        super().__init__(LONG, token_delay_s=0.02)
        self.emitted: list[int] = []
        self.outcomes: list[str] = []
        self.first_piece = threading.Event()

    def generate(self, messages, *, on_text=None, **kwargs):
        count = [0]

        def sink(piece: str) -> None:
            count[0] += 1
            self.first_piece.set()
            if on_text is not None:
                on_text(piece)

        try:
            gen = super().generate(messages, on_text=sink, **kwargs)
        except GenerationCancelled:
            self.outcomes.append("cancelled")
            raise
        finally:
            self.emitted.append(count[0])
        self.outcomes.append("finished")
        return gen


@pytest.fixture
def served(tmp_path):
    policy = CountingPolicy()
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue, max_tokens=1000)
    with ServerThread(create_app(state)) as server:
        yield server, state, queue, policy
    state.collector.close()


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_stream_closed_mid_reply_stops_the_generation(served):
    server, state, queue, policy = served
    with httpx.Client(base_url=server.url, timeout=30) as client:
        with client.stream("POST", "/v1/chat/completions",
                           json={"messages": [{"role": "user", "content": "talk"}], "stream": True}) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            seen = [next(lines) for _ in range(6)]  # the role chunk and a few words
            assert any("w0" in line for line in seen)
        # Leaving the block closes the connection with the reply far from done.
    wait_for(lambda: policy.outcomes)
    assert policy.outcomes == ["cancelled"]
    assert policy.emitted[0] < WORDS // 2
    state.collector.flush()
    assert queue.stats()["turns"] == 0  # a reply nobody received is not a turn to learn from
    # The server still serves the next client in full.
    with httpx.Client(base_url=server.url, timeout=30) as client:
        out = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                        "max_tokens": 3})
    assert out.status_code == 200 and out.json()["choices"][0]["message"]["content"] == "w0 w1 w2"
    assert policy.outcomes == ["cancelled", "finished"]


def test_connection_dropped_during_a_non_streaming_reply_stops_it(served):
    server, state, queue, policy = served
    body = b'{"messages": [{"role": "user", "content": "talk"}]}'
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert policy.first_piece.wait(10)
    wait_for(lambda: policy.outcomes)
    assert policy.outcomes == ["cancelled"]
    assert policy.emitted[0] < WORDS // 2
