"""The one-function request answered without a body: a small model (the 1.5B on Tower of Hanoi,
Guess the Number, Lights Out) copies a long signature and docstring back, examples and all, and
stops. What tells a body from none, and how a continuation joins its prefix. (The three ideas that
answer it on the engine, the body asked for alone with the docstring as the reply's prefix, shorter
examples and the whole-harness request after two replies with no body: test_engine_ideas.py and
tests/evolve/test_autoharness_engine.py.)"""

from __future__ import annotations


import pytest

from ratchet.envs.answers import has_body
from ratchet.models.request import continued

def test_the_continuation_is_joined_to_its_prefix_unless_the_reply_starts_over():
    ask = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "```python\ndef f(x):\n"}]
    assert continued(ask, "    return x\n```") == "```python\ndef f(x):\n    return x\n```"
    assert continued(ask, "```python\ndef f(x):\n    return 2\n```") == "```python\ndef f(x):\n    return 2\n```"
    assert continued(ask[:1], "anything") == "anything"


@pytest.mark.parametrize("code, body", [
    ('def legal_moves(b):\n    """Doc."""\n', False),
    ('def legal_moves(b):\n    """Doc."""\n    pass\n', False),
    ('def legal_moves(b):\n    """Doc.\n    >>> legal_moves("x', False),  # cut off inside its docstring
    ('def legal_moves(b):\n    """Doc."""\n    return [b\n', True),  # a body, broken
    ("def other(b):\n    return 1\n", False),
    (None, False),
])
def test_what_counts_as_a_body(code, body):
    assert has_body(code, "legal_moves") is body
