"""The server with the real embedded 0.5B model: token ids and raw-logit log-probs come back."""

from __future__ import annotations

import math

import httpx
import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def gguf(pulled_gguf):
    return pulled_gguf(MODEL)


@pytest.mark.real_model
def test_real_model_chat_completion_with_token_ids_and_logprobs(gguf, tmp_path):
    from ratchet.online.llama_policy import LlamaPolicy
    from ratchet.online.policy import PolicyHost
    from ratchet.online.queue import TurnQueue
    from ratchet.online.sampling import log_softmax
    from ratchet.online.server import ServerThread, create_app, make_state

    policy = LlamaPolicy(gguf, n_ctx=1024, n_threads=1, name=f"local:{MODEL}")
    queue = TurnQueue(tmp_path / "q.db")
    state = make_state(PolicyHost(lambda adapter: policy), queue)
    messages = [{"role": "user", "content": "Name one sorting algorithm. One word."}]
    with ServerThread(create_app(state)) as server:
        r = httpx.post(server.url + "/v1/chat/completions", timeout=120, json={
            "messages": messages, "max_tokens": 12, "temperature": 0.7, "seed": 3, "logprobs": True},
            headers={"X-Session-Id": "real"})
        streamed = httpx.post(server.url + "/v1/chat/completions", timeout=120, json={
            "messages": messages, "max_tokens": 12, "stream": True})
    state.collector.close()
    assert r.status_code == 200 and streamed.status_code == 200 and "data: [DONE]" in streamed.text
    data = r.json()
    ids = data["ratchet"]["response_token_ids"]
    lps = [t["logprob"] for t in data["choices"][0]["logprobs"]["content"]]
    assert data["choices"][0]["message"]["content"].strip()
    assert len(ids) == len(lps) >= 1
    assert all(math.isfinite(lp) and lp <= 0.0 for lp in lps)
    assert len(data["ratchet"]["prompt_token_ids"]) > 5

    # The collected turn carries the same numbers.
    assert queue.stats()["turns"] == 2
    stored = TurnQueue(tmp_path / "q.db").session_turn_ids("real")
    assert len(stored) == 1

    # Raw-logit check: teacher-force prompt + response in a fresh context and compare. The logprobs
    # were recorded while SAMPLING at temperature 0.7, but must equal the untempered log-softmax.
    from llama_cpp import Llama

    scorer = Llama(model_path=str(gguf), n_ctx=512, n_threads=1, logits_all=True, verbose=False)
    prompt = data["ratchet"]["prompt_token_ids"]
    scorer.eval(prompt + ids)
    expected = [float(log_softmax(np.array(scorer.scores[len(prompt) - 1 + k]))[tok]) for k, tok in enumerate(ids)]
    assert np.allclose(lps, expected, atol=0.05), (lps, expected)
    tempered = [float(log_softmax(np.array(scorer.scores[len(prompt) - 1 + k]) / 0.7)[tok])
                for k, tok in enumerate(ids)]
    if any(abs(a - b) > 0.1 for a, b in zip(expected, tempered, strict=True)):
        assert not np.allclose(lps, tempered, atol=0.05)
