"""A fixed prompt prefix set aside on the real embedded model: another prompt in between costs nothing on return."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def policy(pulled_gguf):
    from ratchet.online.llama_policy import LlamaPolicy

    policy = LlamaPolicy(pulled_gguf(MODEL), n_ctx=1024, n_threads=1, name=MODEL)
    yield policy
    policy.close()


def counted(policy) -> list[int]:
    """How many tokens each ``eval`` of the model evaluated, from now on."""
    sizes: list[int] = []
    inner = policy._llm.eval
    policy._llm.eval = lambda tokens: (sizes.append(len(tokens)), inner(tokens))[1]
    return sizes


@pytest.mark.real_model
def test_a_fixed_prefix_is_restored_after_another_prompt_and_reads_the_same(policy):
    fixed = [{"role": "system", "content": "Say whether the person liked the answer. " * 20},
             {"role": "user", "content": "Answer: 4. Reply: thanks!"}, {"role": "assistant", "content": "praise"}]
    ask = [*fixed, {"role": "user", "content": "Answer: Paris. Reply: that's wrong"}]
    other = [{"role": "system", "content": "Say whether the command succeeded."}, {"role": "user", "content": "exit 1"}]
    ids = [policy.first_token(w) for w in ("praise", "correction")]

    fresh = policy.next_token_logprobs(ask, ids)  # no prefix kept: the reference reading
    policy.next_token_logprobs(other, ids)
    sizes = counted(policy)
    first = policy.next_token_logprobs(ask, ids, fixed=len(fixed))  # evaluates all, keeps the prefix
    whole = sum(sizes)
    policy.next_token_logprobs(other, ids)  # another prompt replaces the cache
    sizes.clear()
    again = policy.next_token_logprobs(ask, ids, fixed=len(fixed))
    whole_ids, head = policy.prompt_tokens(ask), policy.prompt_tokens(fixed)
    kept = next(i for i, (a, b) in enumerate(zip([*head, None], whole_ids)) if a != b)
    assert kept > 100 and sum(sizes) == len(whole_ids) - kept < whole / 3  # only what follows the prefix
    assert np.allclose(first, fresh, atol=1e-3) and np.allclose(again, fresh, atol=1e-3)


@pytest.mark.real_model
def test_an_unkept_prefix_or_a_changed_one_is_evaluated_in_full(policy):
    a = [{"role": "system", "content": "Instructions A. " * 30}, {"role": "user", "content": "hello"}]
    b = [{"role": "system", "content": "Instructions B. " * 30}, {"role": "user", "content": "hello"}]
    ids = [policy.first_token("yes")]
    policy.next_token_logprobs(a, ids, fixed=1)
    sizes = counted(policy)
    fresh_b = policy.next_token_logprobs(b, ids, fixed=1)  # another fixed prefix: nothing to restore
    assert sum(sizes) >= len(policy.prompt_tokens(b)) - 5  # shares at most the template's opening
    assert np.isfinite(fresh_b).all()
