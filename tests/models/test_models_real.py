"""The real embedded default model through load_model (marked real_model; runs in CI)."""

from __future__ import annotations

import asyncio

import pytest

from ratchet.models import DEFAULT_MODEL, registry
from ratchet.models import load_model

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def qwen():
    if not registry.is_verified(DEFAULT_MODEL):
        pytest.skip(f"{DEFAULT_MODEL} is not pulled (run: ratchet models pull {DEFAULT_MODEL})")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the 'local' extra) is not installed")
    return load_model(f"local:{DEFAULT_MODEL}", n_ctx=1024, n_threads=1)  # a real-model test keeps to one core


def test_short_answer_with_usage(qwen):
    done = qwen.complete([{"role": "user", "content": "What is 7 times 6? Reply with the number only."}],
                         max_tokens=8)
    assert "42" in done.text
    assert done.usage.prompt_tokens > 10 and 0 < done.usage.completion_tokens <= 8
    assert done.model == f"local:{DEFAULT_MODEL}" and done.latency_s > 0
    assert done.logprobs is None  # not asked for, and logits_all is off


def test_grammar_constrains_the_answer(qwen):
    grammar = 'root ::= "move " [1-9]'
    prompt = "TicTacToe: the free cells are 2, 5 and 9. Pick one and answer as 'move N'."
    done = qwen.complete([{"role": "user", "content": prompt}], max_tokens=6, grammar=grammar)
    assert done.text.startswith("move ") and len(done.text) == 6 and done.text[-1].isdigit()


def test_async_and_determinism(qwen):
    msgs = [{"role": "user", "content": "Name a primary colour in one word."}]
    first = qwen.complete(msgs, max_tokens=5)
    second = asyncio.run(qwen.acomplete(msgs, max_tokens=5))
    assert first.text == second.text and first.text.strip()


def test_token_logprobs_with_logits_all():
    if not registry.is_verified("smollm2-135m"):
        pytest.skip("smollm2-135m is not pulled (run: ratchet models pull smollm2-135m)")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the 'local' extra) is not installed")
    small = load_model("local:smollm2-135m", n_ctx=256, logits_all=True, n_threads=1)
    done = small.complete([{"role": "user", "content": "Say hello."}], max_tokens=4, logprobs=True)
    assert done.logprobs is not None and len(done.logprobs) == done.usage.completion_tokens
    assert "".join(t.token for t in done.logprobs) == done.text
    assert all(t.logprob <= 0.0 for t in done.logprobs)


def test_code_block_grammar_gives_one_python_block(qwen):
    """The AutoHarness `grammar` idea with the real model: the answer is exactly one fenced block
    that the refiner's extractor turns into code that compiles."""
    from ratchet.envs.answers import CODE_BLOCK_GRAMMAR
    from ratchet.envs.answers import extract_code

    prompt = "Write a Python function add(a, b) that returns the sum of a and b."
    done = qwen.complete([{"role": "user", "content": prompt}], max_tokens=120, grammar=CODE_BLOCK_GRAMMAR)
    assert done.text.startswith("```python\n") and done.text.endswith("```") and done.text.count("```") == 2
    code = extract_code(done.text)
    assert code is not None and "def add" in code
    namespace: dict = {}
    exec(compile(code, "answer.py", "exec"), namespace)
    assert namespace["add"](2, 3) == 5


def test_an_assistant_prefix_is_continued_not_restarted(qwen):
    """A last assistant message is the start of the answer (the AutoHarness body request): the
    reply holds only what follows it, and prefix + reply is one function that runs."""
    from ratchet.envs.answers import extract_code
    from ratchet.models.request import continued

    prefix = '```python\ndef add(a, b):\n    """Return the sum of a and b."""\n'
    messages = [{"role": "user", "content": "Write a Python function add(a, b) that returns a + b."},
                {"role": "assistant", "content": prefix}]
    done = qwen.complete(messages, max_tokens=40, stop=["```"])
    assert "def add" not in done.text  # a continuation, not a new answer
    assert 0 < done.usage.completion_tokens <= 40
    code = extract_code(continued(messages, done.text) + "```")
    namespace: dict = {}
    exec(compile(code or "", "answer.py", "exec"), namespace)
    assert namespace["add"](2, 3) == 5


def test_a_reply_stuck_in_a_loop_is_ended_and_reported_as_cut():
    """SmolLM2 continuing a reply that already repeats one block goes on repeating it; the loop
    stop ends it at the least loop length (256 tokens) instead of the 900 asked for."""
    if not registry.is_verified("smollm2-135m"):
        pytest.skip("smollm2-135m is not pulled (run: ratchet models pull smollm2-135m)")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (the 'local' extra) is not installed")
    small = load_model("local:smollm2-135m", n_ctx=2048, n_threads=1)
    looped = [{"role": "user", "content": "Write a python docstring."},
              {"role": "assistant", "content": '"""A docstring.\n"""\n' * 4}]
    done = small.complete(looped, max_tokens=900)
    assert done.finish_reason == "length" and 256 <= done.usage.completion_tokens < 900
    small.config = small.config.model_copy(update={"loop_stop_tokens": None})
    assert small.complete(looped, max_tokens=400).usage.completion_tokens == 400
